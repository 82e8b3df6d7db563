"""The KV pools are allocated at start (issue 15, part 4): /metrics reports
their sizes from the first scrape, and a size the machine cannot back stops
`troupe serve` at start with a message naming the knob."""

import os
import subprocess

import pytest

from conftest import free_port


def test_metrics_report_the_pool_sizes(server):
    samples = server.metrics()
    device = samples[("troupe:kv_pool_bytes", frozenset({("model_name", server.model()["id"]), ("pool", "device")}))]
    host = samples[("troupe:kv_pool_bytes", frozenset({("model_name", server.model()["id"]), ("pool", "host")}))]
    assert device > 0
    assert host == 1 << 30  # swap_space_bytes' default is exactly 2^16 demo blocks


def test_an_impossible_pool_size_stops_startup_naming_the_knob():
    binary = os.environ.get("TROUPE_BIN")
    if not binary:
        pytest.skip("TROUPE_BIN is not set: end-to-end suites need a built troupe binary")
    done = subprocess.run([binary, "serve", "--host", "127.0.0.1", "--port", str(free_port()),
                           "--kv-cache-bytes", "4000G"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "do not fit in memory" in output and "kv_cache_bytes" in output, output
