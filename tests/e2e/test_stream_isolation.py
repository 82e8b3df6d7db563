"""Advisory class "one user's output reaching another's stream": many seeded
generations at once, each over its own SSE connection or multiplexed over
shared WebSockets, each receive exactly the text they get when run alone.

The server runs with --batch-invariant, so a seeded request's tokens do not
depend on what shares its steps; any difference is output that went to the
wrong stream (or was lost or duplicated on the way).
"""

import json
import threading

import pytest
import requests
from websockets.sync.client import connect

from conftest import LiveServer

TOKENS = 24
SSE_STREAMS = range(0, 4)
WEBSOCKETS = [range(4, 7), range(7, 10)]  # three generations on each of two sockets
COUNT = 10


@pytest.fixture(scope="module")
def invariant_server():
    live = LiveServer(["--batch-invariant"])
    yield live
    live.stop()


def body(model, i):
    return {"model": model, "prompt": f"Request {i} of tenant {i * 7919}: once upon a time", "max_tokens": TOKENS,
            "temperature": 1.0, "seed": 1000 + i, "ignore_eos": True}


def solo(server, model, i):
    response = requests.post(server.base_url + "/v1/completions", json=body(model, i), timeout=120)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["text"]


def over_sse(server, model, i, out):
    text = ""
    with requests.post(server.base_url + "/v1/completions", json={**body(model, i), "stream": True}, stream=True,
                       timeout=120) as response:
        assert response.status_code == 200, response.text
        for line in response.iter_lines():
            if line.startswith(b"data: {"):
                event = json.loads(line[6:])
                assert "error" not in event, event
                text += "".join(choice.get("text", "") for choice in event["choices"])
    out[i] = text


def over_websocket(server, model, indices, out):
    url = server.base_url.replace("http://", "ws://") + "/v1/ws"
    texts = {i: "" for i in indices}
    with connect(url, open_timeout=30) as ws:
        for i in indices:
            ws.send(json.dumps({"type": "generate", "id": i, "endpoint": "completions", **body(model, i)}))
        done = set()
        while len(done) < len(indices):
            frame = json.loads(ws.recv(timeout=120))
            assert frame["type"] in ("delta", "done"), frame
            assert frame["id"] in texts, f"a frame for a request this socket never sent: {frame}"
            if frame["type"] == "delta":
                texts[frame["id"]] += "".join(choice.get("text", "") for choice in frame["chunk"]["choices"])
            else:
                done.add(frame["id"])
    out.update(texts)


def test_concurrent_streams_each_receive_only_their_own_tokens(invariant_server):
    server = invariant_server
    model = server.model()["id"]
    expected = {i: solo(server, model, i) for i in range(COUNT)}
    assert len(set(expected.values())) == COUNT, "two requests' solo outputs coincide: a mix-up would not show"
    for _ in range(2):
        out = {}
        threads = [threading.Thread(target=over_sse, args=(server, model, i, out)) for i in SSE_STREAMS]
        threads += [threading.Thread(target=over_websocket, args=(server, model, indices, out))
                    for indices in WEBSOCKETS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=180)
        assert sorted(out) == list(range(COUNT)), "a stream did not finish"
        for i in range(COUNT):
            assert out[i] == expected[i], f"request {i} received other output than when run alone"
