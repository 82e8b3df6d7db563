#!/usr/bin/env python3
"""Structured output's cost in the engine: decode tokens/s through
`troupe serve` with and without a constraint, at 1 and 32 concurrent
requests; the runs differ only in the mask (computed per row at dispatch
and applied in sampling). Eos is
suppressed until --max-tokens (min_tokens), so the regex run always
generates them all; so does the JSON run (its document cannot close yet).

Constraints: `regex` is free text over letters and punctuation (one table
for the whole run: the warm-mask case); `json` is an object whose one
string member needs at least 2,000 characters (so it never closes within
--max-tokens; a string position's table is one of the larger ones).

Usage: tools/bench/structured_output.py --troupe build/troupe [--batches 1,32] [--max-tokens 128] [--rounds 3]
"""

import argparse
import json
import socket
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

PROMPTS = ["In the beginning", "The Python interpreter", "A hacker is", "Debian is", "And it came to pass",
           "To install a package", "The list type", "Blessed are"]
CONSTRAINTS = {
    "none": {},
    "regex": {"structured_outputs": {"regex": "[A-Za-z ,.;:'\\n-]+"}},
    "json": {"response_format": {"type": "json_schema", "json_schema": {"name": "essay", "schema": {
        "type": "object", "properties": {"text": {"type": "string", "minLength": 2000}}, "required": ["text"]}}}},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def run_batch(url, batch, max_tokens, fields, seed):
    """Completion tokens and seconds for `batch` concurrent requests."""
    def one(i):
        body = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": max_tokens, "min_tokens": max_tokens,
                "temperature": 0.8, "seed": seed + i, **fields}
        return post(url, body)["usage"]["completion_tokens"]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=batch) as pool:
        tokens = sum(pool.map(one, range(batch)))
    return tokens, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--troupe", required=True)
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen([args.troupe, "serve", "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(base + "/ready", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        url = base + "/v1/completions"
        for fields in CONSTRAINTS.values():  # warm-up: compile and build the tables once
            run_batch(url, 2, 16, fields, 0)
        print("| batch | constraint | tokens/s (best of %d) | tokens per request | vs none |" % args.rounds)
        print("|---|---|---|---|---|")
        for batch in [int(b) for b in args.batches.split(",")]:
            baseline = None
            for name, fields in CONSTRAINTS.items():
                best, per_request = 0.0, 0.0
                for r in range(args.rounds):
                    tokens, seconds = run_batch(url, batch, args.max_tokens, fields, 100 * r)
                    best = max(best, tokens / seconds)
                    per_request = tokens / batch
                baseline = baseline or best
                print(f"| {batch} | {name} | {best:.1f} | {per_request:.0f} | {100.0 * (best / baseline - 1.0):+.1f}% |",
                      flush=True)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
