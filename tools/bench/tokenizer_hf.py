"""Tokenizer encode throughput of HF `tokenizers`, the reference side of `troupe bench-tokenizer`.

  python tools/bench/tokenizer_hf.py make-text --out /tmp/tokenizer_bench.txt [--megabytes 4]
      Writes the benchmark text (stdlib only, deterministic for a given commit): the
      text files of the repository at HEAD (`git show HEAD:path`, three copies per
      round) and the fixture strings (tests/fixtures/text/strings.jsonl, in groups of
      12), shuffled per round with a fixed seed and repeated until the size is
      reached. Documents end with a blank line.

  /work/fixtures-venv/bin/python tools/bench/tokenizer_hf.py bench --model DIR --text FILE [--repeat N]
      Encodes every document of FILE with HF `tokenizers`, single-threaded
      (TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1), after one warm-up pass.
      "mb_per_s" is `encode_batch_fast` over all documents (HF's fastest path: a
      sequential Rust loop without offsets, no per-call Python overhead); also
      reported: `encode_batch` (with offsets) and a per-document `encode` loop.
      Prints one JSON line.
"""

import argparse
import json
import os
import pathlib
import random
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = (".cpp", ".hpp", ".h", ".cu", ".md", ".py", ".txt", ".cmake", ".sh", ".json", ".jinja")


def split_documents(text):
    """Documents end after each blank line ("\\n\\n"), as in cmd_bench_tokenizer.cpp."""
    documents = []
    start = 0
    while start < len(text):
        blank = text.find("\n\n", start)
        end = len(text) if blank < 0 else blank + 2
        documents.append(text[start:end])
        start = end
    return documents


def repository_documents():
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", "HEAD"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split("\n")
    documents = []
    for name in sorted(n for n in names if n.endswith(TEXT_SUFFIXES)):
        blob = subprocess.run(["git", "show", f"HEAD:{name}"], cwd=REPO, check=True, capture_output=True).stdout
        if len(blob) > 200_000:
            continue
        try:
            documents.append(blob.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return documents


def fixture_documents():
    path = REPO / "tests" / "fixtures" / "text" / "strings.jsonl"
    strings = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]
    return ["\n".join(strings[i:i + 12]) for i in range(0, len(strings), 12)]


def make_text(out, megabytes):
    rng = random.Random(20241122)
    documents = repository_documents() * 3 + fixture_documents()
    target = int(megabytes * 1_000_000)
    parts = []
    size = 0
    while size < target:
        order = documents[:]
        rng.shuffle(order)
        for document in order:
            piece = document.rstrip("\n") + "\n\n"
            parts.append(piece)
            size += len(piece.encode("utf-8"))
            if size >= target:
                break
    pathlib.Path(out).write_text("".join(parts), encoding="utf-8")
    print(f"{out}: {size} bytes, {len(parts)} documents", file=sys.stderr)


def bench(model, text_file, repeat):
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["RAYON_NUM_THREADS"] = "1"
    import tokenizers

    tokenizer = tokenizers.Tokenizer.from_file(str(pathlib.Path(model) / "tokenizer.json"))
    with open(text_file, encoding="utf-8", newline="") as handle:  # keep "\r\n" as is
        text = handle.read()
    documents = split_documents(text)
    size = len(text.encode("utf-8"))
    tokens = sum(len(e.ids) for e in tokenizer.encode_batch_fast(documents, add_special_tokens=False))  # warm-up

    def timed(encode_all):
        start = time.perf_counter()
        for _ in range(repeat):
            encode_all()
        return round(size * repeat / 1e6 / (time.perf_counter() - start), 3)

    fast = timed(lambda: tokenizer.encode_batch_fast(documents, add_special_tokens=False))
    batch = timed(lambda: tokenizer.encode_batch(documents, add_special_tokens=False))
    loop = timed(lambda: [tokenizer.encode(document, add_special_tokens=False) for document in documents])
    print(json.dumps({"impl": f"hf-tokenizers {tokenizers.__version__}", "bytes": size, "documents": len(documents),
                      "tokens": tokens, "repeat": repeat, "mb_per_s": fast, "encode_batch_mb_per_s": batch,
                      "encode_loop_mb_per_s": loop}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make-text")
    make.add_argument("--out", required=True)
    make.add_argument("--megabytes", type=float, default=4.0)
    run = commands.add_parser("bench")
    run.add_argument("--model", required=True)
    run.add_argument("--text", required=True)
    run.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.command == "make-text":
        make_text(args.out, args.megabytes)
    else:
        bench(args.model, args.text, args.repeat)


if __name__ == "__main__":
    main()
