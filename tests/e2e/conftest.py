"""Fixtures for the end-to-end suites: a live `troupe serve` on a free
loopback port, started from $TROUPE_BIN with the built-in demo model.

Every suite here skips cleanly when TROUPE_BIN is unset; with it set, a
server that fails to start is a test failure, not a skip.
"""

import os
import re
import socket
import subprocess
import time

import pytest
import requests

STARTUP_TIMEOUT_S = 120
# Short timeouts so the slowloris and stalled-reader cases finish quickly.
SERVE_FLAGS = ["--read-timeout", "2", "--write-timeout", "5", "--idle-timeout", "10"]
# Where the servers' logs go: pytest's base temp for the run (set by
# `server_log_dir` below), which pytest rotates (it keeps the last three
# runs'), so that a run leaves no log of its own in /tmp for ever.
LOG_DIR = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, extra_args=()):
        binary = os.environ.get("TROUPE_BIN")
        if not binary:
            pytest.skip("TROUPE_BIN is not set: end-to-end suites need a built troupe binary")
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(LOG_DIR or "/tmp", f"troupe-e2e-{self.port}.log")
        self.log = open(self.log_path, "wb")
        command = [binary, "serve", "--host", "127.0.0.1", "--port", str(self.port), *SERVE_FLAGS, *extra_args]
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        self.wait_ready()

    def wait_ready(self):
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"troupe serve exited with {self.process.returncode}; log: {self.log_path}")
            try:
                if requests.get(self.base_url + "/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"troupe serve not ready after {STARTUP_TIMEOUT_S} s; log: {self.log_path}")

    def model(self):
        return requests.get(self.base_url + "/v1/models", headers=self.headers(), timeout=10).json()["data"][0]

    def headers(self):
        return {}

    def metrics(self):
        """Samples of /metrics as {(name, frozenset(labels)): value}."""
        text = requests.get(self.base_url + "/metrics", timeout=10).text
        samples = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            match = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
            assert match, f"malformed metrics line: {line!r}"
            labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
            samples[(match.group(1), labels)] = float(match.group(3))
        return samples

    def histogram_buckets(self, name):
        """Cumulative counts of histogram `name` per `le` bound (+Inf as float("inf"))."""
        buckets = {}
        for (sample, labels), value in self.metrics().items():
            if sample == name + "_bucket":
                bound = dict(labels)["le"]
                buckets[float("inf") if bound == "+Inf" else float(bound)] = value
        return buckets

    def metric(self, name):
        """Sum of a metric's samples over all label sets."""
        return sum(value for (sample, _), value in self.metrics().items() if sample == name)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture(scope="session", autouse=True)
def server_log_dir(tmp_path_factory):
    global LOG_DIR
    LOG_DIR = str(tmp_path_factory.mktemp("server-logs"))
    return LOG_DIR


@pytest.fixture(scope="session")
def server():
    live = LiveServer()
    yield live
    live.stop()


@pytest.fixture(scope="session")
def model_name(server):
    return server.model()["id"]


@pytest.fixture(scope="session")
def long_output(server):
    """A max_tokens that keeps a short prompt generating for as long as the context allows."""
    return server.model()["max_model_len"] - 64


@pytest.fixture(scope="session")
def client(server):
    openai = pytest.importorskip("openai")
    httpx = pytest.importorskip("httpx")
    # An explicit httpx client: openai 1.54's default wrapper passes `proxies`, which httpx 0.28 removed.
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0,
                         http_client=httpx.Client(timeout=120))


def wait_for(condition, timeout_s=10.0, interval_s=0.05):
    """Polls `condition` until true or `timeout_s`; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval_s)
