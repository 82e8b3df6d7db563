"""`troupe serve --model file.gguf`: a GGUF file written by the `gguf`
package (tests/fixtures/gguf/) serves completions and chat through its
embedded tokenizer and chat template, and answers greedily exactly as the
Hugging Face checkpoint it was converted from (rebuilt here with
`troupe make-model`, same seed).
"""

import os
import pathlib
import subprocess

import pytest
import requests

from conftest import LiveServer

GGUF = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "gguf" / "llama_tiny_bf16.gguf"


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    binary = os.environ.get("TROUPE_BIN")
    if not binary:
        pytest.skip("TROUPE_BIN is not set: end-to-end suites need a built troupe binary")
    hf_dir = tmp_path_factory.mktemp("gguf") / "hf"
    subprocess.run([binary, "make-model", "--arch", "llama", "--preset", "tiny", "--dtype", "bf16", "--seed", "14",
                    "--out", str(hf_dir)], check=True, capture_output=True)
    gguf = LiveServer(["--model", str(GGUF), "--threads", "1"])
    hf = LiveServer(["--model", str(hf_dir), "--threads", "1"])
    yield gguf, hf
    gguf.stop()
    hf.stop()


def completion(server, **body):
    reply = requests.post(server.base_url + "/v1/completions", json={"model": server.model()["id"], **body}, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_the_gguf_file_is_served_under_its_file_name(servers):
    gguf, _ = servers
    assert gguf.model()["id"] == "llama_tiny_bf16.gguf"


def test_greedy_completion_equals_the_hf_original(servers):
    gguf, hf = servers
    body = {"prompt": "The quick brown fox", "max_tokens": 16, "temperature": 0, "ignore_eos": True}
    ours, theirs = completion(gguf, **body), completion(hf, **body)
    assert ours["choices"][0]["text"] == theirs["choices"][0]["text"]
    assert ours["usage"] == theirs["usage"]


def test_chat_renders_the_embedded_template(servers):
    gguf, hf = servers
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8, "temperature": 0}
    replies = [requests.post(s.base_url + "/v1/chat/completions", json={"model": s.model()["id"], **body}, timeout=60)
               for s in (gguf, hf)]
    assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
    ours, theirs = (r.json() for r in replies)
    assert ours["usage"]["prompt_tokens"] == theirs["usage"]["prompt_tokens"]
    assert ours["choices"][0]["message"]["content"] == theirs["choices"][0]["message"]["content"]
