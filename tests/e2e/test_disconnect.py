"""A client that goes away frees its request's KV blocks (via /metrics)."""

import json
import socket
import time

from conftest import wait_for


def test_killed_stream_frees_kv_blocks(server, model_name, long_output):
    assert wait_for(lambda: server.metric("troupe:kv_cache_usage_perc") == 0, timeout_s=30)
    body = json.dumps({"model": model_name, "prompt": "a long story", "max_tokens": long_output, "ignore_eos": True,
                       "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    received = b""
    while received.count(b"data: ") < 5:
        received += s.recv(65536)
    assert server.metric("troupe:kv_cache_usage_perc") > 0
    assert server.metric("troupe:num_requests_running") == 1
    s.close()  # the client dies mid-stream
    assert wait_for(lambda: server.metric("troupe:kv_cache_usage_perc") == 0, timeout_s=5)
    assert server.metric("troupe:num_requests_running") == 0


def test_closed_client_with_pipelined_byte_frees_kv_blocks(server, model_name, long_output):
    """Issue 15, defect 7: a byte sent after a non-streaming request must not hide the close."""
    assert wait_for(lambda: server.metric("troupe:kv_cache_usage_perc") == 0, timeout_s=30)
    body = json.dumps({"model": model_name, "prompt": "a long story", "max_tokens": long_output,
                       "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    assert wait_for(lambda: server.metric("troupe:num_requests_running") == 1, timeout_s=10)
    s.sendall(b"G")  # the start of a pipelined next request, read while the generation runs
    time.sleep(0.2)
    assert server.metric("troupe:num_requests_running") == 1
    s.close()
    assert wait_for(lambda: server.metric("troupe:num_requests_running") == 0, timeout_s=5)
    assert wait_for(lambda: server.metric("troupe:kv_cache_usage_perc") == 0, timeout_s=5)
