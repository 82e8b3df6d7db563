"""Small GGUF files for fuzz_gguf's seed corpus, made from the fixture files.

The fixtures (tests/fixtures/gguf/) are 0.5-1.8 MB; a seed must fit the
target's 128 KiB input limit. Each fixture's metadata and tokenizer are kept
and its model cut to one layer of width 32 (one head of 32, so the Llama 3
`rope_freqs.weight` still fits) with deterministic random tensor data; a
metadata-only copy and a SentencePiece-style ("llama") tokenizer built from
the Mistral fixture tokenizer reach the other tokenizer path.
"""
import json
import random
import struct

# Metadata value types, numbered as in the file: struct format of the scalars.
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
# ggml tensor types: (elements per block, bytes per block).
# ggml type -> (elements, bytes) of a block: F32, F16, BF16, Q8_0, Q4_0, Q4_1,
# Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
          20: (32, 18), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
          23: (256, 136)}
ALIGNMENT = 32


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def scalar(self, fmt):
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self):
        length = self.scalar("<Q")
        self.at += length
        return self.data[self.at - length:self.at].decode("utf-8")

    def value(self, kind):
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            element, count = self.scalar("<I"), self.scalar("<Q")
            return element, [self.value(element) for _ in range(count)]
        return self.scalar(SCALARS[kind])


def read_gguf(data):
    """(metadata [(key, type, value)], tensors [(name, dims, type)])."""
    r = Reader(data)
    assert r.data[:4] == b"GGUF"
    r.at = 8
    tensor_count, metadata_count = r.scalar("<Q"), r.scalar("<Q")
    metadata = []
    for _ in range(metadata_count):
        key, kind = r.string(), r.scalar("<I")
        metadata.append((key, kind, r.value(kind)))
    tensors = []
    for _ in range(tensor_count):
        name, n_dims = r.string(), r.scalar("<I")
        dims = [r.scalar("<Q") for _ in range(n_dims)]
        kind, _offset = r.scalar("<I"), r.scalar("<Q")
        tensors.append((name, dims, kind))
    return metadata, tensors


def encode_value(kind, value):
    if kind == STRING:
        raw = value.encode("utf-8")
        return struct.pack("<Q", len(raw)) + raw
    if kind == ARRAY:
        element, items = value
        return struct.pack("<IQ", element, len(items)) + b"".join(encode_value(element, v) for v in items)
    return struct.pack(SCALARS[kind], value)


def write_gguf(metadata, tensors):
    """A version-3 file; tensors are (name, dims, type, data bytes)."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for key, kind, value in metadata:
        out += encode_value(STRING, key) + struct.pack("<I", kind) + encode_value(kind, value)
    offset = 0
    for name, dims, kind, data in tensors:
        out += encode_value(STRING, name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", kind, offset)
        offset += (len(data) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    out += bytes(-len(out) % ALIGNMENT)
    for _name, _dims, _kind, data in tensors:
        out += data + bytes(-len(data) % ALIGNMENT)
    return bytes(out)


def shrink_dims(name, dims, vocab):
    """The tensor's dims in a one-layer model of width 32 and feed-forward 64."""
    if name == "token_embd.weight" or name == "output.weight":
        return [32, vocab]
    if name == "rope_freqs.weight":
        return dims
    part = name.split(".")[2] if name.startswith("blk.") else ""
    if len(dims) == 1:
        return [32]
    if part in ("ffn_gate", "ffn_up"):
        return [32, 64]
    if part == "ffn_down":
        return [64, 32]
    return [32, 32]


def tiny_model(metadata, tensors, data, rng):
    """`metadata` with a one-layer width-32 model, and its tensors."""
    sizes = {"block_count": 1, "embedding_length": 32, "feed_forward_length": 64, "attention.head_count": 1,
             "attention.head_count_kv": 1}
    vocab = next(len(v[1]) for k, _, v in metadata if k == "tokenizer.ggml.tokens")
    out_meta = []
    for key, kind, value in metadata:
        suffix = key.split(".", 1)[1] if "." in key else ""
        out_meta.append((key, kind, sizes.get(suffix, value) if not key.startswith("tokenizer") else value))
    out_tensors = []
    for name, dims, kind in tensors:
        if name.startswith("blk.") and not name.startswith("blk.0."):
            continue
        new_dims = shrink_dims(name, dims, vocab)
        block_elements, block_bytes = BLOCKS[kind]
        if len(new_dims) == 2 and new_dims[0] % block_elements:
            new_dims = [block_elements, new_dims[1]]  # K-quant rows are whole 256-blocks
        elements = 1
        for d in new_dims:
            elements *= d
        if name == "rope_freqs.weight":
            payload = original_tensor(data, tensors, name)
        else:
            payload = rng.randbytes(elements // block_elements * block_bytes)
        out_tensors.append((name, new_dims, kind, payload))
    return out_meta, out_tensors


def original_tensor(data, tensors, wanted):
    """The bytes of tensor `wanted` in the fixture file `data`."""
    r = Reader(data)
    r.at = 8
    tensor_count, metadata_count = r.scalar("<Q"), r.scalar("<Q")
    for _ in range(metadata_count):
        r.string()
        r.value(r.scalar("<I"))
    offsets = {}
    for _ in range(tensor_count):
        name, n_dims = r.string(), r.scalar("<I")
        r.at += 8 * n_dims + 4
        offsets[name] = r.scalar("<Q")
    start = (r.at + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT + offsets[wanted]
    dims = next(d for n, d, _ in tensors if n == wanted)
    return data[start:start + 4 * dims[0]]


def spm_tokenizer(tokenizer_json, vocab_size=300):
    """tokenizer.ggml.* metadata of a "llama" (SentencePiece) tokenizer: the
    lowest ids of a SentencePiece-style tokenizer.json, scored by id."""
    model = json.loads(tokenizer_json)
    by_id = sorted((i, t) for t, i in model["model"]["vocab"].items() if i < vocab_size)
    added = {a["id"] for a in model.get("added_tokens", [])}
    tokens = [t for _, t in by_id]
    types = [3 if i in added else 6 if t.startswith("<0x") else 1 for i, t in by_id]
    return [("general.architecture", STRING, "llama"), ("tokenizer.ggml.model", STRING, "llama"),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)), ("tokenizer.ggml.token_type", ARRAY, (5, types)),
            ("tokenizer.ggml.scores", ARRAY, (6, [-float(i) for i, _ in by_id])),
            ("tokenizer.ggml.bos_token_id", 4, 1), ("tokenizer.ggml.eos_token_id", 4, 2),
            ("tokenizer.ggml.unknown_token_id", 4, 0), ("tokenizer.ggml.add_space_prefix", 7, True)]


def seeds(fixtures):
    out = []
    for path in sorted((fixtures / "gguf").glob("*.gguf")):
        data = path.read_bytes()
        metadata, tensors = read_gguf(data)
        rng = random.Random(path.name)
        out.append(write_gguf(*tiny_model(metadata, tensors, data, rng)))
        out.append(write_gguf(metadata, []))
    spm = fixtures / "text" / "tokenizers" / "mistral_spm" / "tokenizer.json"
    out.append(write_gguf(spm_tokenizer(spm.read_text()), []))
    return out
