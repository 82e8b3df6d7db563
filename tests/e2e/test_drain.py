"""Graceful drain of the real engine (issue 15, part 6): SIGTERM under load
stops admission (503 with Retry-After on a connection that was already
open; new connections are refused), lets running requests finish within the
shutdown timeout, ends the rest with finish_reason "abort", and exits 0."""

import json
import signal
import socket
import threading
import time

from conftest import LiveServer, wait_for

# Short enough that the long generations below cannot end within it even on
# a fast machine (16 sequences of ~1000 tokens: ~1000 steps of a 16-row
# batch), long enough for the short ones (24 tokens) on a loaded one.
SHUTDOWN_TIMEOUT_S = 1.0
NUM_LONG = 16


def stream_completion(server, body, out):
    """Streams one completion over a raw socket; records its text chunks and finish reason in `out`."""
    payload = json.dumps({**body, "stream": True}).encode()
    out["chunks"] = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        buffer = b""
        while b"data: [DONE]" not in buffer:
            data = s.recv(65536)
            if not data:
                break
            buffer += data
            out["chunks"] = buffer.count(b"data: {")
    out["status"] = int(buffer.split(b" ", 2)[1]) if buffer.startswith(b"HTTP/1.1 ") else None
    reasons = [json.loads(line[6:])["choices"][0].get("finish_reason")
               for line in buffer.split(b"\n") if line.startswith(b"data: {")]
    out["finish_reason"] = next((r for r in reversed(reasons) if r), None)
    out["done"] = b"data: [DONE]" in buffer


def read_response(sock):
    """One HTTP/1.1 response with a Content-Length body: (status, headers, body)."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        assert data, "connection closed before a response"
        buffer += data
    head, body = buffer.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    while len(body) < int(headers.get("content-length", 0)):
        body += sock.recv(65536)
    return int(lines[0].split(" ")[1]), headers, body


def post_on(sock, path, body):
    payload = json.dumps(body).encode()
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    return read_response(sock)


def test_sigterm_under_load_drains_then_exits_zero():
    server = LiveServer(extra_args=["--shutdown-timeout", str(SHUTDOWN_TIMEOUT_S), "--max-num-seqs", "24"])
    try:
        model = server.model()
        name, context = model["id"], model["max_model_len"]
        # A keep-alive connection opened before the signal: admission answers on it after.
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        status, _, _ = post_on(idle, "/v1/completions", {"model": name, "prompt": "hi", "max_tokens": 1})
        assert status == 200
        # Long generations that cannot end within the timeout: the whole context, many at once.
        long_body = {"model": name, "prompt": "Once upon a time", "max_tokens": context - 64, "ignore_eos": True}
        longs = [{} for _ in range(NUM_LONG)]
        threads = [threading.Thread(target=stream_completion, args=(server, long_body, out)) for out in longs]
        # Short generations running when the signal arrives finish normally.
        short_body = {"model": name, "prompt": "The weather", "max_tokens": 24, "ignore_eos": True}
        shorts = [{} for _ in range(2)]
        short_threads = [threading.Thread(target=stream_completion, args=(server, short_body, out)) for out in shorts]
        for thread in threads + short_threads:
            thread.start()
        assert wait_for(lambda: all(out.get("chunks", 0) >= 1 for out in longs + shorts), timeout_s=60,
                        interval_s=0.002)

        signalled_at = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        assert not any(out.get("done") for out in shorts), "the short generations ended before the signal"
        # The signal is handled asynchronously: wait until the server says it
        # drains, so the late request cannot race the switch.
        def draining():
            with open(server.log_path, "rb") as log:
                return b"SIGTERM: draining" in log.read()
        assert wait_for(draining, timeout_s=2, interval_s=0.002)
        status, headers, body = post_on(idle, "/v1/completions", {"model": name, "prompt": "late", "max_tokens": 4})
        assert status == 503, body
        assert int(headers["retry-after"]) > 0
        assert json.loads(body)["error"]["code"] == "shutting_down"

        for thread in threads + short_threads:
            thread.join(timeout=SHUTDOWN_TIMEOUT_S + 30)
        for out in shorts:
            assert out["status"] == 200 and out["done"], out
            assert out["finish_reason"] == "length", out
        for out in longs:
            assert out["status"] == 200 and out["done"], out
            assert out["finish_reason"] == "abort", out
        assert server.process.wait(timeout=SHUTDOWN_TIMEOUT_S + 30) == 0
        # Within the timeout plus the server's bounded wind-down, not at some later watchdog.
        assert time.monotonic() - signalled_at < SHUTDOWN_TIMEOUT_S + 10
        with open(server.log_path, "rb") as log:
            assert b"SIGTERM: draining" in log.read()
        idle.close()
    finally:
        if server.process.poll() is None:
            server.stop()
        else:
            server.log.close()
