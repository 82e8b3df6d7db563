#!/usr/bin/env python3
"""Writes the seed corpus of one fuzz target from the test fixtures.

    make_seeds.py TARGET CORPUS_DIR

Each seed is a file named by its content's SHA-1, so re-running adds
nothing twice and never removes what the fuzzer found. The input formats
are those the targets in tests/fuzz/ read (see each target's comment).
"""
import copy
import hashlib
import json
import pathlib
import struct
import sys

import gguf_seeds

repo = pathlib.Path(__file__).resolve().parents[2]
fixtures = repo / "tests" / "fixtures"


def completions_bodies():
    """Completions bodies covering each prompt form and the sampling fields."""
    return [
        {"model": "m", "prompt": "Hello", "max_tokens": 8},
        {"model": "m", "prompt": ["a", "b"], "n": 2, "temperature": 0.7, "top_p": 0.9, "top_k": 5, "seed": 3},
        {"model": "m", "prompt": [1, 2, 3], "logprobs": 2, "echo": True, "stop": ["\n", "x"]},
        {"model": "m", "prompt": [[1, 2], [3]], "stream": True, "stream_options": {"include_usage": True}},
        {"prompt": "x", "logit_bias": {"5": -100}, "presence_penalty": 1.5, "frequency_penalty": -1,
         "repetition_penalty": 1.1, "min_p": 0.1, "min_tokens": 2, "ignore_eos": True, "stop_token_ids": [4],
         "skip_special_tokens": False, "priority": 1, "deadline_ms": 500, "user": "u", "best_of": 1,
         "suffix": None, "metadata": {"k": "v"}, "store": False, "service_tier": "auto", "speculative": False},
    ]


def chat_bodies():
    """Chat bodies: every fixture conversation, plus tools and response_format variants."""
    bodies = []
    conversations = json.loads((fixtures / "chat" / "conversations.json").read_text())["conversations"]
    for conversation in conversations:
        body = {"model": "m", "messages": conversation["messages"], "max_tokens": 16}
        if conversation.get("tools"):
            body["tools"] = conversation["tools"]
            body["tool_choice"] = "auto"
        bodies.append(body)
    tool = {"type": "function", "function": {"name": "f", "description": "d",
                                             "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}
    user = [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]}]
    for choice in ["none", "required", {"type": "function", "function": {"name": "f"}}]:
        bodies.append({"messages": user, "tools": [tool], "tool_choice": choice, "parallel_tool_calls": False})
    for response_format in [{"type": "text"}, {"type": "json_object"},
                            {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}}]:
        bodies.append({"messages": user, "response_format": response_format, "max_completion_tokens": 4,
                       "logprobs": True, "top_logprobs": 2, "chat_template_kwargs": {"enable_thinking": False},
                       "add_generation_prompt": False})
    return bodies


def seeds_openai_request():
    # First byte: even → completions, odd → chat.
    return [b"\x00" + json.dumps(b).encode() for b in completions_bodies()] + \
           [b"\x01" + json.dumps(b).encode() for b in chat_bodies()]


def seeds_ws_message():
    frames = [{"type": "ping", "data": {"t": 1}}, {"type": "cancel", "id": "r1"}, {"type": "cancel", "id": 7}]
    for i, body in enumerate(completions_bodies()):
        frames.append(dict(body, type="generate", id=i, endpoint="completions"))
    for i, body in enumerate(chat_bodies()[:12]):
        frames.append(dict(body, type="generate", id=f"c{i}", endpoint="chat"))
    return [json.dumps(f).encode() for f in frames]


def seeds_admin_patch():
    bodies = [{}, {"policy": "fcfs"}, {"policy": "mlfq", "mlfq_quantum": 64}, {"preemption_mode": "swap"},
              {"max_num_batched_tokens": 2048, "max_num_seqs": 16}, {"max_prefill_chunk": 512},
              {"max_waiting_requests": 100}, {"num_speculative_tokens": 3, "speculative_adaptive": True},
              {"speculative_max_batch": 8}, {"policy": 1}, {"max_num_seqs": "4"}]
    return [json.dumps(b).encode() for b in bodies]


def seeds_tokenizer_encode():
    # First byte: bit 0 picks the tokenizer, bit 1 the special-token flags.
    lines = (fixtures / "text" / "strings.jsonl").read_text(encoding="utf-8").split("\n")
    texts = [json.loads(line).encode("utf-8", "surrogatepass") for line in lines if line.strip()]
    return [bytes([i % 4]) + t for i, t in enumerate(texts)]


def tiny_tokenizer(full, vocab_size=400):
    """`full` with its BPE vocabulary cut to the lowest ids and the merges among them."""
    out = copy.deepcopy(full)
    model = out["model"]
    vocab = {token: i for token, i in model["vocab"].items() if i < vocab_size}
    merges = []
    for merge in model.get("merges", []):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        if left in vocab and right in vocab and left + right in vocab:
            merges.append(merge)
    model["vocab"], model["merges"] = vocab, merges
    renumbered = {}
    for offset, added in enumerate(out.get("added_tokens", [])[:16]):
        renumbered[added["content"]] = vocab_size + offset
        added["id"] = vocab_size + offset
    out["added_tokens"] = out.get("added_tokens", [])[:16]
    post = out.get("post_processor") or {}
    for processor in [post] + post.get("processors", []):
        for name, special in (processor.get("special_tokens") or {}).items():
            special["ids"] = [renumbered.get(name, 0) for _ in special.get("ids", [])]
    return out


def seeds_tokenizer_json():
    # tokenizer.json, a NUL, then the text to encode.
    bases = {}
    for directory in sorted((fixtures / "text" / "tokenizers").iterdir()):
        bases[directory.name] = tiny_tokenizer(json.loads((directory / "tokenizer.json").read_text()))
    seeds = [json.dumps(t).encode() + b"\x00Hello world, 123 caf\xc3\xa9!\n" for t in bases.values()]
    for variant in json.loads((fixtures / "text" / "variants.json").read_text()):
        patched = dict(bases[variant["base"]], **variant["patch"])
        text = variant["cases"][0]["text"].encode() if variant["cases"] else b"x"
        seeds.append(json.dumps(patched).encode() + b"\x00" + text)
    return seeds


def seeds_safetensors():
    files = sorted(p for p in fixtures.rglob("*.safetensors") if p.stat().st_size <= 65536)
    return [p.read_bytes() for p in files]


def safetensors_bytes(tensors):
    """A .safetensors file of {name: (dtype, shape, raw bytes)}."""
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def packed_projection(method, out, inputs, group, sym, v2, act_order, salt, bits=4):
    """qweight, qzeros, scales (and g_idx) of one projection in AWQ's or GPTQ's layout."""
    words = lambda n, base: struct.pack(f"<{n}I", *[(base * 2654435761 + i * 40503 + salt) & 0xFFFFFFFF
                                                  for i in range(n)])
    groups = inputs // group
    scales = struct.pack(f"<{groups * out}e", *[0.01 + 0.001 * (i % 7) for i in range(groups * out)])
    if method == "awq":
        parts = {"qweight": ("I32", [inputs, out // 8], words(inputs * out // 8, 3)),
                 "qzeros": ("I32", [groups, out // 8], words(groups * out // 8, 5))}
    else:
        per_word = 32 // bits
        zero_word = {(4, True): 0x88888888, (4, False): 0x77777777, (8, True): 0x80808080, (8, False): 0x7F7F7F7F}
        zeros = struct.pack(f"<{groups * out // per_word}I", *[zero_word[bits, v2]] * (groups * out // per_word)) \
            if sym else words(groups * out // per_word, 7)
        parts = {"qweight": ("I32", [inputs // per_word, out], words(inputs // per_word * out, 11)),
                 "qzeros": ("I32", [groups, out // per_word], zeros)}
        if act_order:  # AutoGPTQ's act-order: group members scattered, group_size of each
            parts["g_idx"] = ("I32", [inputs], struct.pack(f"<{inputs}i", *[(k * 37) % inputs // group
                                                                            for k in range(inputs)]))
    parts["scales"] = ("F16", [groups, out], scales)
    return parts


def seeds_hf_int4():
    # config.json, a NUL, then a .safetensors file: one layer of width 64 whose
    # q, k and down projections are packed as the quantization_config says.
    base = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 64,
            "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 32, "rms_norm_eps": 1e-5, "max_position_embeddings": 128}
    variants = [({"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm"},
                 False, False, False),
                ({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "version": "GEMM"}, False, False, False),
                ({"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": True, "desc_act": False},
                 True, False, False),
                ({"quant_method": "gptq", "bits": 4, "group_size": 64, "sym": False, "desc_act": True},
                 False, False, True),
                ({"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": True, "checkpoint_format": "gptq_v2"},
                 True, True, False),
                ({"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": False, "desc_act": True},
                 False, False, True),
                ({"quant_method": "gptq", "bits": 8, "group_size": 32, "sym": False, "desc_act": True},
                 False, False, True),
                ({"quant_method": "gptq", "bits": 8, "group_size": 64, "sym": True}, True, False, False)]
    seeds = []
    for index, (quant, sym, v2, act_order) in enumerate(variants):
        group = quant.get("group_size", quant.get("q_group_size"))
        group = 64 if group == -1 else group
        tensors = {}
        for name, (out, inputs) in {"self_attn.q_proj": (64, 64), "self_attn.k_proj": (32, 64),
                                    "mlp.down_proj": (64, 64)}.items():
            for part, tensor in packed_projection(quant["quant_method"], out, inputs, group, sym, v2, act_order,
                                                  index, quant.get("bits", 4)).items():
                tensors[f"model.layers.0.{name}.{part}"] = tensor
        config = dict(base, quantization_config=quant)
        seeds.append(json.dumps(config).encode() + b"\x00" + safetensors_bytes(tensors))
    return seeds


def seeds_chat_template():
    # Template alone (rendered with the target's conversation), or template, NUL, context JSON.
    seeds = [p.read_bytes() for p in sorted((fixtures / "chat" / "templates").glob("*.jinja"))]
    for snippet in json.loads((fixtures / "chat" / "snippets.json").read_text()):
        seeds.append(snippet["template"].encode() + b"\x00" + json.dumps(snippet.get("context", {})).encode())
    return seeds


def seeds_gguf():
    return gguf_seeds.seeds(fixtures)


def constraint_seeds():
    """(kind number as in constraint_kind, text) pairs: the fixture tools' parameter
    schemas as JSON schemas and structural tags, and each other kind's syntax."""
    conversations = json.loads((fixtures / "chat" / "conversations.json").read_text())["conversations"]
    schemas = [t["function"]["parameters"] for c in conversations for t in c.get("tools") or []
               if t.get("function", {}).get("parameters")]
    schemas += [{"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 9},
                                                  "tags": {"type": "array", "items": {"enum": ["a", "b"]},
                                                           "maxItems": 3},
                                                  "when": {"type": "string", "format": "date-time"},
                                                  "next": {"$ref": "#"}}, "required": ["id"]},
                {"anyOf": [{"type": "number"}, {"type": "string", "pattern": "[a-z]{2,4}"}, {"const": None}]}]
    seeds = [(0, "")] + [(1, json.dumps(s)) for s in schemas]
    seeds += [(5, json.dumps({"type": "structural_tag", "triggers": ["<tool_call>"], "separator": "\n",
                              "structures": [{"begin": "<tool_call>", "schema": s, "end": "</tool_call>"}]}))
              for s in schemas[:4]]
    seeds += [(2, r) for r in [r"[0-9]{3}-[0-9]{4}", r"(yes|no|maybe)", r"\d+(\.\d{1,2})?", r"[^\n\"]{0,12};",
                               r"[à-ÿ]{2,4}|[α-ω]+!", r"(?:ab|a)(bc|c)?x*", r"\u{1F600}+\x41"]]
    seeds += [(3, json.dumps(c)) for c in [["positive", "negative", "neutral", "pos"], ["é", "", "a\"b"]]]
    seeds += [(4, g) for g in [
        'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= [0-9]{1,3} | "(" expr ")"\n',
        'root ::= pair+\npair ::= "(" pair* ")" | "[" pair* "]"\n',
        "# comment\nroot ::= [a-z]+ ws 'x'? .\nws ::= [ \\t\\n]*\n"]]
    return seeds


def seeds_constraints():
    # First byte: kind (value % 6) and vocabulary (bit 3); the rest is the constraint text.
    return [bytes([kind + 8 * vocab]) + text.encode() for kind, text in constraint_seeds() for vocab in (0, 1)]


def main():
    target, corpus = sys.argv[1], pathlib.Path(sys.argv[2])
    make = globals().get("seeds_" + target.removeprefix("fuzz_"))
    if make is None:
        sys.exit(f"make_seeds.py: no seeds for target '{target}'")
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in make():
        (corpus / hashlib.sha1(seed).hexdigest()).write_bytes(seed)


if __name__ == "__main__":
    main()
