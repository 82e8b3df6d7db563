"""SSE framing on the wire, read with curl (no client library smoothing it over)."""

import json
import shutil
import subprocess

import pytest


def curl_stream(server, path, body):
    if shutil.which("curl") is None:
        pytest.fail("curl is required for the SSE framing suite (tools/setup.sh installs it)")
    result = subprocess.run(["curl", "-sS", "-N", "-D", "-", "-H", "Content-Type: application/json",
                             "-d", json.dumps(body), server.base_url + path],
                            capture_output=True, timeout=120, check=True)
    head, _, events = result.stdout.partition(b"\r\n\r\n")
    return head.decode(), events


def test_chat_stream_framing(server, model_name):
    head, events = curl_stream(server, "/v1/chat/completions",
                               {"model": model_name, "messages": [{"role": "user", "content": "hi"}],
                                "max_tokens": 5, "stream": True, "stream_options": {"include_usage": True},
                                "ignore_eos": True})
    assert head.startswith("HTTP/1.1 200")
    assert "content-type: text/event-stream" in head.lower()
    assert events.endswith(b"data: [DONE]\n\n")
    parts = events.split(b"\n\n")
    assert parts[-1] == b""
    payloads = []
    for part in parts[:-1]:
        assert part.startswith(b"data: ") and b"\n" not in part, part
        payloads.append(part[len(b"data: "):])
    assert payloads[-1] == b"[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len({chunk["id"] for chunk in chunks}) == 1
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finishes == ["length"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5


def test_completion_stream_framing(server, model_name):
    _, events = curl_stream(server, "/v1/completions",
                            {"model": model_name, "prompt": "abc", "max_tokens": 3, "stream": True,
                             "ignore_eos": True})
    payloads = [p[len(b"data: "):] for p in events.split(b"\n\n")[:-1]]
    assert payloads[-1] == b"[DONE]"
    assert all(json.loads(p)["object"] == "text_completion" for p in payloads[:-1])
