#!/usr/bin/env python3
"""Stage 2: trains the demo model's byte-level BPE tokenizer on the corpus.

The pipeline has the shape of Llama 3's (regex split, byte-level alphabet,
beginning-of-text added by the post-processor) so that troupe's ordinary
tokenizer.json loader is exercised, with a vocabulary of 8,192 ids: the
first five are the special tokens a chat model needs. Writes tokenizer.json,
tokenizer_config.json (with the chat template) and the token ids of the
train and held-out splits (uint16 .npy, documents separated by
<|end_of_text|>) for the training stages.
"""

import argparse
import json
import pathlib

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

VOCAB_SIZE = 8192
BOS, EOS, START_HEADER, END_HEADER, EOT = (
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")
SPECIAL_TOKENS = [BOS, EOS, START_HEADER, END_HEADER, EOT]

# Words with their leading space, numbers in groups of up to three digits,
# punctuation runs, newlines and other whitespace each form their own piece.
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Each message is a header naming the role, a blank line, the text and the
# end-of-turn token; generation starts after an assistant header.
CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' -}}"
    "{{- message['content'] | trim -}}"
    "{{- '<|eot_id|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}"
    "{%- endif -%}")


def read_docs(path: pathlib.Path):
    with open(path) as f:
        for line in f:
            yield json.loads(line)["text"]


def build(corpus: pathlib.Path) -> Tokenizer:
    tok = Tokenizer(models.BPE(byte_fallback=False, ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(read_docs(corpus / "train.jsonl"), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS}:1 $B:1",
                                      special_tokens=[(BOS, bos_id)]),
    ])
    return tok


def tokenizer_config() -> dict:
    return {
        "bos_token": BOS,
        "eos_token": EOT,
        "pad_token": EOS,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 2048,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def encode_split(tok: Tokenizer, path: pathlib.Path) -> np.ndarray:
    """Ids of every document, each followed by <|end_of_text|> (no BOS)."""
    eos = tok.token_to_id(EOS)
    ids = []
    docs = list(read_docs(path))
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eos)
    return np.asarray(ids, dtype=np.uint16)


def main():
    here = pathlib.Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", type=pathlib.Path, default=here / "work" / "corpus")
    ap.add_argument("--out", type=pathlib.Path, default=here / "work" / "tokenizer")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tok = build(args.corpus)
    tok.save(str(args.out / "tokenizer.json"))
    (args.out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    stats = {}
    for split in ("train", "heldout"):
        ids = encode_split(tok, args.corpus / f"{split}.jsonl")
        np.save(args.out / f"{split}.npy", ids)
        stats[split + "_tokens"] = int(ids.size)
        stats[split + "_bytes"] = sum(len(t.encode()) + 1 for t in read_docs(args.corpus / f"{split}.jsonl"))
    stats["vocab_size"] = tok.get_vocab_size()
    (args.out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
