"""The soak's clients: each plan kind (soak_workload.KIND_WEIGHTS) as a
coroutine returning one outcome per request it made, and the task that
changes knobs meanwhile.

Outcomes: `finished` (every choice got its finish reason), `cancelled`
(the client cancelled or closed after the server had accepted the request:
its header or a delta had arrived), `abandoned` (closed before the client
could know whether it was accepted), `refused` (4xx JSON error, or an error
frame that is not a server error), `failed` (anything else: a violation)."""

import asyncio
import json
from dataclasses import dataclass, field

import httpx
import websockets

SERVER_ERROR_TYPES = ("server_error", "internal_error", "internal_server_error")


@dataclass
class outcome:
    index: int
    kind: str
    result: str = "failed"
    detail: str = ""
    texts: dict = field(default_factory=dict)    # choice -> text
    reasons: dict = field(default_factory=dict)  # choice -> finish_reason
    seeded: int = -1


def apply_chunk(chunk, out):
    """Adds a completions or chat chunk's text and finish reasons to `out`."""
    for choice in chunk.get("choices", []):
        index = choice["index"]
        piece = choice["text"] if "text" in choice else (choice.get("delta") or {}).get("content")
        out.texts[index] = out.texts.get(index, "") + (piece or "")
        if choice.get("finish_reason"):
            out.reasons[index] = choice["finish_reason"]


def refusal(out, status, raw):
    """A non-200 answer: refused when it is a 4xx with an OpenAI error object, else failed."""
    try:
        error = json.loads(raw)["error"]
        message = error["message"]
    except (ValueError, KeyError, TypeError):
        out.detail = f"HTTP {status} without a JSON error: {raw[:200]!r}"
        return out
    out.detail = f"HTTP {status} {error.get('code') or error.get('type')}: {message[:120]}"
    out.result = "refused" if 400 <= status < 500 else "failed"
    return out


def error_frame_result(error):
    return "failed" if error.get("type") in SERVER_ERROR_TYPES else "refused"


class soak_clients:
    def __init__(self, base_url, model, timeout_s):
        limits = httpx.Limits(max_connections=4096, max_keepalive_connections=64)
        self.http = httpx.AsyncClient(base_url=base_url, timeout=timeout_s, limits=limits)
        self.ws_url = base_url.replace("http://", "ws://", 1) + "/v1/ws"
        self.model = model
        self.timeout_s = timeout_s

    async def close(self):
        await self.http.aclose()

    async def run(self, p):
        """The plan's outcomes; an exception fails every request of it."""
        runners = {"sse": self.run_sse, "sse_cancel": self.run_sse, "sse_abandon": self.run_sse_abandon,
                   "ws": self.run_ws, "ws_cancel": self.run_ws, "ws_disconnect": self.run_ws,
                   "invalid_http": self.run_invalid_http, "invalid_ws": self.run_invalid_ws}
        try:
            return await asyncio.wait_for(runners[p.kind](p), timeout=self.timeout_s)
        except Exception as error:  # every failure is reported as an outcome, never raised
            detail = f"{type(error).__name__}: {error}"
            return [outcome(g.index, p.kind, "failed", detail, seeded=g.seeded) for g in p.generations] or \
                [outcome(-1, p.kind, "failed", detail)]

    # ---- SSE -----------------------------------------------------------------

    async def sse(self, p, gen, cancel_after=None):
        path = "/v1/chat/completions" if gen.endpoint == "chat" else "/v1/completions"
        body = {**gen.body, "model": self.model, "stream": True}
        out = outcome(gen.index, p.kind, seeded=gen.seeded)
        chunks = 0
        async with self.http.stream("POST", path, json=body) as response:
            if response.status_code != 200:
                return refusal(out, response.status_code, await response.aread())
            async for line in response.aiter_lines():
                if p.slow_s:
                    await asyncio.sleep(p.slow_s)
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    break
                event = json.loads(line[6:])
                if "error" in event:
                    out.detail = "error event: " + str(event["error"].get("message"))[:160]
                    return out
                apply_chunk(event, out)
                chunks += 1
                if cancel_after is not None and chunks >= cancel_after and len(out.reasons) < gen.body.get("n", 1):
                    out.result = "cancelled"  # leaving the block closes the connection mid-stream
                    return out
        if len(out.reasons) == gen.body.get("n", 1):
            out.result = "finished"
        else:
            out.detail = f"stream ended with finish reasons {out.reasons}"
        return out

    async def run_sse(self, p):
        cancel_after = p.cancel_after if p.kind == "sse_cancel" else None
        return [await self.sse(p, p.generations[0], cancel_after)]

    async def run_sse_abandon(self, p):
        gen = p.generations[0]
        try:
            return [await asyncio.wait_for(self.sse(p, gen, cancel_after=1), timeout=p.abandon_s)]
        except asyncio.TimeoutError:
            return [outcome(gen.index, p.kind, "abandoned", seeded=gen.seeded)]

    # ---- WebSocket -----------------------------------------------------------

    async def run_ws(self, p):
        gens = {f"g{g.index}": g for g in p.generations}
        outs = {key: outcome(g.index, p.kind, seeded=g.seeded) for key, g in gens.items()}
        deltas = dict.fromkeys(gens, 0)
        done, cancelled = set(), set()
        async with websockets.connect(self.ws_url, max_size=None, open_timeout=60, close_timeout=5) as ws:
            for key, g in gens.items():
                await ws.send(json.dumps({"type": "generate", "id": key, "endpoint": g.endpoint, "model": self.model,
                                          **g.body}))
            while len(done) < len(gens):
                if p.slow_s:
                    await asyncio.sleep(p.slow_s)
                frame = json.loads(await ws.recv())
                key = frame.get("id")
                if key not in outs:
                    raise RuntimeError(f"a frame for an id this socket never used: {frame}")
                if key in done:
                    continue  # the answer to a cancel that crossed the generation's end
                out = outs[key]
                if frame["type"] == "delta":
                    apply_chunk(frame["chunk"], out)
                    deltas[key] += 1
                    if p.kind == "ws_cancel" and key not in cancelled and deltas[key] >= p.cancel_after:
                        cancelled.add(key)
                        await ws.send(json.dumps({"type": "cancel", "id": key}))
                    if p.kind == "ws_disconnect" and sum(deltas.values()) >= p.cancel_after and \
                            all(deltas[k] > 0 or k in done for k in gens):
                        for k in gens.keys() - done:
                            outs[k].result = "cancelled"
                        return list(outs.values())  # leaving the block closes the socket mid-stream
                elif frame["type"] == "done":
                    done.add(key)
                    reasons = frame["finish_reasons"]
                    out.reasons = dict(enumerate(reasons))
                    if "abort" in reasons:
                        out.result = "cancelled" if key in cancelled else "failed"
                        out.detail = "" if key in cancelled else f"aborted without a cancel: {reasons}"
                    else:
                        out.result = "finished"
                elif frame["type"] == "error":
                    done.add(key)
                    out.result = error_frame_result(frame["error"])
                    out.detail = f"error frame {frame['error'].get('code')}: {frame['error'].get('message')}"[:200]
        return list(outs.values())

    # ---- invalid requests ----------------------------------------------------

    async def run_invalid_http(self, p):
        path, body = p.invalid
        out = outcome(-1, p.kind)
        content = body if isinstance(body, bytes) else json.dumps({**body, "model": self.model}).encode()
        response = await self.http.post(path, content=content, headers={"Content-Type": "application/json"})
        refusal(out, response.status_code, response.content)
        if response.status_code == 200:
            out.result, out.detail = "failed", f"{path} accepted an invalid request: {body!r}"[:200]
        return [out]

    async def run_invalid_ws(self, p):
        out = outcome(-1, p.kind)
        async with websockets.connect(self.ws_url, max_size=None, open_timeout=60, close_timeout=5) as ws:
            await ws.send(p.invalid)
            frame = json.loads(await ws.recv())
        if frame.get("type") == "error" and frame.get("error", {}).get("message"):
            out.result = error_frame_result(frame["error"])
            out.detail = f"error frame {frame['error'].get('code')}"
        else:
            out.detail = f"no error frame for {p.invalid!r}: {frame}"[:200]
        return [out]


# Live knobs and the part of their range the changes draw from: wide enough
# to preempt, reorder and starve, narrow enough to keep the soak moving.
KNOB_RANGES = {
    "max_num_batched_tokens": (64, 512), "max_num_seqs": (4, 64), "max_prefill_chunk": (32, 512),
    "swap_min_tokens": (0, 256), "preemption_grace_steps": (0, 16), "admission_watermark": (0.0, 0.2),
    "mlfq_quantum": (1, 32), "fair_output_weight": (0.0, 4.0),
}
KNOB_CHOICES = {"policy": ["fcfs", "priority", "mlfq", "deadline", "fair"],
                "preemption_mode": ["auto", "swap", "recompute"]}
INVALID_CHANGES = [{"max_num_seqs": 0}, {"policy": "chaos"}, {"no_such_knob": 1}, {"max_num_batched_tokens": "many"}]


def random_change(rng):
    change = {}
    for name in rng.sample(sorted(KNOB_RANGES) + sorted(KNOB_CHOICES), rng.randint(1, 3)):
        if name in KNOB_CHOICES:
            change[name] = rng.choice(KNOB_CHOICES[name])
        else:
            low, high = KNOB_RANGES[name]
            change[name] = rng.uniform(low, high) if isinstance(low, float) else rng.randint(low, high)
    return change


async def change_knobs(clients, rng, stop, interval_s, counts):
    """PATCHes /admin/config every `interval_s` until `stop`; 5% of the changes are invalid and must get 4xx JSON."""
    while not stop.is_set():
        invalid = rng.random() < 0.05
        change = rng.choice(INVALID_CHANGES) if invalid else random_change(rng)
        response = await clients.http.patch("/admin/config", json=change)
        if invalid:
            refused = 400 <= response.status_code < 500 and "error" in response.json()
            counts["invalid_refused" if refused else "invalid_accepted"] += 1
        else:
            counts["applied" if response.status_code == 200 else "refused"] += 1
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
        except asyncio.TimeoutError:
            pass
