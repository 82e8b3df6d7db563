"""Fault injection on the real engine (issue 15, part 5), seen from outside:

- a hung executor (--test-executor-fault hang: a step never answers) is
  noticed within --step-timeout; the request in it ends with an error event,
  /health turns 503 within 2 s of its last token, the KV pool is empty again
  and new generations fail fast;
- a step that throws std::bad_alloc (--test-executor-fault throw) fails the
  request in it only: the engine stays healthy, counts the failure in
  troupe:step_failures_total and serves the request waiting beside it and
  later ones; a budget raised past the step workspace's limit is refused
  with 409 naming the knobs;
- an HTTP handler that throws (--test-io-fault-marker) closes its
  connection only, counted in troupe:http_handler_exceptions_total;
- a client that never reads (SSE or WebSocket) is given up on once its
  outgoing queue (--stream-queue-bytes) or a write (--write-timeout) stalls:
  its request is aborted and its blocks freed, while a request beside it
  streams to the end untouched.
"""

import base64
import json
import os
import socket
import threading
import time

import pytest
import requests

from conftest import LiveServer, wait_for

STEP_TIMEOUT_S = 1.0


def open_raw(port, receive_buffer=None):
    """A TCP connection to the server; a small receive buffer makes a client that never reads stall the server soon."""
    s = socket.socket()
    if receive_buffer:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    s.settimeout(60)
    s.connect(("127.0.0.1", port))
    return s


def post_stream(sock, body):
    payload = json.dumps({**body, "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)


def read_stream(sock, buffer=b"", until=b"data: [DONE]"):
    """Reads an SSE response, after `buffer` already read, until `until` has arrived (by default its end):
    (events as parsed JSON, time of each text chunk read here, everything read)."""
    chunk_times = []
    while until not in buffer:
        data = sock.recv(65536)
        if not data:
            break
        before = buffer.count(b"data: {")
        buffer += data
        chunk_times += [time.monotonic()] * (buffer.count(b"data: {") - before)
    events = [json.loads(line[6:]) for line in buffer.split(b"\n") if line.startswith(b"data: {")]
    return events, chunk_times, buffer


@pytest.fixture(scope="module")
def hanging_server():
    live = LiveServer(["--test-fail-executor-after-steps", "40", "--test-executor-fault", "hang",
                       "--step-timeout", str(STEP_TIMEOUT_S)])
    yield live
    live.stop()


def test_a_hung_executor_fails_its_request_and_health_within_two_seconds(hanging_server):
    server = hanging_server
    assert requests.get(server.base_url + "/health", timeout=5).status_code == 200
    body = {"model": server.model()["id"], "prompt": "Keep going", "max_tokens": 200, "ignore_eos": True}
    with open_raw(server.port) as s:
        post_stream(s, body)
        events, chunk_times, _ = read_stream(s)
    assert chunk_times, "no token before the hang"
    errors = [event["error"] for event in events if "error" in event]
    assert errors, f"the stream ended without an error event: {events[-2:]}"
    assert "step_timeout" in errors[0]["message"], errors[0]
    left_s = 2.0 - (time.monotonic() - chunk_times[-1])
    unhealthy = wait_for(lambda: requests.get(server.base_url + "/health", timeout=2).status_code == 503,
                         timeout_s=max(0.0, left_s))
    assert unhealthy, "/health still 200 two seconds after the last token"
    assert wait_for(lambda: server.metric("troupe:kv_cache_usage_perc") == 0, timeout_s=2), "blocks leaked"
    assert server.metric("troupe:num_requests_running") == 0
    started = time.monotonic()
    late = requests.post(server.base_url + "/v1/completions", json={**body, "max_tokens": 2}, timeout=10)
    assert late.status_code >= 500
    assert time.monotonic() - started < 2.0


@pytest.fixture(scope="module")
def throwing_server():
    # One sequence at a time: the second request waits outside the failing step.
    live = LiveServer(["--test-fail-executor-after-steps", "60", "--test-executor-fault", "throw",
                       "--max-num-seqs", "1", "--tokenizer-workers", "1", "--max-step-workspace-bytes",
                       str(256 << 20), "--test-io-fault-marker", "io-fault"])
    yield live
    live.stop()


def test_a_step_that_throws_fails_its_request_only_and_the_engine_serves_on(throwing_server):
    server = throwing_server
    model = server.model()["id"]
    failing = {"model": model, "prompt": "Keep going", "max_tokens": 200, "ignore_eos": True}
    waiting = {"model": model, "prompt": "Wait your turn", "max_tokens": 5, "ignore_eos": True}
    result = {}

    def second():
        result["waiting"] = requests.post(server.base_url + "/v1/completions", json=waiting, timeout=60)

    with open_raw(server.port) as s:
        post_stream(s, failing)
        # Its first token says it runs (polling the running gauge missed the
        # few milliseconds a fast build needs for the 60 steps).
        started, _, read = read_stream(s, until=b"}\n\n")  # one whole event
        assert started, read
        beside = threading.Thread(target=second)
        beside.start()
        events, _, _ = read_stream(s, read)
    beside.join(timeout=60)
    assert any("error" not in event for event in events), "no token before the failing step"
    errors = [event["error"] for event in events if "error" in event]
    assert errors, f"the stream ended without an error event: {events[-2:]}"
    assert "bad_alloc" in errors[0]["message"], errors[0]
    assert result["waiting"].status_code == 200, result["waiting"].text
    assert result["waiting"].json()["usage"]["completion_tokens"] == 5
    assert requests.get(server.base_url + "/health", timeout=5).status_code == 200
    assert server.metric("troupe:step_failures_total") == 1
    later = requests.post(server.base_url + "/v1/completions", json={**waiting, "max_tokens": 2}, timeout=30)
    assert later.status_code == 200, later.text
    assert wait_for(lambda: server.metric("troupe:kv_cache_usage_perc") == 0, timeout_s=5), "blocks leaked"


def test_a_budget_past_the_step_workspace_limit_is_refused(throwing_server):
    server = throwing_server
    refused = requests.patch(server.base_url + "/admin/config", json={"max_num_batched_tokens": 1 << 20}, timeout=10)
    assert refused.status_code == 409, refused.text
    message = refused.json()["error"]["message"]
    assert "max_num_batched_tokens 1048576" in message and "max_step_workspace_bytes" in message, message
    settings = requests.get(server.base_url + "/admin/config", timeout=10).json()["settings"]
    assert settings["max_num_batched_tokens"] != 1 << 20


def test_a_throwing_http_handler_closes_only_its_connection(throwing_server):
    server = throwing_server
    with open_raw(server.port) as bystander, open_raw(server.port) as poisoned:
        request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        bystander.sendall(request)
        assert bystander.recv(65536).startswith(b"HTTP/1.1 200")
        poisoned.sendall(b"GET /health?io-fault HTTP/1.1\r\nHost: x\r\n\r\n")
        assert poisoned.recv(65536) == b"", "the connection whose handler threw answered"
        bystander.sendall(request)
        assert bystander.recv(65536).startswith(b"HTTP/1.1 200"), "the other connection was closed too"
    assert server.metric("troupe:http_handler_exceptions_total") == 1


@pytest.fixture(scope="module")
def small_queue_server():
    live = LiveServer(["--stream-queue-bytes", "65536"])
    yield live
    live.stop()


def websocket_upgrade(sock):
    """The handshake, read up to the end of the 101 response (the last bytes this client reads)."""
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    response = b""
    while b"\r\n\r\n" not in response:
        data = sock.recv(1)
        assert data, "the server closed the socket during the handshake"
        response += data
    assert response.startswith(b"HTTP/1.1 101"), response


def websocket_text_frame(text):
    """One masked client text frame."""
    payload, mask = text.encode(), os.urandom(4)
    header = bytes([0x81])
    if len(payload) < 126:
        header += bytes([0x80 | len(payload)])
    else:
        header += bytes([0x80 | 126]) + len(payload).to_bytes(2, "big")
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def start_unread_generation(server, transport, body):
    """A generation whose client never reads a byte of the answer; returns the socket."""
    s = open_raw(server.port, receive_buffer=4096)
    if transport == "sse":
        post_stream(s, body)
    else:
        websocket_upgrade(s)
        s.sendall(websocket_text_frame(json.dumps({"type": "generate", "id": "never-read",
                                                   "endpoint": "completions", **body})))
    return s


def finished_by_reason(server):
    """troupe:request_success_total by finished_reason."""
    return {dict(labels)["finished_reason"]: value for (name, labels), value in server.metrics().items()
            if name == "troupe:request_success_total"}


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_a_client_that_never_reads_is_aborted_and_frees_its_blocks(small_queue_server, transport):
    server = small_queue_server
    model = server.model()
    assert wait_for(lambda: server.metric("troupe:kv_cache_usage_perc") == 0, timeout_s=30)
    before = finished_by_reason(server)
    # Sixteen choices with 20 alternatives per token: about 10 MB of output, more than the socket buffers
    # hold (the kernel grows a loopback send buffer up to 4 MiB by default).
    heavy = {"model": model["id"], "prompt": "a long story", "max_tokens": model["max_model_len"] - 64,
             "ignore_eos": True, "n": 16, "logprobs": 20}
    normal = {"model": model["id"], "prompt": "a bystander", "max_tokens": 300, "ignore_eos": True}
    unread = start_unread_generation(server, transport, heavy)
    result = {}

    def bystander():
        with open_raw(server.port) as s:
            post_stream(s, normal)
            result["events"], _, _ = read_stream(s)

    reader = threading.Thread(target=bystander)
    try:
        assert wait_for(lambda: server.metric("troupe:num_requests_running") >= 1, timeout_s=10)
        reader.start()
        # Given up once its queue overflows, or within the write timeout (5 s, conftest) of a stalled write.
        aborted = wait_for(lambda: finished_by_reason(server)["abort"] > before["abort"], timeout_s=20)
        assert aborted, "the request of the client that never reads was not aborted"
        reader.join(timeout=60)
        assert not reader.is_alive()
    finally:
        unread.close()
    reasons = [event["choices"][0]["finish_reason"] for event in result["events"]
               if event.get("choices") and event["choices"][0].get("finish_reason")]
    assert reasons == ["length"], "the bystander was disturbed"
    assert wait_for(lambda: server.metric("troupe:num_requests_running") == 0, timeout_s=10)
    assert wait_for(lambda: server.metric("troupe:kv_cache_usage_perc") == 0, timeout_s=5), "blocks leaked"
    after = finished_by_reason(server)
    assert after["abort"] - before["abort"] == 1
    assert after["length"] - before["length"] == 1, "the bystander, counted once"
    assert after["stop"] == before["stop"]
