"""Checkpoints stored in 4 or 5 bits served as they are: a GGUF Q4_0 file, a
GGUF in llama.cpp's Q4_K_M mix (its Q6_K matrices as int6), an
AWQ directory, a GGUF Q5_0 file and one in llama.cpp's Q5_K_M mix
(tests/fixtures/) run in troupe's int4 / int5 formats by default
(`--quantization auto`), answer completions, and `--quantization none`
expands them to bf16 instead. A GPTQ act-order directory (its activations
permuted per layer), an 8-bit GPTQ one (run as int8), a GGUF in Q2_K (its
Q3_K matrices as int4_g16, its Q2_K ones as int8), one in IQ4_NL (as
int4_nl) and one in Q3_K_M (every matrix as stored: Q3_K as int4_g16)
answer chat.
"""

import os
import pathlib
import subprocess

import pytest
import requests

from conftest import LiveServer

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
Q4_0 = FIXTURES / "gguf" / "llama_tiny_q4_0.gguf"
Q5_0 = FIXTURES / "gguf" / "llama_tiny_q5_0.gguf"
Q4_K_M = FIXTURES / "gguf" / "llama_k256_q4_k_m.gguf"
Q5_K_M = FIXTURES / "gguf" / "llama_k256_q5_k_m.gguf"
IQ4_NL = FIXTURES / "gguf" / "llama_tiny_iq4_nl.gguf"
IQ4_XS = FIXTURES / "gguf" / "llama_k256_iq4_xs.gguf"
Q2_K = FIXTURES / "gguf" / "llama_k256_q2_k.gguf"
Q3_K_M = FIXTURES / "gguf" / "llama_k256_q3_k_m.gguf"
AWQ = FIXTURES / "int4" / "llama_tiny_awq"
ACT_ORDER = FIXTURES / "int4" / "llama_tiny_gptq_act_order"
GPTQ_8_BIT = FIXTURES / "int4" / "llama_tiny_gptq_8bit"


def served_format(server):
    with open(server.log_path, encoding="utf-8", errors="replace") as log:
        for line in log:
            if "linear layers" in line:
                return line.rsplit("linear layers", 1)[1].strip()
    return None


def greedy(server, prompt="The quick brown fox"):
    body = {"model": server.model()["id"], "prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True}
    reply = requests.post(server.base_url + "/v1/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]["text"]


@pytest.mark.parametrize("model,expected", [(Q4_0, "int4"), (Q4_K_M, "int4_asym (4 of 14 projections int6)"),
                                            (AWQ, "int4_asym"), (Q5_0, "int5_asym"),
                                            (Q5_K_M, "int5_asym (2 of 14 projections int6)"),
                                            (IQ4_NL, "int4_nl"), (IQ4_XS, "int4_nl")])
def test_stored_4_and_5_bit_checkpoints_run_as_stored_by_default(model, expected):
    server = LiveServer(["--model", str(model), "--threads", "1"])
    try:
        assert served_format(server) == expected
        assert greedy(server)
    finally:
        server.stop()
    expanded = LiveServer(["--model", str(model), "--threads", "1", "--quantization", "none"])
    try:
        assert served_format(expanded) == "none"
        assert greedy(expanded)
    finally:
        expanded.stop()


@pytest.mark.parametrize("model,expected", [(ACT_ORDER, "int4_asym"), (GPTQ_8_BIT, "int8"),
                                            (Q2_K, "int4_g16 (8 of 14 projections int8)"),
                                            (Q3_K_M, "int4_g16 (4 of 14 projections int4_asym) "
                                                     "(2 of 14 projections int5_asym)")])
def test_gptq_act_order_and_8_bit_checkpoints_answer_chat(model, expected):
    server = LiveServer(["--model", str(model), "--threads", "1"])
    try:
        assert served_format(server) == expected
        body = {"model": server.model()["id"], "messages": [{"role": "user", "content": "Hello there"}],
                "max_tokens": 8, "temperature": 0, "ignore_eos": True}
        reply = requests.post(server.base_url + "/v1/chat/completions", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        choice = reply.json()["choices"][0]
        assert choice["message"]["role"] == "assistant"
        assert choice["finish_reason"] == "length"
        assert reply.json()["usage"]["completion_tokens"] == 8
    finally:
        server.stop()


def test_a_broken_awq_config_fails_the_start_naming_the_field(tmp_path):
    binary = os.environ.get("TROUPE_BIN")
    if not binary:
        pytest.skip("TROUPE_BIN is not set: end-to-end suites need a built troupe binary")
    model = tmp_path / "awq"
    model.mkdir()
    for item in AWQ.iterdir():
        (model / item.name).write_bytes(item.read_bytes())
    config = (model / "config.json").read_text().replace('"bits": 4', '"bits": 3')
    (model / "config.json").write_text(config)
    run = subprocess.run([binary, "generate", "--model", str(model), "--prompt", "hi", "--max-tokens", "1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "field 'quantization_config.bits' (3) is not supported" in run.stderr + run.stdout
