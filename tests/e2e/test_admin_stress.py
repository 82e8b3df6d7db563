"""1,000 random valid knob changes while waves of 64 seeded streams run: no
request is lost and every output equals the same request run alone (issue
16). The server runs with --batch-invariant, so a seeded request's tokens do
not depend on what shares its steps, and preemption keeps outputs and RNG
counters, so neither policy, budget nor preemption changes may alter them."""

import json
import os
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import LiveServer

if not os.environ.get("TROUPE_BIN"):
    pytest.skip("TROUPE_BIN is not set: end-to-end suites need a built troupe binary", allow_module_level=True)

STREAMS = 64
CHANGES = 1000
MAX_TOKENS = 8

# Live knobs and the part of their valid range the changes draw from (wide
# enough to preempt, reorder and starve; narrow enough to finish quickly).
RANGES = {
    "max_num_batched_tokens": (8, 512), "max_num_seqs": (1, 64), "max_prefill_chunk": (8, 512),
    "mlfq_quantum": (1, 32), "mlfq_levels": (1, 8), "mlfq_quantum_growth": (1, 4),
    "mlfq_entry_prompt_tokens": (1, 512), "mlfq_promote_after": (0.01, 5.0), "fair_prompt_weight": (0.0, 4.0),
    "fair_output_weight": (0.0, 4.0), "fair_idle_tenants": (0, 100), "swap_min_tokens": (0, 512),
    "preemption_grace_steps": (0, 16), "admission_watermark": (0.0, 0.5), "max_waiting_requests": (256, 4096),
}
CHOICES = {"policy": ["fcfs", "priority", "mlfq", "deadline", "fair"], "preemption_mode": ["auto", "swap", "recompute"]}


@pytest.fixture(scope="module")
def server():
    live = LiveServer(["--batch-invariant"])
    yield live
    live.stop()


def request_body(i):
    return {"prompt": f"request {i}: " + "once upon a time " * (1 + i % 7), "max_tokens": MAX_TOKENS,
            "ignore_eos": True, "temperature": 1.0, "seed": 1000 + i, "user": f"tenant-{i % 4}",
            "priority": i % 5}


def stream_text(server, i):
    body = {**request_body(i), "stream": True}
    text, reason = "", None
    with requests.post(server.base_url + "/v1/completions", json=body, stream=True, timeout=300) as response:
        assert response.status_code == 200, response.text
        for line in response.iter_lines():
            if line.startswith(b"data: {"):
                choice = json.loads(line[6:])["choices"][0]
                text += choice["text"]
                reason = choice["finish_reason"] or reason
    return text, reason


def random_change(rng, knobs):
    names = rng.sample(sorted(RANGES) + sorted(CHOICES), rng.randint(1, 3))
    change = {}
    for name in names:
        if name in CHOICES:
            change[name] = rng.choice(CHOICES[name])
        else:
            low, high = RANGES[name]
            change[name] = rng.randint(low, high) if knobs[name]["kind"] == "integer" else rng.uniform(low, high)
    return change


def test_random_knob_changes_lose_and_corrupt_nothing(server):
    url = server.base_url
    original = requests.get(url + "/admin/config", timeout=10).json()
    solo = {}
    for i in range(STREAMS):
        response = requests.post(url + "/v1/completions", json=request_body(i), timeout=120)
        assert response.status_code == 200, response.text
        solo[i] = response.json()["choices"][0]["text"]

    rng = random.Random(16)
    applied = []
    failures = []

    def change_knobs():
        for _ in range(CHANGES):
            change = random_change(rng, original["knobs"])
            response = requests.patch(url + "/admin/config", json=change, timeout=30)
            if response.status_code != 200:
                failures.append((change, response.text))
            applied.append(change)

    changer = threading.Thread(target=change_knobs)
    changer.start()
    waves = 0
    with ThreadPoolExecutor(STREAMS) as pool:
        while changer.is_alive() or waves == 0:
            results = list(pool.map(lambda i: stream_text(server, i), range(STREAMS)))
            waves += 1
            for i, (text, reason) in enumerate(results):
                assert reason == "length", f"wave {waves}, request {i} ended with {reason}"
                assert text == solo[i], f"wave {waves}, request {i}: {text!r} != solo {solo[i]!r}"
    changer.join()
    assert not failures, failures[:3]
    assert len(applied) == CHANGES
    audit = requests.get(url + "/admin/audit", timeout=10).json()["entries"]
    assert len(audit) == 1000, "the audit log keeps its newest 1,000 entries"
    requests.patch(url + "/admin/config", json=original["settings"], timeout=10).raise_for_status()
