#!/usr/bin/env python3
"""Speculative decoding speed: decode tokens/s with and without each
proposer at batch 1, 8 and 32 on (a) an input-grounded workload and (b) free
generation, with acceptance alongside; and output tokens/s through
`troupe serve` at 8 concurrent streams (the first proposer listed is the
baseline of the speed-up column). Greedy, ignore_eos, so every run
generates the same tokens with and without speculation.

Offline rows drive `troupe generate --speculative P --json` (all prompts
submitted at once; it reports decode speed and acceptance on stderr). The
grounded prompt is a passage of the demo's held-out text followed by the
opening words of one of its paragraphs, so the continuation can be copied
(BENCHMARKS.md W5, shortened to fit the demo's context); free prompts are
short openings. Batch 1 runs `--solo-prompts` different prompts one at a
time (how well a model copies depends on the passage) and reports their
total decode tokens over their total decode time, with a per-prompt table
after the main one. Each repeat runs every proposer in turn, so a slow
minute of a shared machine falls on all of them; the median repeat is
reported.

Usage: tools/bench/speculation.py --troupe build/troupe [--model DIR --draft-model DIR --draft-vocab-size N]
           [--text tests/fixtures/demo/heldout.txt] [--batches 1,8,32] [--proposers off,ngram,draft]
"""

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

FREE = ["In the beginning", "The Python interpreter", "A hacker is", "Debian is", "And it came to pass",
        "To install a package", "The list type", "Blessed are"]


def grounded_prompts(text: str, count: int, passage_words: int) -> list:
    """A passage of a held-out document (its lines up to `passage_words`
    words), a blank line, and the first words of its second line."""
    documents = [d.split("\n") for d in text.split("\n\n") if len(d.split()) >= passage_words]
    prompts = []
    for i in range(count):
        lines = documents[(i * 7) % len(documents)]
        passage, words = [], 0
        for line in lines:
            if words >= passage_words:
                break
            passage.append(line)
            words += len(line.split())
        cue = " ".join(passage[1].split()[:8])
        prompts.append("\n".join(passage) + "\n\n" + cue)
    return prompts


def draft_flags(args):
    """The draft model's flags, as given to this script."""
    flags = ["--draft-model", args.draft_model] if args.draft_model else []
    return flags + (["--draft-vocab-size", str(args.draft_vocab_size)] if args.draft_vocab_size else [])


def offline(args, proposer, prompts):
    command = [args.troupe, "generate", "--json", "--temperature", "0", "--ignore-eos", "--max-tokens",
               str(args.max_tokens), "--speculative", proposer, "--threads", str(args.threads)]
    if args.model:
        command += ["--model", args.model]
    if args.batch_invariant:
        command.append("--batch-invariant")
    if proposer != "off":
        command += ["--num-speculative-tokens", str(args.k)]
    if proposer == "draft":
        command += draft_flags(args)
    if proposer == "off":  # the engine path without speculation, for a like-for-like baseline
        command.append("--engine")
    for p in prompts:
        command += ["--prompt", p]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:12])} ...: {done.stderr[-2000:]}")
    line = next(l for l in done.stderr.splitlines() if l.startswith("generated"))
    decode = float(re.search(r"decode ([0-9.e+]+) tokens/s", line).group(1))
    accepted = re.search(r"drafts: (\d+) runs, (\d+) tokens, (\d+) accepted", line)
    runs, drafted, ok = (int(x) for x in accepted.groups())
    outputs = [json.loads(l)["token_ids"] for l in done.stdout.splitlines() if l.startswith("{")]
    return decode, runs, drafted, ok, outputs


def serve_rate(args, proposer, prompts, streams=8):
    """Output tokens/s of `streams` concurrent /v1/completions through troupe serve."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [args.troupe, "serve", "--port", str(port), "--threads", str(args.threads), "--speculative", proposer]
    if args.model:
        command += ["--model", args.model]
    if proposer != "off":
        command += ["--num-speculative-tokens", str(args.k)]
    if proposer == "draft":
        command += draft_flags(args)
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/ready", timeout=1)
                break
            except OSError:
                time.sleep(0.2)

        def one(prompt):
            body = json.dumps({"prompt": prompt, "max_tokens": args.max_tokens, "temperature": 0,
                               "ignore_eos": True}).encode()
            request = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
            return json.load(urllib.request.urlopen(request, timeout=600))["usage"]["completion_tokens"]

        one(prompts[0])  # warm-up
        start = time.perf_counter()
        with ThreadPoolExecutor(streams) as pool:
            tokens = sum(pool.map(one, prompts[:streams]))
        return tokens / (time.perf_counter() - start)
    finally:
        server.terminate()
        server.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--troupe", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--draft-model", default="")
    ap.add_argument("--draft-vocab-size", type=int, default=0, help="the draft head's ids (0: all of them)")
    ap.add_argument("--text", default="tests/fixtures/demo/heldout.txt")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--proposers", default="off,ngram,draft,layerskip")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--passage-words", type=int, default=300)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--batch-invariant", action="store_true",
                    help="bitwise batch-independent numerics: then 'same tokens' must say yes everywhere")
    ap.add_argument("--repeat", type=int, default=3, help="offline runs per row; the median is reported")
    ap.add_argument("--solo-prompts", type=int, default=8, help="prompts run one at a time for the batch-1 rows")
    args = ap.parse_args()
    text = open(args.text, encoding="utf-8").read()
    print("| workload | batch | proposer | decode tok/s | speed-up | drafts accepted | mean accepted per run | same tokens |")
    print("|---|---|---|---|---|---|---|---|")
    proposers = args.proposers.split(",")
    solo_rows = []
    for workload in ("grounded", "free"):
        for batch in (int(b) for b in args.batches.split(",")):
            count = args.solo_prompts if batch == 1 else batch
            prompts = grounded_prompts(text, count, args.passage_words) if workload == "grounded" else \
                [FREE[i % len(FREE)] + " " * (i // len(FREE)) for i in range(count)]
            groups = [[p] for p in prompts] if batch == 1 else [prompts]
            # runs[proposer][repeat][group] = (decode, runs, drafted, accepted, outputs)
            runs = {p: [] for p in proposers}
            for _ in range(args.repeat):
                for proposer in proposers:
                    runs[proposer].append([offline(args, proposer, g) for g in groups])
            base = None
            for proposer in proposers:
                # Total decode tokens over total decode time: each group decodes the same tokens.
                rates = sorted(len(groups) / sum(1 / g[0] for g in rep) for rep in runs[proposer])
                decode = rates[len(rates) // 2]
                first = runs[proposer][0]
                rounds, drafted, ok = (sum(g[i] for g in first) for i in (1, 2, 3))
                outputs = [o for g in first for o in g[4]]
                if base is None:
                    base = (decode, outputs, proposer)
                rate = f"{100.0 * ok / drafted:.0f}% of {drafted}" if drafted else "-"
                per_run = f"{ok / rounds:.2f}" if rounds else "-"
                same = "yes" if outputs == base[1] else "NO"
                print(f"| {workload} | {batch} | {proposer} | {decode:.1f} | {decode / base[0]:.2f}x | {rate} | "
                      f"{per_run} | {same} |", flush=True)
                if batch == 1 and proposer != base[2]:
                    for i in range(len(groups)):
                        ratios = sorted(rep[i][0] / base_rep[i][0]
                                        for rep, base_rep in zip(runs[proposer], runs[base[2]]))
                        solo_rows.append((workload, proposer, i, ratios[len(ratios) // 2]))
    if solo_rows:
        print("\n| workload | proposer | batch-1 speed-up per prompt (median of the repeats' pairs) |")
        print("|---|---|---|")
        for workload in ("grounded", "free"):
            for proposer in proposers[1:]:
                cells = [f"{r:.2f}x" for w, p, _, r in solo_rows if w == workload and p == proposer]
                if cells:
                    print(f"| {workload} | {proposer} | {' '.join(cells)} |")
    print("\n| workload | proposer | troupe serve, 8 streams: output tok/s | speed-up |")
    print("|---|---|---|---|")
    for workload in ("grounded", "free"):
        prompts = grounded_prompts(text, 8, args.passage_words) if workload == "grounded" else FREE[:8]
        base = None
        for proposer in args.proposers.split(","):
            rate = serve_rate(args, proposer, prompts)
            base = base or rate
            print(f"| {workload} | {proposer} | {rate:.1f} | {rate / base:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
