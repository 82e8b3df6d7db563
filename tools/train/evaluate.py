#!/usr/bin/env python3
"""Stage 7: measures the exported pair and writes the test fixtures.

  evaluate.py --target work/export/troupe-demo-en --draft work/export/troupe-demo-en-draft

Loads both directories with Hugging Face transformers (the outside reference)
and reports, on the held-out split:
  - perplexity of the target, of the draft and of a unigram baseline (counts
    from the training split, add-one smoothed), each over non-overlapping
    windows of --window tokens;
  - the draft's greedy top-1 agreement with the target (same positions);
  - sample completions.
Writes work/eval.json and, with --fixtures DIR, the held-out split as one
text, its HF tokenizer ids, and transformers' perplexity of it for each
model, which the C++ tests compare troupe's loader, tokenizer and
perplexity against.
"""

import argparse
import json
import math
import pathlib

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

HERE = pathlib.Path(__file__).resolve().parent


def load(path: pathlib.Path):
    model = AutoModelForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32)
    return model.eval()


@torch.no_grad()
def window_logits(model, ids: np.ndarray, window: int):
    """Yields (logits [n, vocab], ids [n]) of each non-overlapping window."""
    for start in range(0, ids.size, window):
        chunk = torch.from_numpy(ids[start:start + window].astype(np.int64))
        if chunk.numel() < 2:
            break
        yield model(chunk[None]).logits[0].float(), chunk


def perplexity(model, ids: np.ndarray, window: int) -> float:
    total, count = 0.0, 0
    for logits, chunk in window_logits(model, ids, window):
        total += F.cross_entropy(logits[:-1], chunk[1:], reduction="sum").item()
        count += chunk.numel() - 1
    return math.exp(total / count)


@torch.no_grad()
def agreement(target, draft, ids: np.ndarray, window: int) -> float:
    same, count = 0, 0
    for (t_logits, _), (d_logits, _) in zip(window_logits(target, ids, window), window_logits(draft, ids, window)):
        same += (t_logits.argmax(-1) == d_logits.argmax(-1)).sum().item()
        count += t_logits.shape[0]
    return same / count


def unigram_perplexity(train: np.ndarray, held: np.ndarray, vocab: int) -> float:
    counts = np.bincount(train, minlength=vocab).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return math.exp(-logp[held[1:]].mean())


@torch.no_grad()
def complete(model, tok: Tokenizer, prompt: str, tokens: int) -> str:
    ids = tok.encode(prompt).ids
    out = model.generate(torch.tensor([ids]), max_new_tokens=tokens, do_sample=False)
    return tok.decode(out[0, len(ids):].tolist())


def write_fixtures(out: pathlib.Path, corpus: pathlib.Path, tok: Tokenizer, models: dict, window: int):
    """The whole held-out split as one text, its HF ids, and transformers' perplexity of it per model."""
    text = "\n\n".join(json.loads(l)["text"] for l in open(corpus / "heldout.jsonl"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "heldout.txt").write_text(text)
    ids = np.asarray(tok.encode(text).ids, dtype=np.int64)  # with <|begin_of_text|>, as `troupe score` encodes
    reference = {"text_file": "heldout.txt", "window": window, "ids": ids.tolist(), "perplexity": {}}
    for name, model in models.items():
        reference["perplexity"][name] = perplexity(model, ids, window)
    (out / "heldout_reference.json").write_text(json.dumps(reference) + "\n")
    return reference


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", type=pathlib.Path, required=True)
    ap.add_argument("--draft", type=pathlib.Path, required=True)
    ap.add_argument("--data", type=pathlib.Path, default=HERE / "work" / "tokenizer")
    ap.add_argument("--corpus", type=pathlib.Path, default=HERE / "work" / "corpus")
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--fixtures", type=pathlib.Path)
    args = ap.parse_args()
    torch.set_num_threads(2)
    tok = Tokenizer.from_file(str(args.target / "tokenizer.json"))
    target, draft = load(args.target), load(args.draft)
    held = np.load(args.data / "heldout.npy")
    train = np.load(args.data / "train.npy")
    report = {
        "heldout_tokens": int(held.size),
        "window": args.window,
        "perplexity": {
            "target": perplexity(target, held, args.window),
            "draft": perplexity(draft, held, args.window),
            "unigram": unigram_perplexity(train, held, tok.get_vocab_size()),
        },
        "draft_top1_agreement": agreement(target, draft, held, args.window),
        "parameters": {"target": sum(p.numel() for p in target.parameters()),
                       "draft": sum(p.numel() for p in draft.parameters())},
        "samples": {p: complete(target, tok, p, 48) for p in
                    ("In the beginning", "The Python interpreter", "A hacker is", "And Jesus said")},
    }
    if args.fixtures:
        ref = write_fixtures(args.fixtures, args.corpus, tok, {"target": target, "draft": draft}, args.window)
        report["fixture_perplexity"] = ref["perplexity"]
    (HERE / "work" / "eval.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
