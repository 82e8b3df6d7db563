#!/usr/bin/env bash
# Builds Troupe and runs every test: the C++ suites (CTest; GPU tests skip
# when no GPU is present) and the Python end-to-end suites against a live
# server. Run tools/setup.sh once before.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

jobs="${TROUPE_BUILD_JOBS:-$(nproc)}"
cmake --preset default
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs"
if [ -d tests/e2e ] && compgen -G "tests/e2e/test_*.py" > /dev/null; then
  TROUPE_BIN="$repo_root/build/troupe" "$repo_root/.venv/bin/python" -m pytest -q tests/e2e
fi
