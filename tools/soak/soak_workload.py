"""What the soak sends: a mix of client actions drawn from a seed, so that a
run can be repeated. Each action is a `plan`; the generations it carries
are the engine requests it makes."""

import json
import random
from dataclasses import dataclass, field

WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact be have do say get make go know take see come think look "
         "want give use find tell ask seem feel try leave call good new first last long great little own other old "
         "right big high different small large next early young important few public bad same able").split()

# What each plan kind does, and how often it is drawn.
KIND_WEIGHTS = {
    "sse": 26,            # stream to the end over SSE
    "sse_cancel": 12,     # close the connection after a few chunks
    "sse_abandon": 4,     # close the connection before the answer may have started
    "ws": 18,             # one socket, 1-3 generations read to their `done`
    "ws_cancel": 8,       # a cancel frame per generation after a few deltas
    "ws_disconnect": 6,   # close the socket with its generations in flight
    "invalid_http": 8,    # a request the API must refuse with 4xx JSON
    "invalid_ws": 3,      # a frame the socket must answer with an error frame
    "seeded": 15,         # a seeded request read to the end; must equal its solo run
}

# Requests the HTTP API must refuse (any 4xx with an OpenAI error object).
INVALID_HTTP = [
    ("/v1/completions", {"prompt": "x", "max_tokens": -1}),
    ("/v1/completions", {"prompt": "x", "n": 0}),
    ("/v1/completions", {"prompt": "x", "temperature": "hot"}),
    ("/v1/completions", b"{not json"),
    ("/v1/completions", {"prompt": ""}),
    ("/v1/completions", {"prompt": [99999999]}),
    ("/v1/chat/completions", {"messages": "nope"}),
    ("/v1/completions", {"prompt": "x", "logit_bias": {"-5": 1}}),
    ("/v1/completions", {"prompt": "x", "n": 100000}),
    ("/v1/completions", {"prompt": "x", "max_tokens": 10 ** 9}),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}),
]

# WebSocket frames the server must answer with an error frame (the socket stays open).
INVALID_WS = [
    json.dumps({"type": "generate", "id": "bad", "endpoint": "completions", "prompt": "x", "n": 0}),
    json.dumps({"type": "generate", "id": "bad", "endpoint": "nowhere", "prompt": "x"}),
    json.dumps({"type": "bogus", "id": "bad"}),
    "{not json",
    json.dumps({"type": "cancel", "id": "never-started"}),
]


@dataclass
class generation:
    """One engine request: its endpoint ("completions" or "chat") and body."""
    index: int
    endpoint: str
    body: dict
    seeded: int = -1  # which seeded body it repeats (its output must equal that body's solo run); -1: none


@dataclass
class plan:
    """One client action (see KIND_WEIGHTS)."""
    kind: str
    generations: list = field(default_factory=list)
    slow_s: float = 0.0     # pause before each read: a slow reader
    cancel_after: int = 0   # chunks or deltas read before cancelling or closing
    abandon_s: float = 0.0  # sse_abandon: closes this long after sending
    invalid: object = None  # invalid kinds: (path, body) or the frame text

    def requests(self):
        """Requests this plan counts for: its generations, or the one invalid request."""
        return max(1, len(self.generations))


def prompt_text(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def request_body(endpoint, text, max_tokens):
    body = {"max_tokens": max_tokens}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    return body


def random_body(rng):
    """A valid request of random shape: short or long prompt and output, greedy or sampled, n of 1 or 2."""
    endpoint = rng.choice(["completions", "completions", "chat"])
    body = request_body(endpoint, prompt_text(rng, rng.randint(3, 200)), rng.randint(4, 96))
    body["temperature"] = rng.choice([0.0, 0.7, 1.0])
    if rng.random() < 0.5:
        body["ignore_eos"] = True
    if rng.random() < 0.1:
        body["n"] = 2
    if rng.random() < 0.3:
        body["user"] = f"tenant-{rng.randint(0, 5)}"
        body["priority"] = rng.randint(0, 3)
    return endpoint, body


def seeded_bodies(rng, count):
    """Requests whose output is fixed by their seed; each is sent many times during the soak."""
    bodies = []
    for i in range(count):
        endpoint = "chat" if i % 3 == 2 else "completions"
        body = request_body(endpoint, f"seeded {i}: " + prompt_text(rng, rng.randint(3, 120)), rng.randint(8, 64))
        body.update({"temperature": 1.0 if i % 2 else 0.0, "seed": 1000 + i, "ignore_eos": i % 4 != 0,
                     "n": 2 if i % 5 == 4 else 1})
        bodies.append((endpoint, body))
    return bodies


def make_plans(rng, num_requests, seeded):
    """Plans drawn from `rng` until they make `num_requests` requests; `seeded` from seeded_bodies()."""
    kinds, weights = zip(*KIND_WEIGHTS.items())
    plans, made = [], 0
    while made < num_requests:
        kind = rng.choices(kinds, weights)[0]
        p = plan(kind=kind)
        if kind == "invalid_http":
            p.invalid = rng.choice(INVALID_HTTP)
        elif kind == "invalid_ws":
            p.invalid = rng.choice(INVALID_WS)
        elif kind == "seeded":
            p.kind = rng.choice(["sse", "ws"])
            key = rng.randrange(len(seeded))
            endpoint, body = seeded[key]
            p.generations = [generation(made, endpoint, dict(body), key)]
        else:
            count = rng.randint(1, 3) if kind.startswith("ws") else 1
            p.generations = [generation(made + i, *random_body(rng)) for i in range(count)]
            p.cancel_after = rng.randint(1, 8)
            p.abandon_s = rng.uniform(0.0, 0.05)
        if p.kind in ("sse", "ws") and rng.random() < 0.15:
            p.slow_s = rng.uniform(0.005, 0.03)
        plans.append(p)
        made += p.requests()
    return plans
