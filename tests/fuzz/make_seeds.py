#!/usr/bin/env python3
"""Writes the seed corpus of one fuzz target from the test fixtures.

    make_seeds.py TARGET CORPUS_DIR

Each seed is a file named by its content's SHA-1, so re-running adds
nothing twice and never removes what the fuzzer found. The input formats
are those the targets in tests/fuzz/ read (see each target's comment).
"""
import copy
import hashlib
import json
import pathlib
import sys

import gguf_seeds

repo = pathlib.Path(__file__).resolve().parents[2]
fixtures = repo / "tests" / "fixtures"


def completions_bodies():
    """Completions bodies covering each prompt form and the sampling fields."""
    return [
        {"model": "m", "prompt": "Hello", "max_tokens": 8},
        {"model": "m", "prompt": ["a", "b"], "n": 2, "temperature": 0.7, "top_p": 0.9, "top_k": 5, "seed": 3},
        {"model": "m", "prompt": [1, 2, 3], "logprobs": 2, "echo": True, "stop": ["\n", "x"]},
        {"model": "m", "prompt": [[1, 2], [3]], "stream": True, "stream_options": {"include_usage": True}},
        {"prompt": "x", "logit_bias": {"5": -100}, "presence_penalty": 1.5, "frequency_penalty": -1,
         "repetition_penalty": 1.1, "min_p": 0.1, "min_tokens": 2, "ignore_eos": True, "stop_token_ids": [4],
         "skip_special_tokens": False, "priority": 1, "deadline_ms": 500, "user": "u", "best_of": 1,
         "suffix": None, "metadata": {"k": "v"}, "store": False, "service_tier": "auto", "speculative": False},
    ]


def chat_bodies():
    """Chat bodies: every fixture conversation, plus tools and response_format variants."""
    bodies = []
    conversations = json.loads((fixtures / "chat" / "conversations.json").read_text())["conversations"]
    for conversation in conversations:
        body = {"model": "m", "messages": conversation["messages"], "max_tokens": 16}
        if conversation.get("tools"):
            body["tools"] = conversation["tools"]
            body["tool_choice"] = "auto"
        bodies.append(body)
    tool = {"type": "function", "function": {"name": "f", "description": "d",
                                             "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}
    user = [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]}]
    for choice in ["none", "required", {"type": "function", "function": {"name": "f"}}]:
        bodies.append({"messages": user, "tools": [tool], "tool_choice": choice, "parallel_tool_calls": False})
    for response_format in [{"type": "text"}, {"type": "json_object"},
                            {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}}]:
        bodies.append({"messages": user, "response_format": response_format, "max_completion_tokens": 4,
                       "logprobs": True, "top_logprobs": 2, "chat_template_kwargs": {"enable_thinking": False},
                       "add_generation_prompt": False})
    return bodies


def seeds_openai_request():
    # First byte: even → completions, odd → chat.
    return [b"\x00" + json.dumps(b).encode() for b in completions_bodies()] + \
           [b"\x01" + json.dumps(b).encode() for b in chat_bodies()]


def seeds_ws_message():
    frames = [{"type": "ping", "data": {"t": 1}}, {"type": "cancel", "id": "r1"}, {"type": "cancel", "id": 7}]
    for i, body in enumerate(completions_bodies()):
        frames.append(dict(body, type="generate", id=i, endpoint="completions"))
    for i, body in enumerate(chat_bodies()[:12]):
        frames.append(dict(body, type="generate", id=f"c{i}", endpoint="chat"))
    return [json.dumps(f).encode() for f in frames]


def seeds_admin_patch():
    bodies = [{}, {"policy": "fcfs"}, {"policy": "mlfq", "mlfq_quantum": 64}, {"preemption_mode": "swap"},
              {"max_num_batched_tokens": 2048, "max_num_seqs": 16}, {"max_prefill_chunk": 512},
              {"max_waiting_requests": 100}, {"num_speculative_tokens": 3, "speculative_adaptive": True},
              {"speculative_max_batch": 8}, {"policy": 1}, {"max_num_seqs": "4"}]
    return [json.dumps(b).encode() for b in bodies]


def seeds_tokenizer_encode():
    # First byte: bit 0 picks the tokenizer, bit 1 the special-token flags.
    lines = (fixtures / "text" / "strings.jsonl").read_text(encoding="utf-8").split("\n")
    texts = [json.loads(line).encode("utf-8", "surrogatepass") for line in lines if line.strip()]
    return [bytes([i % 4]) + t for i, t in enumerate(texts)]


def tiny_tokenizer(full, vocab_size=400):
    """`full` with its BPE vocabulary cut to the lowest ids and the merges among them."""
    out = copy.deepcopy(full)
    model = out["model"]
    vocab = {token: i for token, i in model["vocab"].items() if i < vocab_size}
    merges = []
    for merge in model.get("merges", []):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        if left in vocab and right in vocab and left + right in vocab:
            merges.append(merge)
    model["vocab"], model["merges"] = vocab, merges
    renumbered = {}
    for offset, added in enumerate(out.get("added_tokens", [])[:16]):
        renumbered[added["content"]] = vocab_size + offset
        added["id"] = vocab_size + offset
    out["added_tokens"] = out.get("added_tokens", [])[:16]
    post = out.get("post_processor") or {}
    for processor in [post] + post.get("processors", []):
        for name, special in (processor.get("special_tokens") or {}).items():
            special["ids"] = [renumbered.get(name, 0) for _ in special.get("ids", [])]
    return out


def seeds_tokenizer_json():
    # tokenizer.json, a NUL, then the text to encode.
    bases = {}
    for directory in sorted((fixtures / "text" / "tokenizers").iterdir()):
        bases[directory.name] = tiny_tokenizer(json.loads((directory / "tokenizer.json").read_text()))
    seeds = [json.dumps(t).encode() + b"\x00Hello world, 123 caf\xc3\xa9!\n" for t in bases.values()]
    for variant in json.loads((fixtures / "text" / "variants.json").read_text()):
        patched = dict(bases[variant["base"]], **variant["patch"])
        text = variant["cases"][0]["text"].encode() if variant["cases"] else b"x"
        seeds.append(json.dumps(patched).encode() + b"\x00" + text)
    return seeds


def seeds_safetensors():
    files = sorted(p for p in fixtures.rglob("*.safetensors") if p.stat().st_size <= 65536)
    return [p.read_bytes() for p in files]


def seeds_chat_template():
    # Template alone (rendered with the target's conversation), or template, NUL, context JSON.
    seeds = [p.read_bytes() for p in sorted((fixtures / "chat" / "templates").glob("*.jinja"))]
    for snippet in json.loads((fixtures / "chat" / "snippets.json").read_text()):
        seeds.append(snippet["template"].encode() + b"\x00" + json.dumps(snippet.get("context", {})).encode())
    return seeds


def seeds_gguf():
    return gguf_seeds.seeds(fixtures)


def constraint_seeds():
    """(kind number as in constraint_kind, text) pairs: the fixture tools' parameter
    schemas as JSON schemas and structural tags, and each other kind's syntax."""
    conversations = json.loads((fixtures / "chat" / "conversations.json").read_text())["conversations"]
    schemas = [t["function"]["parameters"] for c in conversations for t in c.get("tools") or []
               if t.get("function", {}).get("parameters")]
    schemas += [{"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 9},
                                                  "tags": {"type": "array", "items": {"enum": ["a", "b"]},
                                                           "maxItems": 3},
                                                  "when": {"type": "string", "format": "date-time"},
                                                  "next": {"$ref": "#"}}, "required": ["id"]},
                {"anyOf": [{"type": "number"}, {"type": "string", "pattern": "[a-z]{2,4}"}, {"const": None}]}]
    seeds = [(0, "")] + [(1, json.dumps(s)) for s in schemas]
    seeds += [(5, json.dumps({"type": "structural_tag", "triggers": ["<tool_call>"], "separator": "\n",
                              "structures": [{"begin": "<tool_call>", "schema": s, "end": "</tool_call>"}]}))
              for s in schemas[:4]]
    seeds += [(2, r) for r in [r"[0-9]{3}-[0-9]{4}", r"(yes|no|maybe)", r"\d+(\.\d{1,2})?", r"[^\n\"]{0,12};",
                               r"[à-ÿ]{2,4}|[α-ω]+!", r"(?:ab|a)(bc|c)?x*", r"\u{1F600}+\x41"]]
    seeds += [(3, json.dumps(c)) for c in [["positive", "negative", "neutral", "pos"], ["é", "", "a\"b"]]]
    seeds += [(4, g) for g in [
        'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= [0-9]{1,3} | "(" expr ")"\n',
        'root ::= pair+\npair ::= "(" pair* ")" | "[" pair* "]"\n',
        "# comment\nroot ::= [a-z]+ ws 'x'? .\nws ::= [ \\t\\n]*\n"]]
    return seeds


def seeds_constraints():
    # First byte: kind (value % 6) and vocabulary (bit 3); the rest is the constraint text.
    return [bytes([kind + 8 * vocab]) + text.encode() for kind, text in constraint_seeds() for vocab in (0, 1)]


def main():
    target, corpus = sys.argv[1], pathlib.Path(sys.argv[2])
    make = globals().get("seeds_" + target.removeprefix("fuzz_"))
    if make is None:
        sys.exit(f"make_seeds.py: no seeds for target '{target}'")
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in make():
        (corpus / hashlib.sha1(seed).hexdigest()).write_bytes(seed)


if __name__ == "__main__":
    main()
