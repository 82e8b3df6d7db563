"""Structured output with the official openai client against a live server:
response_format json_object / json_schema, vLLM's structured_outputs regex /
choice / grammar (and the older guided_* names), streamed and not, seeded.
Answers are checked by independent validators (jsonschema, Python's re),
never against particular text. Hostile constraints get a quick 400 and the
server keeps serving.
"""

import json
import re
import time

import pytest
import requests

jsonschema = pytest.importorskip("jsonschema")

MESSAGES = [{"role": "user", "content": "Describe a person as JSON."}]
PROMPT = "Here is a person:"

PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "member": {"type": "boolean"},
        "color": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
    },
    "required": ["name", "age", "member", "color"],
    "additionalProperties": False,
}

DATE_REGEX = r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
CHOICES = ["positive", "negative", "neutral"]


def chat_text(client, model_name, stream, **kwargs):
    """The answer's text and finish_reason, streamed or not."""
    if not stream:
        completion = client.chat.completions.create(model=model_name, messages=MESSAGES, **kwargs)
        return completion.choices[0].message.content, completion.choices[0].finish_reason
    text, finish = "", None
    for chunk in client.chat.completions.create(model=model_name, messages=MESSAGES, stream=True, **kwargs):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    return text, finish


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_json_schema_answers_validate(client, model_name, stream, seed):
    text, finish = chat_text(
        client, model_name, stream, max_tokens=200, seed=seed, temperature=1.0,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "person", "schema": PERSON_SCHEMA, "strict": True}})
    assert finish == "stop", text
    jsonschema.validate(json.loads(text), PERSON_SCHEMA)


def test_json_schema_is_reproducible_with_a_seed(client, model_name):
    args = dict(max_tokens=200, seed=42, temperature=0.9,
                response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON_SCHEMA}})
    first, _ = chat_text(client, model_name, False, **args)
    again, _ = chat_text(client, model_name, True, **args)
    assert first == again


@pytest.mark.parametrize("seed", [1, 2])
def test_json_object_parses(client, model_name, seed):
    text, finish = chat_text(client, model_name, False, max_tokens=400, seed=seed, temperature=0.7,
                             response_format={"type": "json_object"})
    assert finish == "stop", text
    assert isinstance(json.loads(text), dict)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("seed", [5, 6])
def test_regex_answers_fullmatch(client, model_name, stream, seed):
    args = dict(model=model_name, prompt=PROMPT, max_tokens=30, seed=seed, temperature=1.0,
                extra_body={"structured_outputs": {"regex": DATE_REGEX}})
    if stream:
        text = "".join(c.choices[0].text for c in client.completions.create(stream=True, **args) if c.choices)
    else:
        completion = client.completions.create(**args)
        assert completion.choices[0].finish_reason == "stop"
        text = completion.choices[0].text
    assert re.fullmatch(DATE_REGEX, text), text


@pytest.mark.parametrize("field", ["structured_outputs", "guided_choice"])
def test_choice_answers_are_one_of_the_choices(client, model_name, field):
    extra = {"structured_outputs": {"choice": CHOICES}} if field == "structured_outputs" else {"guided_choice": CHOICES}
    seen = set()
    for seed in range(6):
        text, finish = chat_text(client, model_name, seed % 2 == 1, max_tokens=10, seed=seed, temperature=1.5,
                                 extra_body=extra)
        assert finish == "stop"
        assert text in CHOICES
        seen.add(text)
    assert seen


def test_grammar_answers_follow_the_grammar(client, model_name):
    grammar = 'root ::= "The answer is " digit digit? "."\ndigit ::= [0-9]'
    completion = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=20, seed=3,
                                           extra_body={"structured_outputs": {"grammar": grammar}})
    assert re.fullmatch(r"The answer is [0-9][0-9]?\.", completion.choices[0].text)


def test_n_choices_each_follow_the_constraint(client, model_name):
    completion = client.completions.create(model=model_name, prompt=PROMPT, max_tokens=30, n=4, seed=11,
                                           temperature=1.2, extra_body={"guided_regex": DATE_REGEX})
    assert len(completion.choices) == 4
    for choice in completion.choices:
        assert re.fullmatch(DATE_REGEX, choice.text), choice.text


def post_chat(server, body, timeout=30):
    return requests.post(server.base_url + "/v1/chat/completions", json=body, timeout=timeout)


def many_properties_schema(count):
    return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(count)},
            "required": [f"p{i}" for i in range(count)]}


RECURSIVE_SCHEMA = {"$ref": "#/$defs/node", "$defs": {"node": {"$ref": "#/$defs/node"}}}

HOSTILE = [
    ("nested quantifiers", {"structured_outputs": {"regex": "((a+)+)+(b*)*" * 40 + "(x{1,1000}){1,1000}"}},
     "structured_outputs.regex"),
    ("10,000 properties", {"response_format": {"type": "json_schema",
                                               "json_schema": {"name": "big", "schema": many_properties_schema(10000)}}},
     "response_format.json_schema.schema"),
    ("recursive $ref", {"response_format": {"type": "json_schema",
                                            "json_schema": {"name": "loop", "schema": RECURSIVE_SCHEMA}}},
     "response_format.json_schema.schema"),
    ("two constraints", {"response_format": {"type": "json_object"}, "guided_regex": "a"}, "guided_regex"),
    ("bad regex", {"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs.regex"),
]


@pytest.mark.parametrize("name,fields,param", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_constraints_get_a_quick_400(server, model_name, name, fields, param):
    started = time.monotonic()
    response = post_chat(server, {"model": model_name, "messages": MESSAGES, "max_tokens": 8, **fields})
    elapsed = time.monotonic() - started
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert elapsed < 5.0, f"{name} took {elapsed:.1f} s"
    # The server keeps serving, constrained requests included.
    ok = post_chat(server, {"model": model_name, "messages": MESSAGES, "max_tokens": 10,
                            "structured_outputs": {"choice": CHOICES}})
    assert ok.status_code == 200
    assert ok.json()["choices"][0]["message"]["content"] in CHOICES
