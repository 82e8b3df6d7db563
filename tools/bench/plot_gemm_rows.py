#!/usr/bin/env python3
"""Plots GEMM throughput against the number of activation rows from the
output of `troupe bench-kernels --sections gemm`: one line per path (skinny
GEMM, oneDNN, panel GEMM) for one weight shape and type. Needs matplotlib
(install it in the fixtures venv, not in CI's).

    build/troupe bench-kernels --sections gemm > /tmp/gemm.txt
    /work/fixtures-venv/bin/python tools/bench/plot_gemm_rows.py /tmp/gemm.txt \
        --shape 8192x2048 --type bf16 --peak 466 --out docs/img/gemm_rows_zen4.png \
        --title "8192 x 2048 bf16, 2-core Zen 4"

`--peak` (GFLOP/s) draws the machine's measured arithmetic peak as a line.
"""

import argparse
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# "  panel gemm                 32x8192x2048 bf16    2.698 ms    397.9 GFLOP/s"
ROW = re.compile(r"^\s+(skinny gemm|gemm onednn|panel gemm)\s+(\d+)x(\d+x\d+)\s+(\w+)\s+[\d.]+ ms\s+([\d.]+) GFLOP/s")
LABELS = {"skinny gemm": "skinny GEMM (row-major)", "gemm onednn": "oneDNN matmul", "panel gemm": "panel GEMM"}


def read_series(path, shape, dtype):
    """{path name: [(rows, GFLOP/s)]} for the rows of `shape` and `dtype`."""
    series = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            match = ROW.match(line)
            if match and match.group(3) == shape and match.group(4) == dtype:
                series.setdefault(match.group(1), []).append((int(match.group(2)), float(match.group(5))))
    return series


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="saved output of troupe bench-kernels --sections gemm")
    parser.add_argument("--shape", default="8192x2048", help="N x K of the weight, as bench-kernels prints it")
    parser.add_argument("--type", default="bf16", help="weight type: bf16, f32, f16")
    parser.add_argument("--peak", type=float, help="the machine's arithmetic peak, GFLOP/s")
    parser.add_argument("--title", default="")
    parser.add_argument("--out", required=True, help="PNG to write")
    args = parser.parse_args()

    series = read_series(args.output, args.shape, args.type)
    if not series:
        sys.exit(f"{args.output}: no GEMM rows for {args.shape} {args.type}")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, points in series.items():
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=LABELS[name])
    if args.peak:
        ax.axhline(args.peak, color="grey", linestyle="--", linewidth=1, label=f"peak ({args.peak:g} GFLOP/s)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("activation rows (M)")
    ax.set_ylabel("GFLOP/s")
    highest = max([args.peak or 0.0] + [p[1] for points in series.values() for p in points])
    ax.set_ylim(0, 1.1 * highest)
    ax.set_title(args.title or f"{args.shape} {args.type}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
