"""Soak test of `troupe serve` (issue 15): starts a server with a KV pool
small enough to force swap and recompute preemption, sends it a seeded mix
of requests over SSE and WebSocket with cancels, disconnects, slow readers,
invalid requests and live knob changes, then checks that

  - every request is accounted for: finished, aborted or refused with a
    reason, the client's counts agreeing with the server's
    troupe:request_success_total;
  - the KV pool is empty again (/metrics gauges and the admin snapshot);
  - every seeded request's output equals the same request run alone;
  - resident memory (VmRSS) after warm-up stays within --rss-slack-mib of
    its warm-up peak;
  - both kinds of preemption happened, no error was logged, and SIGTERM
    stops the server with exit code 0.

Prints a Markdown summary (or --json) on stdout; exits 1 on any violation.
Short form (the e2e suite): `python tools/soak --requests 300`; long form
by hand: `nice -n 10 python tools/soak --requests 10000`. Needs httpx and
websockets (tools/requirements-test.txt)."""

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import time
from datetime import datetime, timezone

import soak_checks
from soak_clients import change_knobs, soak_clients
from soak_server import rss_sampler, troupe_server
from soak_workload import make_plans, seeded_bodies

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="tools/soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--troupe", default=os.environ.get("TROUPE_BIN", os.path.join(REPO_ROOT, "build", "troupe")),
                        help="the troupe binary (default: $TROUPE_BIN, else build/troupe)")
    parser.add_argument("--model", default="", help="model directory (default: the built-in demo model)")
    parser.add_argument("--requests", type=int, default=300, help="requests to send (default 300)")
    parser.add_argument("--concurrency", type=int, default=32, help="client actions in flight (default 32)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the request mix (default 1)")
    parser.add_argument("--seeded-bodies", type=int, default=12, help="distinct seeded requests (default 12)")
    parser.add_argument("--kv-cache-bytes", default="1536K",
                        help="device KV pool (default 1536K: 48 blocks of the demo model)")
    parser.add_argument("--swap-space-bytes", default="768K",
                        help="host swap pool (default 768K: 24 blocks of the demo model)")
    parser.add_argument("--threads", type=int, default=2, help="server CPU threads (default 2)")
    parser.add_argument("--knob-interval-s", type=float, default=0.2, help="pause between knob changes (default 0.2)")
    parser.add_argument("--timeout-s", type=float, default=300, help="limit on one client action (default 300)")
    parser.add_argument("--warmup-fraction", type=float, default=0.1,
                        help="share of the requests that warms up before memory is bounded (default 0.1)")
    parser.add_argument("--rss-slack-mib", type=float, default=64,
                        help="growth of VmRSS allowed after warm-up over its warm-up peak, MiB (default 64)")
    parser.add_argument("--allow-no-preemption", action="store_true",
                        help="do not require swap and recompute preemptions (for large pools)")
    parser.add_argument("--server-arg", action="append", default=[], help="extra `troupe serve` argument (repeatable)")
    parser.add_argument("--log", default="", help="server log file (default: /tmp/troupe-soak-PORT.log)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of Markdown")
    return parser.parse_args(argv)


def server_args(args):
    flags = ["--kv-cache-bytes", args.kv_cache_bytes, "--swap-space-bytes", args.swap_space_bytes,
             "--preemption-mode", "auto", "--swap-min-tokens", "32", "--batch-invariant",
             "--threads", str(args.threads), "--max-num-seqs", "48", "--max-num-batched-tokens", "256",
             "--read-timeout", "10", "--write-timeout", "10", "--idle-timeout", "30", "--shutdown-timeout", "10"]
    if args.model:
        flags += ["--model", args.model]
    return flags + args.server_arg


async def run_plans(args, base_url, model, plans, progress):
    """Runs every plan, at most --concurrency at once, while knobs change; (outcomes, knob change counts)."""
    clients = soak_clients(base_url, model, args.timeout_s)
    limit = asyncio.Semaphore(args.concurrency)
    knob_counts = {"applied": 0, "refused": 0, "invalid_refused": 0, "invalid_accepted": 0}
    stop = asyncio.Event()
    changer = asyncio.create_task(change_knobs(clients, random.Random(args.seed + 1), stop, args.knob_interval_s,
                                               knob_counts))

    async def limited(p):
        async with limit:
            outcomes = await clients.run(p)
        progress[0] += len(outcomes)
        return outcomes

    try:
        results = await asyncio.gather(*(limited(p) for p in plans))
    finally:
        stop.set()
        await changer
        await clients.close()
    return [o for outcomes in results for o in outcomes], knob_counts


def soak(args, server, report):
    """The soak against a ready server; fills `report` and returns the violations."""
    model = server.request_json("/v1/models")[1]["data"][0]["id"]
    original = server.request_json("/admin/config")[1]["settings"]
    rng = random.Random(args.seed)
    seeded = seeded_bodies(rng, args.seeded_bodies)
    plans = make_plans(rng, args.requests, seeded)
    before = server.metrics()
    report["kv_blocks"] = server.request_json("/admin/snapshot")[1]["gauges"]["kv_blocks_total"]
    progress = [0]
    sampler = rss_sampler(server, lambda: progress[0])
    sampler.start()
    started = time.monotonic()
    try:
        outcomes, report["knob_changes"] = asyncio.run(run_plans(args, server.base_url, model, plans, progress))
    finally:
        report["duration_s"] = round(time.monotonic() - started, 1)
        sampler.stop()
    report["requests"] = len(outcomes)
    violations = []
    status, answer = server.request_json("/admin/config", "PATCH", original)
    if status != 200:
        violations.append(f"restoring the knobs failed: HTTP {status} {answer}")
    if report["knob_changes"]["invalid_accepted"]:
        violations.append(f"{report['knob_changes']['invalid_accepted']} invalid knob changes were accepted")
    report["pool"], found = soak_checks.check_pool_empty(server)
    violations += found
    after = server.metrics()
    report["outcomes"], found = soak_checks.check_accounting(outcomes, before, after)
    violations += found
    report["preemptions"], found = soak_checks.check_preemptions(before, after, not args.allow_no_preemption)
    violations += found
    solo = [soak_checks.solo_texts(server, model, endpoint, body) for endpoint, body in seeded]
    report["seeded"], found = soak_checks.check_seeded(outcomes, solo)
    violations += found
    warmup = int(args.warmup_fraction * len(outcomes))
    report["rss"], found = soak_checks.check_rss(sampler.samples, warmup, int(args.rss_slack_mib * 2 ** 20))
    violations += found
    return violations


def markdown(report):
    o, rss = report.get("outcomes", {}), report.get("rss", {})
    mib = lambda key: f"{rss.get(key, 0) / 2 ** 20:.1f} MiB"  # noqa: E731
    lines = [f"# Soak: {'PASS' if report['pass'] else 'FAIL'}", "",
             f"- date: {report['date']}; machine: {report['machine']}",
             f"- command: `{' '.join(report['soak_command'])}`",
             f"- server: `{' '.join(report['server_command'])}` (log {report['log']})",
             f"- requests: {report.get('requests')} in {report.get('duration_s')} s; "
             f"KV pool {report.get('kv_blocks')} device blocks",
             f"- client outcomes: {o.get('client')}",
             f"- server finished (request_success_total): {o.get('server_finished')}",
             f"- preemptions: {report.get('preemptions')}",
             f"- knob changes: {report.get('knob_changes')}",
             f"- seeded: {report.get('seeded')}",
             f"- pool after: {report.get('pool')}",
             f"- VmRSS: start {mib('start_bytes')}, warm-up peak {mib('warmup_peak_bytes')}, after warm-up peak "
             f"{mib('after_warmup_peak_bytes')} (bound {mib('bound_bytes')})",
             f"- server exit code: {report.get('exit_code')}", "", "| t (s) | VmRSS (MiB) | requests ended |",
             "|---|---|---|"]
    lines += [f"| {p['t_s']} | {p['rss_mib']} | {p['requests_ended']} |" for p in rss.get("timeline", [])]
    lines += ["", "| kind | outcomes |", "|---|---|"]
    lines += [f"| {kind} | {counts} |" for kind, counts in sorted(o.get("by_kind", {}).items())]
    lines += ["", "Violations:" if report["violations"] else "No violations."]
    lines += [f"- {v}" for v in report["violations"]]
    return "\n".join(lines)


def main(argv):
    args = parse_args(argv)
    server = troupe_server(args.troupe, server_args(args), args.log)
    report = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": f"{platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}",
              "soak_command": [os.path.relpath(os.path.dirname(os.path.abspath(__file__)))] + argv,
              "server_command": server.command, "log": server.log_path}
    violations = []
    try:
        server.wait_ready()
        violations += soak(args, server, report)
        errors = server.error_log_lines()
        if errors:
            violations.append(f"{len(errors)} error lines in the server log, the first: {errors[0]}")
    except Exception as error:  # reported as a violation with the summary, not as a traceback alone
        violations.append(f"the soak stopped: {type(error).__name__}: {error}")
    finally:
        report["exit_code"] = server.stop()
    if report["exit_code"] != 0:
        violations.append(f"troupe serve exited with {report['exit_code']} on SIGTERM")
    report["violations"], report["pass"] = violations, not violations
    print(json.dumps(report, indent=2) if args.json else markdown(report))
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
