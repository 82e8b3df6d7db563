"""The admin API on a live server (issue 16): every knob readable, valid
changes observed through the engine's behaviour, bad ones refused without
effect, the request table with abort and priority, the audit trail, the
snapshot stream, write-back, and who may use any of it."""

import json
import os
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import LiveServer, free_port, wait_for

if not os.environ.get("TROUPE_BIN"):
    pytest.skip("TROUPE_BIN is not set: end-to-end suites need a built troupe binary", allow_module_level=True)

LONG_PROMPT = "the quick brown fox jumps over the lazy dog " * 12


@pytest.fixture(scope="module")
def admin_server(tmp_path_factory):
    config_file = tmp_path_factory.mktemp("admin") / "troupe.json"
    config_file.write_text(json.dumps({"max_waiting_requests": 4000}))
    live = LiveServer(["--config-file", str(config_file)])
    live.config_file = config_file
    yield live
    live.stop()


def admin(server, method, path, **kwargs):
    return requests.request(method, server.base_url + path, timeout=30, **kwargs)


def config(server):
    response = admin(server, "GET", "/admin/config")
    response.raise_for_status()
    return response.json()


def patch(server, body):
    return admin(server, "PATCH", "/admin/config", json=body)


@pytest.fixture
def restore(admin_server):
    original = config(admin_server)["settings"]
    yield
    patch(admin_server, original).raise_for_status()


def iteration_buckets(server):
    return server.histogram_buckets("troupe:iteration_tokens_total")


def steps_above(before, after, limit):
    """Steps between two bucket readings with more than `limit` tokens."""
    total = lambda b: b[float("inf")] - b[limit]
    return total(after) - total(before)


def completion(server, prompt, max_tokens, **extra):
    body = {"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, **extra}
    return requests.post(server.base_url + "/v1/completions", json=body, timeout=300)


def test_every_knob_is_readable_with_its_description(admin_server):
    knobs = config(admin_server)["knobs"]
    listed = json.loads(subprocess.run([os.environ["TROUPE_BIN"], "knobs", "--json"], capture_output=True, text=True,
                                       check=True).stdout)
    assert list(knobs) == [knob["name"] for knob in listed], "every knob of the registry, in its order"
    assert {name: knob["live"] for name, knob in knobs.items()} == {k["name"]: k["live"] for k in listed}
    for name in ["mlfq_levels", "mlfq_promote_after", "fair_prompt_weight", "swap_min_tokens",
                 "preemption_grace_steps", "admission_watermark", "num_speculative_tokens"]:
        assert knobs[name]["live"], name
    for name, knob in knobs.items():
        assert {"kind", "help", "live", "group", "source"} <= knob.keys(), name
        assert ("value" in knob) != knob["secret"], name
        if knob["kind"] in ("integer", "real"):
            assert "min" in knob and "max" in knob, name
    assert knobs["admission_watermark"]["live"] and not knobs["block_size"]["live"]
    assert knobs["max_waiting_requests"]["source"] == "file"
    assert knobs["admin_token"] == {**knobs["admin_token"], "secret": True, "set": False}


def test_a_lowered_token_budget_bounds_every_later_step(admin_server, restore):
    before_load = iteration_buckets(admin_server)
    with ThreadPoolExecutor(4) as pool:
        first = [pool.submit(completion, admin_server, f"{i} {LONG_PROMPT}", 24) for i in range(4)]
        assert wait_for(lambda: steps_above(before_load, iteration_buckets(admin_server), 16) > 0, timeout_s=60), \
            "with the default budget, prefill steps take more than 16 tokens"
        assert patch(admin_server, {"max_num_batched_tokens": 16}).status_code == 200
        steps_now = admin_server.metric("troupe:iteration_tokens_total_count")
        # Steps planned before the change may still be in flight: start counting two steps later.
        assert wait_for(lambda: admin_server.metric("troupe:iteration_tokens_total_count") >= steps_now + 2, 30)
        after_change = iteration_buckets(admin_server)
        second = [pool.submit(completion, admin_server, f"again {i} {LONG_PROMPT}", 8) for i in range(4)]
        results = [f.result() for f in first + second]
    assert all(r.status_code == 200 for r in results), [r.text for r in results]
    final = iteration_buckets(admin_server)
    assert final[float("inf")] > after_change[float("inf")] + 20, "the long prompts ran in many small steps"
    assert steps_above(after_change, final, 16) == 0, "no step took more tokens than the lowered budget"
    assert config(admin_server)["settings"]["max_num_batched_tokens"] == 16


def finish_order(server, policy):
    """With one running slot taken by a blocker, queues A (priority 5) then B (priority 0), aborts the blocker and
    returns the order the three end in."""
    assert patch(server, {"policy": policy, "max_num_seqs": 1}).status_code == 200
    ended = []
    lock = threading.Lock()

    def run(name, priority, max_tokens):
        response = completion(server, f"{name} {LONG_PROMPT}", max_tokens, priority=priority)
        assert response.status_code == 200, response.text
        with lock:
            ended.append(name)

    table = lambda: admin(server, "GET", "/admin/requests").json()["requests"]
    threads = [threading.Thread(target=run, args=("blocker", -100, server.model()["max_model_len"] - 200))]
    threads[0].start()
    assert wait_for(lambda: any(r["state"] == "decoding" for r in table()), 30)
    blocker = table()[0]["id"]
    for name, priority in [("A", 5), ("B", 0)]:
        threads.append(threading.Thread(target=run, args=(name, priority, 4)))
        threads[-1].start()
        assert wait_for(lambda: len(table()) == len(threads), 30)
    assert [r["state"] for r in table()] == ["decoding", "queued", "queued"]
    assert admin(server, "POST", f"/admin/requests/{blocker}/abort").status_code == 200
    for thread in threads:
        thread.join()
    return ended


def test_a_policy_switch_reorders_the_queue(admin_server, restore):
    assert finish_order(admin_server, "fcfs") == ["blocker", "A", "B"]
    assert finish_order(admin_server, "priority") == ["blocker", "B", "A"]


@pytest.mark.parametrize("body, field, says", [
    ({"max_num_batched_tokens": 0}, "max_num_batched_tokens", "[1, 1048576]"),
    ({"admission_watermark": 0.9}, "admission_watermark", "[0, 0.5]"),
    ({"max_num_seqs": "many"}, "max_num_seqs", "not an integer"),
    ({"max_num_seqs": [4]}, "max_num_seqs", "string, number or boolean"),
    ({"policy": "lifo"}, "policy", "fcfs, priority, mlfq, deadline, fair"),
    ({"block_size": 32}, "block_size", "restart-only"),
    ({"tokenizer_workers": 4}, "tokenizer_workers", "restart-only"),
    ({"max_n": 0}, "max_n", "[1, 1024]"),
    ({"default_temperature": 3}, "default_temperature", "[-1, 2]"),
    ({"max_num_seqs": 8, "mlfq_levels": 0}, "mlfq_levels", "[1, 16]"),
])
def test_bad_changes_are_refused_by_name_without_effect(admin_server, body, field, says):
    before = config(admin_server)
    response = patch(admin_server, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == field
    assert says in error["message"]
    after = config(admin_server)
    assert after["settings"] == before["settings"]
    assert after["knobs"]["block_size"]["value"] == before["knobs"]["block_size"]["value"]


def test_abort_and_priority_from_the_request_table(admin_server):
    body = {"prompt": LONG_PROMPT, "max_tokens": admin_server.model()["max_model_len"] - 200, "ignore_eos": True,
            "stream": True}
    with requests.post(admin_server.base_url + "/v1/completions", json=body, stream=True, timeout=120) as stream:
        lines = stream.iter_lines()
        assert next(l for l in lines if l.startswith(b"data: "))
        table = admin(admin_server, "GET", "/admin/requests").json()["requests"]
        assert len(table) == 1
        row = table[0]
        assert {"id", "state", "priority", "user", "deadline_s", "mlfq_level", "prompt_tokens", "generated_tokens",
                "device_blocks", "host_blocks", "age_s", "ttft_s"} <= row.keys()
        assert row["state"] == "decoding" and row["device_blocks"] > 0 and row["ttft_s"] is not None
        path = "/admin/requests/" + row["id"]
        assert admin(admin_server, "POST", path + "/priority", json={"priority": -3}).status_code == 200
        assert admin(admin_server, "GET", "/admin/requests").json()["requests"][0]["priority"] == -3
        assert admin(admin_server, "POST", path + "/abort").status_code == 200
        reasons = [json.loads(l[6:])["choices"][0]["finish_reason"] for l in lines
                   if l.startswith(b"data: {")]
    assert reasons[-1] == "abort"
    assert admin(admin_server, "POST", path + "/abort").status_code == 404, "no longer live"
    entries = admin(admin_server, "GET", "/admin/audit").json()["entries"]
    actions = [(e["action"], e["target"], e["to"]) for e in entries]
    assert ("priority", row["id"], "-3") in actions and ("abort", row["id"], "abort") in actions
    assert all(e["who"].startswith("loopback@127.0.0.1") for e in entries)
    log = open(admin_server.log_path, encoding="utf-8", errors="replace").read()
    assert re.search(r"admin audit: loopback@127\.0\.0\.1 abort " + re.escape(row["id"]), log)


def test_changes_are_audited_from_and_to(admin_server, restore):
    before = config(admin_server)["settings"]["swap_min_tokens"]
    assert patch(admin_server, {"swap_min_tokens": before + 7}).status_code == 200
    entry = admin(admin_server, "GET", "/admin/audit").json()["entries"][-1]
    assert (entry["action"], entry["target"], entry["from"], entry["to"]) == \
        ("config", "swap_min_tokens", str(before), str(before + 7))
    assert entry["time"] == pytest.approx(time.time(), abs=60)


def test_the_stream_pushes_snapshots_at_the_asked_rate(admin_server):
    sync_client = pytest.importorskip("websockets.sync.client")
    with sync_client.connect(f"ws://127.0.0.1:{admin_server.port}/admin/stream?interval=0.2") as ws:
        started = time.monotonic()
        snapshots = [json.loads(ws.recv(timeout=10)) for _ in range(4)]
        elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 5
    assert {"gauges", "rates", "latency", "totals", "settings", "requests"} <= snapshots[-1].keys()
    assert snapshots[-1]["interval_s"] == pytest.approx(0.2, abs=0.15)
    assert snapshots[0]["rates"]["generation_tokens_per_s"] is None and \
        snapshots[-1]["rates"]["generation_tokens_per_s"] is not None


def test_save_writes_the_live_settings_to_the_config_file(admin_server, restore):
    assert patch(admin_server, {"preemption_grace_steps": 3}).status_code == 200
    response = admin(admin_server, "POST", "/admin/config/save")
    assert response.status_code == 200, response.text
    saved = json.loads(admin_server.config_file.read_text())
    assert saved["preemption_grace_steps"] == 3
    assert saved["max_waiting_requests"] == 4000


def test_an_admin_token_is_required_and_an_api_key_is_not_one():
    live = LiveServer(["--admin-token", "admin-s3cret", "--api-key", "client-key"])
    try:
        url = live.base_url + "/admin/config"
        assert requests.get(url, timeout=10).status_code == 401
        assert requests.get(url, headers={"Authorization": "Bearer wrong"}, timeout=10).status_code == 401
        assert requests.get(url, headers={"Authorization": "Bearer client-key"}, timeout=10).status_code == 401
        refused = requests.patch(url, json={"max_num_seqs": 3}, headers={"Authorization": "Bearer client-key"},
                                 timeout=10)
        assert refused.status_code == 401
        ok = requests.get(url, headers={"Authorization": "Bearer admin-s3cret"}, timeout=10)
        assert ok.status_code == 200 and ok.json()["settings"]["max_num_seqs"] != 3
        assert requests.get(live.base_url + "/v1/models", headers={"Authorization": "Bearer admin-s3cret"},
                            timeout=10).status_code == 401, "the admin token is not an API key"
    finally:
        live.stop()


def test_a_public_host_without_an_admin_token_refuses_to_start():
    result = subprocess.run([os.environ["TROUPE_BIN"], "serve", "--host", "0.0.0.0", "--port", str(free_port())],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "admin_token" in result.stdout + result.stderr


def test_an_admin_port_serves_admin_only_and_the_main_port_none_of_it():
    admin_port = free_port()
    live = LiveServer(["--admin-port", str(admin_port), "--admin-token", "admin-s3cret"])
    try:
        token = {"Authorization": "Bearer admin-s3cret"}
        admin_url = f"http://127.0.0.1:{admin_port}"
        on_admin = requests.get(admin_url + "/admin/config", headers=token, timeout=10)
        assert on_admin.status_code == 200 and "max_num_seqs" in on_admin.json()["settings"]
        assert requests.get(admin_url + "/admin", headers=token, timeout=10).status_code == 200
        assert requests.get(admin_url + "/admin/config", timeout=10).status_code == 401, "the token still applies"
        assert requests.get(live.base_url + "/admin/config", headers=token, timeout=10).status_code == 404
        assert requests.get(live.base_url + "/admin", headers=token, timeout=10).status_code == 404
        assert requests.get(admin_url + "/v1/models", timeout=10).status_code == 404
        assert requests.get(live.base_url + "/v1/models", timeout=10).status_code == 200
        log = open(live.log_path, encoding="utf-8", errors="replace").read()
        assert f"admin endpoints on http://127.0.0.1:{admin_port}/admin" in log
    finally:
        live.stop()


def test_a_lowered_max_n_refuses_a_larger_request_at_once(admin_server, restore):
    assert completion(admin_server, "hello", 2, n=3).status_code == 200
    assert patch(admin_server, {"max_n": 2}).status_code == 200
    assert config(admin_server)["settings"]["max_n"] == 2
    refused = completion(admin_server, "hello", 2, n=3)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "n"
    assert completion(admin_server, "hello", 2, n=2).status_code == 200


def test_default_sampling_knobs_change_what_requests_without_them_get(admin_server, restore):
    def text(**sampling):
        response = completion(admin_server, "once upon a time", 24, seed=11, **sampling)
        assert response.status_code == 200, response.text
        return response.json()["choices"][0]["text"]

    # Unset, the model's generation_config.json (temperature 0.7, top_p 0.9) applies.
    assert text() == text(temperature=0.7, top_p=0.9)
    outputs = {}
    for temperature in [0.0, 1.8]:
        assert patch(admin_server, {"default_temperature": temperature, "default_top_p": 1}).status_code == 200
        outputs[temperature] = text()
        assert outputs[temperature] == text(temperature=temperature, top_p=1.0)
    assert outputs[0.0] != outputs[1.8]
    assert text(temperature=0.0) == outputs[0.0], "the request's own field wins over the knob"
