"""What the soak checks at the end, each returning figures and violations:
every request accounted for, the KV pool empty, seeded outputs equal to
their solo runs, resident memory inside its bound."""

import time
from collections import Counter

from soak_server import metric

REASONS = ("stop", "length", "abort")


def delta(before, after, name, **labels):
    return metric(after, name, **labels) - metric(before, name, **labels)


def check_accounting(outcomes, before, after):
    """Client-side outcomes against the server's request_success_total.

    The server counts each request it accepted once, by finish reason. A
    request the client saw finish was counted stop or length; one it
    cancelled may have finished on the server before the cancel arrived; one
    it abandoned before the answer may or may not have been accepted."""
    client = Counter(o.result for o in outcomes)
    server = {reason: delta(before, after, "troupe:request_success_total", finished_reason=reason)
              for reason in REASONS}
    accepted = client["finished"] + client["cancelled"]
    server_total = sum(server.values())
    figures = {"client": dict(client), "server_finished": server, "by_kind": {}}
    for o in outcomes:
        figures["by_kind"].setdefault(o.kind, Counter())[o.result] += 1
    figures["by_kind"] = {kind: dict(counts) for kind, counts in figures["by_kind"].items()}
    violations = [f"request {o.index} ({o.kind}) failed: {o.detail}" for o in outcomes if o.result == "failed"][:10]
    if client["failed"] > 10:
        violations.append(f"... {client['failed']} failed requests in all")
    if not accepted <= server_total <= accepted + client["abandoned"]:
        violations.append(f"the server finished {server_total:.0f} requests; the client had {accepted} accepted and "
                          f"{client['abandoned']} abandoned: requests lost or counted twice")
    if server["stop"] + server["length"] < client["finished"]:
        violations.append(f"the client saw {client['finished']} requests finish, the server counted "
                          f"{server['stop'] + server['length']:.0f} stop or length")
    if server["abort"] > client["cancelled"] + client["abandoned"]:
        violations.append(f"the server aborted {server['abort']:.0f} requests, the client cancelled or abandoned "
                          f"{client['cancelled'] + client['abandoned']}")
    return figures, violations


def check_pool_empty(server, timeout_s=15):
    """Waits for an idle engine: nothing running, waiting or swapped, every KV block free (metrics and snapshot)."""
    deadline = time.monotonic() + timeout_s
    while True:
        samples = server.metrics()
        gauges = server.request_json("/admin/snapshot")[1]["gauges"]
        figures = {"running": metric(samples, "troupe:num_requests_running"),
                   "waiting": metric(samples, "troupe:num_requests_waiting"),
                   "swapped": metric(samples, "troupe:num_requests_swapped"),
                   "kv_cache_usage_perc": metric(samples, "troupe:kv_cache_usage_perc"),
                   "snapshot_kv_device_usage": gauges["kv_device_usage"],
                   "snapshot_kv_host_usage": gauges["kv_host_usage"],
                   "snapshot_running": gauges["running"], "snapshot_waiting": gauges["waiting"],
                   "snapshot_swapped": gauges["swapped"], "healthy": gauges["healthy"]}
        busy = {name: value for name, value in figures.items() if name != "healthy" and value != 0}
        if (not busy and figures["healthy"]) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    violations = [f"after the soak, {name} is {value} (not 0)" for name, value in busy.items()]
    if not figures["healthy"]:
        violations.append(f"the engine is unhealthy: {gauges.get('health_detail')}")
    return figures, violations


def solo_texts(server, model, endpoint, body):
    """(texts by choice, finish reasons by choice) of `body` run alone, not streamed."""
    path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    status, answer = server.request_json(path, "POST", {**body, "model": model}, timeout_s=300)
    if status != 200:
        raise RuntimeError(f"solo run of a seeded request got HTTP {status}: {answer}")
    texts, reasons = {}, {}
    for choice in answer["choices"]:
        texts[choice["index"]] = choice["text"] if "text" in choice else (choice["message"].get("content") or "")
        reasons[choice["index"]] = choice["finish_reason"]
    return texts, reasons


def check_seeded(outcomes, solo):
    """Every finished seeded request equals its body's solo run, choice by choice."""
    compared, violations = 0, []
    for o in outcomes:
        if o.seeded < 0 or o.result != "finished":
            continue
        compared += 1
        texts, reasons = solo[o.seeded]
        if o.texts != texts or o.reasons != reasons:
            violations.append(f"seeded request {o.index} ({o.kind}, body {o.seeded}) differs from its solo run: "
                              f"{o.texts!r} {o.reasons} != {texts!r} {reasons}"[:400])
    return {"seeded_compared": compared, "seeded_bodies": len(solo)}, violations[:10]


def check_rss(samples, warmup_requests, slack_bytes):
    """Resident memory after warm-up (once `warmup_requests` ended) stays within `slack_bytes` of its warm-up peak."""
    warm = [rss for _, rss, ended in samples if ended <= warmup_requests and rss > 0]
    later = [rss for _, rss, ended in samples if ended > warmup_requests and rss > 0]
    figures = {"start_bytes": samples[0][1] if samples else 0, "warmup_peak_bytes": max(warm, default=0),
               "after_warmup_peak_bytes": max(later, default=0), "bound_bytes": max(warm, default=0) + slack_bytes,
               "samples": len(samples)}
    step = max(1, len(samples) // 20)
    figures["timeline"] = [{"t_s": round(t, 1), "rss_mib": round(rss / 2 ** 20, 1), "requests_ended": ended}
                           for t, rss, ended in samples[::step]]
    violations = []
    if not warm or not later:
        violations.append("too few resident-memory samples to judge growth after warm-up")
    elif figures["after_warmup_peak_bytes"] > figures["bound_bytes"]:
        violations.append(f"resident memory grew to {figures['after_warmup_peak_bytes'] / 2 ** 20:.1f} MiB after "
                          f"warm-up, over the bound of {figures['bound_bytes'] / 2 ** 20:.1f} MiB")
    return figures, violations


def check_preemptions(before, after, required):
    figures = {kind: delta(before, after, "troupe:num_preemptions_total", kind=kind) for kind in ("swap", "recompute")}
    violations = [f"no {kind} preemption happened: the KV pool did not force it"
                  for kind, count in figures.items() if required and count == 0]
    return figures, violations
