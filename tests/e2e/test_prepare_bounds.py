"""Bounds on prompt preparation seen from outside (issue 15, defects 1 and 10):

- /tokenize runs on the engine's tokenizer workers, not on the two HTTP
  route workers: /health and /metrics answer while big /tokenize calls run;
- the per-connection bound holds one full completions request (64
  prompts), and the server refuses to start with a bound below that;
- a WebSocket past --max-pending-prompts-per-connection gets an error
  frame (connection_prompt_limit) and is served again afterwards;
- a WebSocket cancel removes a queued prompt: its done frame (abort) comes
  before the prompt ahead of it has even been prepared;
- a /tokenize call whose client disconnects while it waits is taken out of
  the queue.

One tokenizer worker and a prompt of megabytes (too long for the demo
model's context: it fails once encoded) keep that worker busy while the
test sends what follows. The queue-removal test needs the worker busy for
longer than a few polls of /metrics, so it sends a prompt twelve times
that size (over a second of encoding; just under the engine's 32 MiB
prompt limit, with a body limit raised to fit it).
"""

import json
import os
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from websockets.sync.client import connect

from conftest import LiveServer, free_port, wait_for

BIG_PROMPT = "".join(f" lorem{i % 97}" for i in range(300_000))
HUGE_PROMPT = BIG_PROMPT * 12
FULL_REQUEST = 64  # prompts one completions request may carry, the least the bound may be


@pytest.fixture(scope="module")
def bounded_server():
    live = LiveServer(["--tokenizer-workers", "1", "--max-pending-prompts-per-connection", str(FULL_REQUEST),
                       "--max-body-bytes", str(2 * len(HUGE_PROMPT))])
    yield live
    live.stop()


def ws_url(server):
    return server.base_url.replace("http://", "ws://") + "/v1/ws"


def test_health_and_metrics_answer_while_big_tokenize_calls_run(bounded_server):
    url = bounded_server.base_url
    with ThreadPoolExecutor(8) as pool:
        calls = [pool.submit(requests.post, url + "/tokenize", json={"prompt": BIG_PROMPT}, timeout=300)
                 for _ in range(8)]
        # More calls than route workers (2) are in the engine's queue at once, and /metrics says so.
        assert wait_for(lambda: bounded_server.metric("troupe:num_prompts_pending") >= 3, timeout_s=60,
                        interval_s=0.01), \
            "the /tokenize calls never waited in the engine's prepare queue"
        health = requests.get(url + "/health", timeout=30)
        assert health.status_code == 200
        assert not all(call.done() for call in calls), "/health waited for the /tokenize calls"
        counts = {call.result().json()["count"] for call in calls}
    assert len(counts) == 1 and counts.pop() > 300_000
    assert bounded_server.metric("troupe:num_prompts_pending") == 0


def test_a_full_completions_request_fits_the_connection_bound(bounded_server):
    prompts = [f"prompt {i}" for i in range(FULL_REQUEST)]
    served = requests.post(bounded_server.base_url + "/v1/completions",
                           json={"prompt": prompts, "max_tokens": 1}, timeout=300)
    assert served.status_code == 200, served.text
    assert len(served.json()["choices"]) == FULL_REQUEST


def test_a_bound_below_a_full_request_stops_startup_naming_the_knob():
    done = subprocess.run([os.environ["TROUPE_BIN"], "serve", "--host", "127.0.0.1", "--port", str(free_port()),
                           "--max-pending-prompts-per-connection", "8"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "knob 'max_pending_prompts_per_connection' (from command_line): 8 is outside [64, 16777216]" in output, output


def test_a_websocket_past_its_bound_gets_an_error_frame_then_is_served_again(bounded_server):
    with connect(ws_url(bounded_server), open_timeout=30, max_size=None) as ws:
        ws.send(json.dumps({"type": "generate", "id": "batch", "endpoint": "completions",
                            "prompt": [BIG_PROMPT] + ["a"] * (FULL_REQUEST - 1), "max_tokens": 1}))
        ws.send(json.dumps({"type": "generate", "id": "more", "endpoint": "completions",
                            "prompt": "b", "max_tokens": 1}))
        frame = json.loads(ws.recv(timeout=120))
        assert frame["type"] == "error" and frame["id"] == "more", frame
        assert frame["error"]["code"] == "connection_prompt_limit"
        assert "max_pending_prompts_per_connection" in frame["error"]["message"]
        while (frame := json.loads(ws.recv(timeout=300)))["type"] not in ("done", "error"):
            assert frame["id"] == "batch", frame
        assert frame["id"] == "batch" and frame["type"] == "error", frame  # the big prompt: too long, once encoded
        ws.send(json.dumps({"type": "generate", "id": "small", "endpoint": "completions",
                            "prompt": "hello", "max_tokens": 2, "ignore_eos": True}))
        while (frame := json.loads(ws.recv(timeout=300)))["type"] != "done":
            assert frame["type"] == "delta" and frame["id"] == "small", frame
        assert frame["finish_reason"] == "length"


def test_a_cancelled_queued_prompt_ends_before_the_prompt_ahead_of_it_is_prepared(bounded_server):
    with connect(ws_url(bounded_server), open_timeout=30, max_size=None) as ws:
        ws.send(json.dumps({"type": "generate", "id": "big", "endpoint": "completions",
                            "prompt": BIG_PROMPT, "max_tokens": 1}))
        ws.send(json.dumps({"type": "generate", "id": "queued", "endpoint": "completions",
                            "prompt": "hello", "max_tokens": 2}))
        ws.send(json.dumps({"type": "cancel", "id": "queued"}))
        order = []
        while len(order) < 2:
            frame = json.loads(ws.recv(timeout=300))
            if frame["type"] in ("done", "error"):
                order.append((frame["id"], frame["type"], frame.get("finish_reason")))
    assert order[0] == ("queued", "done", "abort"), order
    assert order[1][0] == "big" and order[1][1] == "error", order  # too long for the context, once encoded


def test_a_tokenize_call_whose_client_leaves_is_taken_out_of_the_queue(bounded_server):
    url = bounded_server.base_url

    def pending_is(count):
        return wait_for(lambda: bounded_server.metric("troupe:num_prompts_pending") == count,
                        timeout_s=30, interval_s=0.01)

    with ThreadPoolExecutor(1) as pool:
        # A completions call, not /tokenize, so that its answer is a short error, not millions of ids.
        big = pool.submit(requests.post, url + "/v1/completions", json={"prompt": HUGE_PROMPT, "max_tokens": 1},
                          timeout=300)
        assert pending_is(1)
        body = json.dumps({"prompt": "hello"}).encode()
        with socket.create_connection(("127.0.0.1", bounded_server.port)) as leaving:
            leaving.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            assert pending_is(2)
        # Gone from the queue while the big call ahead of it still runs.
        assert pending_is(1)
        assert not big.done(), "the big call ended first: the test shows nothing"
        answer = big.result()
        assert answer.status_code == 413, answer.text  # too long for the context, once encoded
    assert bounded_server.metric("troupe:num_prompts_pending") == 0
