#!/usr/bin/env python3
"""Plots the offline rows of `tools/bench/speculation.py`'s output: decode
speed-up over no speculation per proposer, one group of bars per workload
and batch size, with the drafts' acceptance written above each bar. Needs
matplotlib (install it in the fixtures venv, not in CI's).

    tools/bench/speculation.py --troupe build/troupe ... > /tmp/spec.txt
    python tools/bench/plot_speculation.py /tmp/spec.txt --out docs/img/speculation.png \
        --title "demo pair, target widened 64x, 2-core Zen 4"

`--targets` draws the issue's speed-up targets as labelled lines (e.g.
"2.0:ngram grounded batch 1,1.5:draft free batch 1").
"""

import argparse
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# "| grounded | 1 | ngram | 96.3 | 2.15x | 53% of 1174 | 1.73 | yes |"
ROW = re.compile(r"^\|\s*(\w+)\s*\|\s*(\d+)\s*\|\s*(\w+)\s*\|\s*([\d.]+)\s*\|\s*\**([\d.]+)x\**\s*\|\s*([^|]*)\|")


def read_rows(path):
    """[(workload, batch, proposer, speed-up, acceptance text)] in file order."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line)
            if m:
                workload, batch, proposer, _, speedup, accepted = m.groups()
                rows.append((workload, int(batch), proposer, float(speedup), accepted.strip()))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="")
    ap.add_argument("--targets", default="", help="comma-separated VALUE:LABEL lines to draw")
    args = ap.parse_args()
    rows = read_rows(args.input)
    if not rows:
        sys.exit(f"{args.input}: no rows of speculation.py's offline table")
    groups = list(dict.fromkeys((w, b) for w, b, _, _, _ in rows))
    proposers = [p for p in dict.fromkeys(p for _, _, p, _, _ in rows) if p != "off"]
    width = 0.8 / max(1, len(proposers))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, proposer in enumerate(proposers):
        xs, ys, notes = [], [], []
        for g, (workload, batch) in enumerate(groups):
            match = [r for r in rows if r[0] == workload and r[1] == batch and r[2] == proposer]
            if match:
                xs.append(g + (i - (len(proposers) - 1) / 2) * width)
                ys.append(match[0][3])
                notes.append(match[0][4].split(" of ")[0] if match[0][4] != "-" else "")
        bars = ax.bar(xs, ys, width, label=proposer)
        for bar, note in zip(bars, notes):
            if note:
                ax.annotate(note, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                            va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    for target in filter(None, args.targets.split(",")):
        value, _, label = target.partition(":")
        ax.axhline(float(value), color="gray", linestyle="--", linewidth=0.8)
        ax.annotate(f"target {value}x: {label}", (len(groups) - 0.5, float(value)), ha="right", va="bottom",
                    fontsize=7, color="gray")
    ax.set_xticks(range(len(groups)), [f"{w}\nbatch {b}" for w, b in groups])
    ax.set_ylabel("decode speed-up over no speculation")
    ax.set_title(args.title)
    ax.legend(title="proposer (acceptance of drafts above bars)", fontsize=8, title_fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
