"""The soak's short form (tools/soak, issue 15): about 300 requests over SSE
and WebSocket with cancels, disconnects, slow readers, invalid requests and
knob changes against a KV pool small enough to force swap and recompute
preemption. The tool starts its own server and checks that every request is
accounted for, the pool ends empty, seeded outputs equal their solo runs
and resident memory stays bounded; this test runs it and reads its JSON."""

import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_short_soak_loses_and_leaks_nothing(tmp_path):
    binary = os.environ.get("TROUPE_BIN")
    if not binary:
        pytest.skip("TROUPE_BIN is not set: end-to-end suites need a built troupe binary")
    done = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "tools", "soak"), "--requests", "300",
                           "--troupe", binary, "--json",
                           "--log", str(tmp_path / "soak-server.log")], capture_output=True, text=True, timeout=300)
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    assert done.returncode == 0, json.dumps(report["violations"], indent=2)
    assert report["pass"] and not report["violations"]
    assert report["requests"] >= 300
    client = report["outcomes"]["client"]
    for result in ("finished", "cancelled", "refused"):
        assert client.get(result, 0) > 0, f"no {result} request in the mix: {client}"
    assert report["preemptions"]["swap"] > 0 and report["preemptions"]["recompute"] > 0
    assert report["seeded"]["seeded_compared"] > 0
    assert report["exit_code"] == 0
