"""/health reports the engine's real liveness: when the executor fails (made
to fail by the --test-fail-executor-after-steps hook), /health turns 503
within 2 s while the HTTP server itself keeps answering, and requests get
errors instead of hanging."""

import time

import requests

from conftest import LiveServer


def test_health_fails_within_two_seconds_of_an_executor_failure():
    server = LiveServer(extra_args=["--test-fail-executor-after-steps", "5"])
    try:
        assert requests.get(server.base_url + "/health", timeout=5).status_code == 200
        body = {"model": server.model()["id"], "prompt": "Keep going", "max_tokens": 40, "ignore_eos": True}
        response = requests.post(server.base_url + "/v1/completions", json=body, timeout=30)
        failed_at = time.monotonic()
        assert response.status_code == 500, response.text
        assert response.json()["error"]["type"]
        status = None
        while time.monotonic() - failed_at < 2.0:
            status = requests.get(server.base_url + "/health", timeout=2).status_code
            if status == 503:
                break
            time.sleep(0.05)
        assert status == 503
        # The server still answers, and a new generation fails fast rather than hanging.
        assert requests.get(server.base_url + "/version", timeout=5).status_code == 200
        late = requests.post(server.base_url + "/v1/completions", json={**body, "max_tokens": 2}, timeout=10)
        assert late.status_code >= 500
    finally:
        server.stop()
