"""Issue #5's abuse list against a live server: each case asserts the status
and error JSON, then that the server still serves the next request."""

import json
import os
import socket
import time

import pytest
import requests

from conftest import wait_for


def check_error(response, status, param=None):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    return error


def still_serving(server, model_name):
    response = requests.post(server.base_url + "/v1/completions",
                             json={"model": model_name, "prompt": "ok", "max_tokens": 1}, timeout=60)
    assert response.status_code == 200, response.text


def post_raw(server, body, headers=None):
    return requests.post(server.base_url + "/v1/completions", data=body,
                         headers={"Content-Type": "application/json", **(headers or {})}, timeout=60)


CASES = [
    ("malformed JSON", b'{"prompt": "x",', 400, None),
    ("wrong type", json.dumps({"prompt": "x", "max_tokens": "ten"}).encode(), 400, "max_tokens"),
    ("invalid UTF-8", b'{"prompt": "\xc3\x28"}', 400, None),
    ("n=100000", json.dumps({"prompt": "x", "n": 100000}).encode(), 400, "n"),
    ("max_tokens=-1", json.dumps({"prompt": "x", "max_tokens": -1}).encode(), 400, "max_tokens"),
    ("max_tokens=10^9", json.dumps({"prompt": "x", "max_tokens": 10**9}).encode(), 400, "max_tokens"),
    ("10,000 stop strings", json.dumps({"prompt": "x", "stop": [f"s{i}" for i in range(10000)]}).encode(), 400,
     "stop"),
    ("out-of-range token ids", json.dumps({"prompt": [1, 2, 10**9]}).encode(), 400, "prompt[2]"),
    ("empty prompt", json.dumps({"prompt": ""}).encode(), 400, "prompt"),
    ("unknown model", json.dumps({"model": "no-such-model", "prompt": "x"}).encode(), 404, "model"),
    # 64 prompts x 16 choices x 300 tokens is over the default output budget (262144 tokens).
    ("output budget", json.dumps({"prompt": ["x"] * 64, "n": 16, "max_tokens": 300, "ignore_eos": True}).encode(),
     400, "max_tokens"),
]


@pytest.mark.parametrize("name,body,status,param", CASES, ids=[c[0] for c in CASES])
def test_bad_request_bodies(server, model_name, name, body, status, param):
    check_error(post_raw(server, body), status, param)
    still_serving(server, model_name)


def test_huge_body(server, model_name):
    body = b'{"prompt": "' + b"a" * (9 << 20) + b'"}'
    error = check_error(post_raw(server, body), 413)
    assert error["code"] == "body_too_large"
    still_serving(server, model_name)


def test_one_megabyte_header(server, model_name):
    response = requests.get(server.base_url + "/health", headers={"X-Big": "a" * (1 << 20)}, timeout=60)
    assert check_error(response, 431)["code"] == "header_too_large"
    still_serving(server, model_name)


def test_slowloris_connections_are_closed(server, model_name):
    sockets = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        sockets.append(s)
    closed = set()
    deadline = time.monotonic() + 15  # the suite runs the server with --read-timeout 2
    while len(closed) < len(sockets) and time.monotonic() < deadline:
        for i, s in enumerate(sockets):
            if i in closed:
                continue
            try:
                s.sendall(b"X")
                s.settimeout(0.01)
                if s.recv(1024) == b"":
                    closed.add(i)
            except socket.timeout:
                pass
            except OSError:
                closed.add(i)
        still_serving(server, model_name)
        time.sleep(0.2)
    for s in sockets:
        s.close()
    assert len(closed) == len(sockets)


def test_a_client_that_never_reads_does_not_stall_others(server, model_name, long_output):
    stalled = socket.create_connection(("127.0.0.1", server.port))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    body = json.dumps({"model": model_name, "prompt": "flood", "n": 8, "max_tokens": min(512, long_output),
                       "ignore_eos": True, "logprobs": 20, "stream": True}).encode()
    stalled.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(1.0)
    for _ in range(3):
        started = time.monotonic()
        still_serving(server, model_name)
        assert time.monotonic() - started < 30
    stalled.close()
    assert wait_for(lambda: server.metric("troupe:num_requests_running") == 0, timeout_s=30)


def masked_text_frame(payload):
    size = len(payload)
    if size < 126:
        length = bytes([0x80 | size])
    elif size <= 0xFFFF:
        length = bytes([0x80 | 126]) + size.to_bytes(2, "big")
    else:
        length = bytes([0x80 | 127]) + size.to_bytes(8, "big")
    mask = os.urandom(4)
    return bytes([0x81]) + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def websocket_upgrade(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    response = b""
    while b"\r\n\r\n" not in response:
        response += s.recv(4096)
    assert response.startswith(b"HTTP/1.1 101"), response
    return s


def test_a_websocket_pinger_that_never_reads_is_dropped(server, model_name):
    pinger = websocket_upgrade(server)
    pinger.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    frame = masked_text_frame(json.dumps({"type": "ping", "data": "p" * (64 << 10)}).encode())
    started = time.monotonic()
    dropped = False
    while not dropped and time.monotonic() - started < 60:  # the suite's --write-timeout is 5
        try:
            pinger.sendall(frame)
        except OSError:
            dropped = True
    pinger.close()
    assert dropped
    assert time.monotonic() - started < 30  # within the write timeout once the socket buffers are full
    assert requests.get(server.base_url + "/health", timeout=10).status_code == 200
    still_serving(server, model_name)


def test_a_websocket_upgrade_with_a_body_is_refused(server, model_name):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
              b"Content-Length: 1000000\r\n\r\n" + b"b" * 4096)
    s.settimeout(10)
    response = b""
    try:
        while chunk := s.recv(4096):  # the server answers, then closes without reading the body
            response += chunk
    except OSError:
        pass
    s.close()
    assert response.startswith(b"HTTP/1.1 400"), response
    assert json.loads(response.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "upgrade_with_body"
    still_serving(server, model_name)
