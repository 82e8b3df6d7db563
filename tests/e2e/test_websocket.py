"""The multiplexed WebSocket protocol with the `websockets` client: three
requests on one socket, one cancelled mid-stream, the other two complete."""

import json

from websockets.sync.client import connect


def ws_url(server):
    return server.base_url.replace("http://", "ws://") + "/v1/ws"


def test_three_multiplexed_one_cancelled(server, model_name, long_output):
    with connect(ws_url(server), open_timeout=30) as ws:
        ws.send(json.dumps({"type": "generate", "id": "a", "endpoint": "completions", "model": model_name,
                            "prompt": "one", "max_tokens": 8, "ignore_eos": True}))
        ws.send(json.dumps({"type": "generate", "id": "long", "endpoint": "chat", "model": model_name,
                            "messages": [{"role": "user", "content": "two"}], "max_tokens": long_output,
                            "ignore_eos": True}))
        ws.send(json.dumps({"type": "generate", "id": 3, "endpoint": "chat", "model": model_name,
                            "messages": [{"role": "user", "content": "three"}], "max_tokens": 6,
                            "ignore_eos": True}))
        done, deltas, cancelled = {}, {}, False
        while len(done) < 3:
            frame = json.loads(ws.recv(timeout=120))
            assert frame["type"] in ("delta", "done"), frame
            key = json.dumps(frame["id"])
            if frame["type"] == "delta":
                deltas[key] = deltas.get(key, 0) + 1
                if key == '"long"' and deltas[key] >= 3 and not cancelled:
                    ws.send(json.dumps({"type": "cancel", "id": "long"}))
                    cancelled = True
            else:
                done[key] = frame
        assert done['"a"']["finish_reason"] == "length" and done['"a"']["usage"]["completion_tokens"] == 8
        assert done["3"]["finish_reason"] == "length" and done["3"]["usage"]["completion_tokens"] == 6
        assert done['"long"']["finish_reason"] == "abort"
        assert done['"long"']["usage"]["completion_tokens"] < long_output


def test_ping_and_per_request_errors(server, model_name):
    with connect(ws_url(server), open_timeout=30) as ws:
        ws.send(json.dumps({"type": "ping", "data": 42}))
        assert json.loads(ws.recv(timeout=30)) == {"type": "pong", "data": 42}
        ws.send(json.dumps({"type": "generate", "id": "bad", "endpoint": "completions", "prompt": "x", "n": 100000}))
        error = json.loads(ws.recv(timeout=30))
        assert error["type"] == "error" and error["id"] == "bad" and error["error"]["param"] == "n"
        ws.send(json.dumps({"type": "cancel", "id": "ghost"}))
        assert json.loads(ws.recv(timeout=30))["error"]["code"] == "unknown_id"
