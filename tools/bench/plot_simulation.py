#!/usr/bin/env python3
"""Plots `troupe simulate --json` output: latency percentiles per policy and
preemption mode, the JCT distribution, and tenant shares with deadline
outcomes. Needs matplotlib (install it in the fixtures venv, not in CI's).

    troupe simulate ... --json /tmp/sim.json
    /work/fixtures-venv/bin/python tools/bench/plot_simulation.py /tmp/sim.json \
        --out docs/img/scheduling --title "bursty arrivals"

writes <out>_latency.png, <out>_jct_cdf.png and <out>_tenants_deadlines.png.
"""

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODE_STYLE = {"swap": {"hatch": "", "alpha": 0.95}, "recompute": {"hatch": "//", "alpha": 0.6},
              "auto": {"hatch": "..", "alpha": 0.8}}


def load_runs(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        sys.exit(f"{path}: no 'runs' list (is it `troupe simulate --json` output?)")
    return runs


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def plot_latency(runs, out, title):
    policies = ordered(r["policy"] for r in runs)
    modes = ordered(r["preemption"] for r in runs)
    metrics = [("ttft_s", "time to first token"), ("tpot_s", "time per output token"), ("jct_s", "job completion time")]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    width = 0.8 / (2 * len(modes))
    for ax, (key, label) in zip(axes, metrics):
        for m, mode in enumerate(modes):
            for q, quantile in enumerate(("p50", "p99")):
                xs, ys = [], []
                for p, policy in enumerate(policies):
                    run = next((r for r in runs if r["policy"] == policy and r["preemption"] == mode), None)
                    if run is None:
                        continue
                    xs.append(p + (2 * m + q - len(modes) + 0.5) * width)
                    ys.append(max(run[key][quantile], 1e-4))
                ax.bar(xs, ys, width, label=f"{quantile} ({mode})", color=f"C{q}",
                       hatch=MODE_STYLE.get(mode, {}).get("hatch", ""), alpha=MODE_STYLE.get(mode, {}).get("alpha", 0.8),
                       edgecolor="black", linewidth=0.4)
        ax.set_xticks(range(len(policies)))
        ax.set_xticklabels(policies)
        ax.set_yscale("log")
        ax.set_ylabel("seconds (log)")
        ax.set_title(label)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Latency by policy and preemption mode: {title}")
    fig.tight_layout()
    fig.savefig(f"{out}_latency.png", dpi=90)
    plt.close(fig)


def plot_jct_cdf(runs, out, title, mode):
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, run in enumerate(r for r in runs if r["preemption"] == mode):
        jct = sorted(q["finish"] - q["arrival"] for q in run["requests"] if not q["rejected"])
        if not jct:
            continue
        ax.plot(jct, [(k + 1) / len(jct) for k in range(len(jct))], label=run["policy"], color=f"C{i}")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time, seconds (log)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(f"JCT distribution ({mode} preemption): {title}")
    ax.grid(which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}_jct_cdf.png", dpi=90)
    plt.close(fig)


def plot_tenants_deadlines(runs, out, title, mode):
    chosen = [r for r in runs if r["preemption"] == mode]
    policies = [r["policy"] for r in chosen]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    bottom = [0.0] * len(chosen)
    tenants = max(len(r["tenant_share"]) for r in chosen)
    for t in range(tenants):
        share = [r["tenant_share"][t] if t < len(r["tenant_share"]) else 0 for r in chosen]
        left.bar(policies, share, bottom=bottom, label=f"tenant t{t}", color=f"C{t}")
        bottom = [b + s for b, s in zip(bottom, share)]
    left.axhline(1.0 / tenants, color="black", linestyle="--", linewidth=0.8, label="equal share")
    left.set_ylabel("share of tokens while all tenants wait")
    left.set_title("tenant shares under contention")
    left.legend(fontsize=8)
    all_policies = ordered(r["policy"] for r in runs)
    modes = ordered(r["preemption"] for r in runs)
    width = 0.8 / len(modes)
    for m, mode_name in enumerate(modes):
        missed, rejected, xs = [], [], []
        for p, policy in enumerate(all_policies):
            run = next((r for r in runs if r["policy"] == policy and r["preemption"] == mode_name), None)
            if run is None or run["deadline_requests"] == 0:
                continue
            xs.append(p + (m - (len(modes) - 1) / 2) * width)
            missed.append(run["deadline_missed"] / run["deadline_requests"])
            rejected.append(run["deadline_rejected"] / run["deadline_requests"])
        right.bar(xs, missed, width, label=f"missed ({mode_name})", color="C3",
                  hatch=MODE_STYLE.get(mode_name, {}).get("hatch", ""), edgecolor="black", linewidth=0.4)
        right.bar(xs, rejected, width, bottom=missed, label=f"rejected ({mode_name})", color="C7",
                  hatch=MODE_STYLE.get(mode_name, {}).get("hatch", ""), edgecolor="black", linewidth=0.4)
        for x, a, b in zip(xs, missed, rejected):
            right.annotate(f"{a:.0%}+{b:.0%}", (x, a + b), ha="center", va="bottom", fontsize=7)
    right.set_xticks(range(len(all_policies)))
    right.set_xticklabels(all_policies)
    right.set_ylabel("fraction of deadline requests (missed+rejected)")
    right.set_title("deadlines missed or refused at admission")
    right.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(f"{out}_tenants_deadlines.png", dpi=90)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", help="output of troupe simulate --json")
    parser.add_argument("--out", required=True, help="path prefix of the PNG files")
    parser.add_argument("--title", default="", help="workload description for the titles")
    parser.add_argument("--mode", default="swap", help="preemption mode for the CDF and tenant plots")
    args = parser.parse_args()
    runs = load_runs(args.json)
    if not any(r["preemption"] == args.mode for r in runs):
        sys.exit(f"{args.json}: no run with preemption mode '{args.mode}'")
    plot_latency(runs, args.out, args.title)
    plot_jct_cdf(runs, args.out, args.title, args.mode)
    plot_tenants_deadlines(runs, args.out, args.title, args.mode)


if __name__ == "__main__":
    main()
