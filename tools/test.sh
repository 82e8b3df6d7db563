#!/usr/bin/env bash
# Builds Troupe and runs every test: the C++ suites (CTest; GPU tests skip
# when no GPU is present), the Python end-to-end suites against a live
# server, then the C++ suites again under sanitizers (tests/README.md,
# "Sanitizer runs"): every suite under ASan + UBSan, the actor/engine and
# HTTP suites under TSan. TROUPE_SKIP_SANITIZERS=1 skips the sanitizer runs
# (for a quick local check; CI runs them). Run tools/setup.sh once before.
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

if [ "${TROUPE_SKIP_SANITIZERS:-0}" = 1 ]; then
  echo "sanitizer runs skipped (TROUPE_SKIP_SANITIZERS=1)"
  exit 0
fi
for preset in asan tsan; do
  cmake --preset "$preset"
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" -j "$jobs"
done
