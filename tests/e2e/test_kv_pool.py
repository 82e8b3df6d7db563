"""The KV pools are allocated at start (issue 15, part 4): /metrics reports
their sizes from the first scrape, and a size the machine cannot back stops
`troupe serve` at start with a message naming the knob."""

import os
import subprocess
import sys

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


def _peak_resident_kib(command):
    """Peak resident set of `command`, in KiB, measured by a fresh interpreter whose only child it is."""
    probe = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, timeout=300)
    returncode, kib = out.stdout.split()
    assert returncode == "0", out.stderr
    return int(kib)


def test_an_offline_run_sizes_its_pool_for_its_own_prompts():
    """`troupe generate` knows its sequences: one prompt does not fault in a
    pool for 256 sequences at full context and a 1 GiB swap pool (1.5 GiB
    for the demo model; the whole process used to peak at 1.8 GB)."""
    binary = os.environ.get("TROUPE_BIN")
    if not binary:
        pytest.skip("TROUPE_BIN is not set: end-to-end suites need a built troupe binary")
    one = _peak_resident_kib([binary, "generate", "--engine", "--max-tokens", "4", "--prompt", "In the beginning"])
    assert one < 768 * 1024, f"generate of one prompt peaked at {one} KiB"
    # The same pool rule serves many prompts: 32 of them fit and finish.
    prompts = [arg for i in range(32) for arg in ("--prompt", f"Verse {i}:")]
    many = _peak_resident_kib([binary, "generate", "--engine", "--max-tokens", "4", "--ignore-eos", *prompts])
    assert many < 768 * 1024, f"generate of 32 prompts peaked at {many} KiB"
