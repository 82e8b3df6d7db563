#!/usr/bin/env python3
"""Stage 3a: measures which target size learns most in a fixed compute budget.

Trains each candidate shape for the same number of training FLOPs
(6 x parameters x tokens, plus attention) and records its final held-out loss
and the process CPU time it used, to work/sweep.json (keyed shape@flops). Run
at two or more budgets, the trend of each shape's loss with compute decides
`--shape` of the main run (docs/models.md says what was measured and chosen)."""

import argparse
import json
import pathlib
import resource
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from train import SHAPES  # noqa: E402


def train_flops_per_token(shape, seq: int) -> float:
    return 6 * shape.parameter_count() + 12 * shape.num_hidden_layers * seq * shape.hidden_size


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shapes", default="t3m,t7m,t13m")
    ap.add_argument("--flops", type=float, default=4e13, help="training FLOPs per candidate")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1, help="one thread is robust on a shared machine")
    args = ap.parse_args()
    results = {}
    out = HERE / "work" / "sweep.json"
    if out.exists():
        results = json.loads(out.read_text())
    for name in args.shapes.split(","):
        key = f"{name}@{args.flops:g}"
        if key in results:
            continue
        shape = SHAPES[name]
        tokens = args.flops / train_flops_per_token(shape, args.seq)
        run = HERE / "work" / "sweep" / key
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, str(HERE / "train.py"), "pretrain", "--run", str(run), "--shape", name,
                        "--tokens", str(tokens), "--seq", str(args.seq), "--batch", str(args.batch),
                        "--warmup", "50", "--eval-every", "100000", "--threads", str(args.threads)], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        last = [json.loads(l) for l in open(run / "log.jsonl")][-1]
        results[key] = {"parameters": shape.parameter_count(), "tokens": last["tokens"],
                         "heldout_loss": last["heldout_loss"],
                         "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(key, results[key], flush=True)


if __name__ == "__main__":
    main()
