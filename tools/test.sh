#!/usr/bin/env bash
# Builds Troupe and runs every test: the C++ suites (CTest; GPU tests skip
# when no GPU is present) and the Python end-to-end suites against a live
# server, then a short fixed-time run of every fuzz target (tools/fuzz.sh;
# TROUPE_FUZZ_SECONDS per target, default 20, 0 skips). TROUPE_SANITIZERS=1
# also runs the C++ suites under ASan + UBSan and the actor/engine and HTTP
# suites under TSan (tests/README.md, "Sanitizer runs"; not yet run by CI:
# their cold build has not been timed on the CI machine). Run
# tools/setup.sh once before.
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

fuzz_seconds="${TROUPE_FUZZ_SECONDS:-20}"
if [ "$fuzz_seconds" -gt 0 ]; then
  TROUPE_BUILD_JOBS="$jobs" tools/fuzz.sh --build-only
  for target in $(tools/fuzz.sh --list); do
    # A summary line per target; the whole log (the crash report) when one fails.
    log="$repo_root/build-fuzz/$target.log"
    if tools/fuzz.sh "$target" "$fuzz_seconds" > "$log" 2>&1; then
      grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | sed "s/^/$target: /"
    else
      cat "$log"
      exit 1
    fi
  done
fi

if [ "${TROUPE_SANITIZERS:-0}" = 1 ]; then
  for preset in asan tsan; do
    cmake --preset "$preset"
    cmake --build --preset "$preset" -j "$jobs"
    ctest --preset "$preset" -j "$jobs"
  done
fi
