"""The official openai client against a live server: completions and chat,
streaming and not, n, logprobs, stop strings, seeds, include_usage.

These tests assert structure and self-consistency (greedy determinism,
stop truncation of the model's own output), never particular text;
test_demo_model.py checks what the trained demo model says.
"""

import pytest
import requests

PROMPT = "The quick brown fox"
MESSAGES = [{"role": "user", "content": "Tell me a story."}]


def test_models_lists_the_served_model(client, model_name):
    models = client.models.list()
    assert [m.id for m in models.data] == [model_name]


def test_completion_non_streaming(client, model_name):
    completion = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=8, temperature=0,
                                           extra_body={"ignore_eos": True})
    assert completion.id.startswith("cmpl-")
    assert completion.object == "text_completion"
    assert completion.model == model_name
    assert len(completion.choices) == 1
    choice = completion.choices[0]
    assert choice.index == 0 and choice.finish_reason == "length"
    assert completion.usage.completion_tokens == 8
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + 8
    assert completion.usage.prompt_tokens_details.cached_tokens >= 0


def test_completion_streaming_matches_non_streaming_greedy(client, model_name):
    args = dict(model=model_name, prompt=PROMPT, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    whole = client.completions.create(**args).choices[0].text
    streamed, finish = "", None
    for chunk in client.completions.create(stream=True, **args):
        assert chunk.object == "text_completion"
        for choice in chunk.choices:
            streamed += choice.text
            finish = choice.finish_reason or finish
    assert streamed == whole
    assert finish == "length"


def test_chat_non_streaming_and_streaming(client, model_name):
    args = dict(model=model_name, messages=MESSAGES, max_tokens=10, temperature=0)
    whole = client.chat.completions.create(**args)
    assert whole.object == "chat.completion" and whole.id.startswith("chatcmpl-")
    message = whole.choices[0].message
    assert message.role == "assistant"
    roles, content = [], ""
    for chunk in client.chat.completions.create(stream=True, **args):
        assert chunk.object == "chat.completion.chunk"
        for choice in chunk.choices:
            if choice.delta.role:
                roles.append(choice.delta.role)
            content += choice.delta.content or ""
    assert roles == ["assistant"]
    assert content == message.content


def test_n_three_choices(client, model_name):
    completion = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=5, n=3, seed=7,
                                           extra_body={"ignore_eos": True})
    assert sorted(c.index for c in completion.choices) == [0, 1, 2]
    assert completion.usage.completion_tokens == 15
    indexes = set()
    for chunk in client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=5, n=3, stream=True):
        indexes.update(c.index for c in chunk.choices)
    assert indexes == {0, 1, 2}


def test_several_prompts_number_choices_like_openai(client, model_name):
    completion = client.completions.create(model=model_name, prompt=["a", "b"], n=2, max_tokens=2,
                                           extra_body={"ignore_eos": True})
    assert [c.index for c in completion.choices] == [0, 1, 2, 3]


def test_completion_logprobs_shape(client, model_name):
    completion = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=6, logprobs=2, temperature=0,
                                           extra_body={"ignore_eos": True})
    logprobs = completion.choices[0].logprobs
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.top_logprobs) == 6
    assert len(logprobs.text_offset) == 6
    assert logprobs.text_offset == sorted(logprobs.text_offset)
    for token, logprob, top in zip(logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs):
        assert logprob <= 0
        assert token in top and 2 <= len(top) <= 3
        assert max(top.values()) == pytest.approx(logprob)  # greedy picks the most likely token


def test_chat_logprobs_shape(client, model_name):
    completion = client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=5, logprobs=True,
                                                top_logprobs=3, temperature=0, extra_body={"ignore_eos": True})
    content = completion.choices[0].logprobs.content
    assert len(content) == 5
    for entry in content:
        assert entry.logprob <= 0 and isinstance(entry.bytes, list)
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)


def test_stop_string_truncates_the_models_own_output(client, model_name):
    args = dict(model=model_name, prompt=PROMPT, max_tokens=24, temperature=0, extra_body={"ignore_eos": True})
    text = client.completions.create(**args).choices[0].text
    candidates = [text[i:i + 2] for i in range(2, len(text) - 2) if text[i:i + 2].strip()]
    if not candidates:
        pytest.fail(f"greedy output has no usable stop string: {text!r}")
    stop = candidates[len(candidates) // 2]
    stopped = client.completions.create(stop=[stop], **args).choices[0]
    assert stopped.finish_reason == "stop"
    assert stopped.text == text[:text.index(stop)]


def test_seed_reproducibility(client, model_name):
    args = dict(model=model_name, prompt=PROMPT, max_tokens=16, temperature=1.0, extra_body={"ignore_eos": True})
    first = client.completions.create(seed=1234, **args).choices[0].text
    second = client.completions.create(seed=1234, **args).choices[0].text
    assert first == second
    others = {client.completions.create(seed=seed, **args).choices[0].text for seed in (1, 2, 3)}
    assert len(others | {first}) > 1


def test_include_usage_chunk(client, model_name):
    chunks = list(client.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=4, stream=True,
                                                 stream_options={"include_usage": True},
                                                 extra_body={"ignore_eos": True}))
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 4
    assert all(chunk.usage is None for chunk in chunks[:-1])


def test_tokenize_round_trip(server, model_name):
    tokens = requests.post(server.base_url + "/tokenize", json={"model": model_name, "prompt": "hello world",
                                                               "add_special_tokens": False}, timeout=10).json()
    assert tokens["count"] == len(tokens["tokens"]) > 0
    text = requests.post(server.base_url + "/detokenize", json={"model": model_name, "tokens": tokens["tokens"]},
                         timeout=10).json()
    assert text["prompt"] == "hello world"


def test_operator_endpoints(server):
    assert requests.get(server.base_url + "/health", timeout=10).status_code == 200
    assert requests.get(server.base_url + "/ready", timeout=10).status_code == 200
    assert "version" in requests.get(server.base_url + "/version", timeout=10).json()
    names = {name for name, _ in server.metrics()}
    for required in ["troupe:num_requests_running", "troupe:num_requests_waiting", "troupe:num_requests_swapped",
                     "troupe:kv_cache_usage_perc", "troupe:prefix_cache_queries_total",
                     "troupe:prefix_cache_hits_total", "troupe:prompt_tokens_total",
                     "troupe:generation_tokens_total", "troupe:num_preemptions_total",
                     "troupe:request_success_total", "troupe:time_to_first_token_seconds_bucket",
                     "troupe:inter_token_latency_seconds_bucket", "troupe:e2e_request_latency_seconds_bucket",
                     "troupe:request_queue_time_seconds_bucket", "troupe:iteration_tokens_total_bucket",
                     "troupe:model_execute_time_seconds_bucket"]:
        assert required in names, required
    before = server.metric("troupe:model_execute_time_seconds_count")
    requests.post(server.base_url + "/v1/completions", json={"prompt": "time the steps", "max_tokens": 3},
                  timeout=30).raise_for_status()
    assert server.metric("troupe:model_execute_time_seconds_count") >= before + 3  # a prefill and two decodes
    assert server.metric("troupe:model_execute_time_seconds_sum") > 0
