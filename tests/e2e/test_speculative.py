"""Speculative decoding through `troupe serve`: with prompt lookup, with
layer skipping and with the demo's draft model (batch-invariant numerics on
both sides), greedy outputs are
those of a server that does not speculate, streamed or not; drafts are made
and accepted and counted in /metrics; a request can opt out; speculation can
be turned down live; bad speculation flags stop the server with a message
naming the knob."""

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import LiveServer, SERVE_FLAGS

PROMPTS = [
    "one two three four one two three four one two three four one two",
    "In the beginning",
    "the cat sat on the mat; the cat sat on the mat; the cat",
    "Quote Genesis 1:3.",
]
MAX_TOKENS = 40


@pytest.fixture(scope="module")
def plain():
    live = LiveServer(["--batch-invariant"])
    yield live
    live.stop()


@pytest.fixture(scope="module", params=["ngram", "layerskip", "draft"])
def speculating(request):
    live = LiveServer(["--batch-invariant", "--speculative", request.param, "--num-speculative-tokens", "4"])
    live.proposer = request.param
    yield live
    live.stop()


def complete(server, prompt, **extra):
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, **extra}
    response = requests.post(server.base_url + "/v1/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["text"]


def complete_streamed(server, prompt):
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True}
    text = ""
    with requests.post(server.base_url + "/v1/completions", json=body, stream=True, timeout=120) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith(b"data: {"):
                text += json.loads(line[len(b"data: "):])["choices"][0]["text"]
    return text


CONSTRAINTS = [
    {"structured_outputs": {"regex": "(one|two|three|four| )+"}},
    {"structured_outputs": {"regex": "[a-z ;]+"}},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {
        "type": "object", "properties": {"words": {"type": "array", "items": {"enum": ["one", "two", "cat", "mat"]}}},
        "required": ["words"]}}}},
]


def test_constrained_outputs_equal_a_server_that_does_not_speculate(plain, speculating):
    """Verify rows carry the constraint's mask after their drafts: greedy
    constrained output is the non-speculating server's, and stays valid."""
    before = speculating.metric("troupe:spec_decode_num_accepted_tokens_total")
    for fields in CONSTRAINTS:
        for prompt in PROMPTS[::2]:
            expected = complete(plain, prompt, **fields)
            assert complete(speculating, prompt, **fields) == expected, (fields, prompt)
            if "response_format" in fields:
                json.loads(expected)
    assert speculating.metric("troupe:spec_decode_num_accepted_tokens_total") > before


def test_greedy_outputs_equal_a_server_that_does_not_speculate(plain, speculating):
    want = [complete(plain, p) for p in PROMPTS]
    drafts_before = speculating.metric("troupe:spec_decode_num_draft_tokens_total")
    with ThreadPoolExecutor(len(PROMPTS)) as pool:  # concurrently: verify groups share steps
        got = list(pool.map(lambda p: complete(speculating, p), PROMPTS))
    assert got == want
    assert [complete_streamed(speculating, p) for p in PROMPTS] == want
    assert speculating.metric("troupe:spec_decode_num_draft_tokens_total") > drafts_before
    assert speculating.metric("troupe:spec_decode_num_accepted_tokens_total") > 0
    assert plain.metric("troupe:spec_decode_num_draft_tokens_total") == 0


def test_a_request_can_opt_out(speculating):
    before = speculating.metric("troupe:spec_decode_num_draft_tokens_total")
    complete(speculating, PROMPTS[0], speculative=False)
    assert speculating.metric("troupe:spec_decode_num_draft_tokens_total") == before


def test_drafts_made_ahead_keep_the_outputs_and_turn_off_live(plain):
    """A drafter on a core of its own (`--threads 1 --draft-threads 1`)
    drafts the next round while the target verifies (auto): greedy outputs
    stay the plain server's, rounds are drafted ahead and counted, and
    speculative_draft_ahead turns it off and on live."""
    ahead = LiveServer(["--batch-invariant", "--speculative", "draft", "--num-speculative-tokens", "4",
                        "--threads", "1", "--draft-threads", "1"])
    url = ahead.base_url + "/admin/config"
    try:
        assert requests.get(url, timeout=10).json()["settings"]["speculative_draft_ahead"] == "auto"
        want = [complete(plain, p) for p in PROMPTS]
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            got = list(pool.map(lambda p: complete(ahead, p), PROMPTS))
        assert got == want
        assert [complete(ahead, p) for p in PROMPTS] == want
        drafted = ahead.metric("troupe:spec_decode_num_ahead_drafts_total")
        assert drafted > 0
        assert 0 <= ahead.metric("troupe:spec_decode_num_ahead_used_total") <= drafted
        assert plain.metric("troupe:spec_decode_num_ahead_drafts_total") == 0

        requests.patch(url, json={"speculative_draft_ahead": "off"}, timeout=10).raise_for_status()
        assert [complete(ahead, p) for p in PROMPTS] == want
        assert ahead.metric("troupe:spec_decode_num_ahead_drafts_total") == drafted
        assert ahead.metric("troupe:spec_decode_num_draft_tokens_total") > 0
        refused = requests.patch(url, json={"speculative_draft_ahead": "always"}, timeout=10)
        assert refused.status_code == 400 and "speculative_draft_ahead" in refused.text, refused.text
        requests.patch(url, json={"speculative_draft_ahead": "on"}, timeout=10).raise_for_status()
        assert [complete(ahead, p) for p in PROMPTS] == want
        assert ahead.metric("troupe:spec_decode_num_ahead_drafts_total") > drafted
    finally:
        ahead.stop()


def test_speculation_is_turned_down_live(speculating):
    url = speculating.base_url + "/admin/config"
    original = requests.get(url, timeout=10).json()["settings"]["num_speculative_tokens"]
    try:
        requests.patch(url, json={"num_speculative_tokens": 0}, timeout=10).raise_for_status()
        before = speculating.metric("troupe:spec_decode_num_draft_tokens_total")
        complete(speculating, PROMPTS[0])
        assert speculating.metric("troupe:spec_decode_num_draft_tokens_total") == before
    finally:
        requests.patch(url, json={"num_speculative_tokens": original}, timeout=10).raise_for_status()


def test_drafting_ahead_forced_on_live_keeps_the_outputs(plain, speculating):
    """speculative_draft_ahead is live: forced on, prompt lookup (no
    drafter, nothing to draft ahead) and the draft model keep the plain
    server's greedy outputs. The layer-skipping drafter works in the
    target's KV, where drafting ahead would write blocks the step being
    verified uses: forcing it on live is refused, naming the knob."""
    url = speculating.base_url + "/admin/config"
    forced = requests.patch(url, json={"speculative_draft_ahead": "on"}, timeout=10)
    if speculating.proposer == "layerskip":
        assert forced.status_code == 409 and "speculative_draft_ahead" in forced.text, forced.text
        assert requests.get(url, timeout=10).json()["settings"]["speculative_draft_ahead"] == "auto"
        return
    forced.raise_for_status()
    try:
        before = speculating.metric("troupe:spec_decode_num_ahead_drafts_total")
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            got = list(pool.map(lambda p: complete(speculating, p), PROMPTS))
        assert got == [complete(plain, p) for p in PROMPTS]
        assert speculating.metric("troupe:spec_decode_num_ahead_drafts_total") >= before
        assert requests.get(speculating.base_url + "/health", timeout=10).status_code == 200
        with open(speculating.log_path, encoding="utf-8", errors="replace") as log:
            assert "no drafts drafted ahead" not in log.read(), "an ahead round was asked of no drafter, or failed"
    finally:
        requests.patch(url, json={"speculative_draft_ahead": "auto"}, timeout=10).raise_for_status()


def test_tree_speculation_set_live_keeps_the_outputs(plain, speculating):
    """speculative_tree_width is live: with draft trees of three branches
    (tree attention), greedy and constrained outputs stay the plain server's."""
    url = speculating.base_url + "/admin/config"
    requests.patch(url, json={"speculative_tree_width": 3}, timeout=10).raise_for_status()
    try:
        assert requests.get(url, timeout=10).json()["settings"]["speculative_tree_width"] == 3
        want = [complete(plain, p) for p in PROMPTS]
        drafts_before = speculating.metric("troupe:spec_decode_num_draft_tokens_total")
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            got = list(pool.map(lambda p: complete(speculating, p), PROMPTS))
        assert got == want
        assert speculating.metric("troupe:spec_decode_num_draft_tokens_total") > drafts_before
        fields = CONSTRAINTS[0]
        assert complete(speculating, PROMPTS[0], **fields) == complete(plain, PROMPTS[0], **fields)
    finally:
        requests.patch(url, json={"speculative_tree_width": 1}, timeout=10).raise_for_status()


@pytest.mark.parametrize("flags, knob", [
    (["--speculative", "medusa", "--num-speculative-tokens", "4"], "speculative"),
    (["--speculative", "ngram", "--num-speculative-tokens", "0"], "num_speculative_tokens"),
    (["--speculative", "draft", "--num-speculative-tokens", "4", "--draft-model", "/nonexistent"], "/nonexistent"),
    (["--speculative", "draft", "--num-speculative-tokens", "4", "--draft-quantization", "int3"], "draft_quantization"),
    (["--speculative", "layerskip", "--num-speculative-tokens", "2", "--speculative-skip-layers", "99"],
     "speculative_skip_layers"),
    (["--speculative", "ngram", "--num-speculative-tokens", "4", "--draft-vocab-size", "100"], "draft_vocab_size"),
    (["--speculative", "draft", "--num-speculative-tokens", "4", "--draft-vocab-size", "16000000"],
     "draft_vocab_size"),
    (["--speculative", "ngram", "--num-speculative-tokens", "4", "--speculative-draft-ahead", "on"],
     "speculative_draft_ahead"),
    (["--speculative", "draft", "--num-speculative-tokens", "4", "--speculative-draft-ahead", "yes"],
     "speculative_draft_ahead"),
    (["--speculative", "ngram", "--num-speculative-tokens", "4", "--draft-threads", "1"], "draft_threads"),
])
def test_bad_speculation_flags_stop_the_server_naming_the_knob(flags, knob):
    binary = os.environ.get("TROUPE_BIN")
    if not binary:
        pytest.skip("TROUPE_BIN is not set")
    done = subprocess.run([binary, "serve", "--port", "0", *SERVE_FLAGS, *flags], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert knob in done.stderr + done.stdout
