#!/usr/bin/env bash
# Builds Troupe and runs every test: the C++ suites (CTest; GPU tests skip
# when no GPU is present), the Python end-to-end suites against a live
# server, a short fixed-time run of every fuzz target (tools/fuzz.sh;
# TROUPE_FUZZ_SECONDS per target, default 20, 0 skips), then the C++ suites
# again under ASan + UBSan (every suite) and the actor/engine and HTTP
# suites under TSan when TROUPE_SANITIZERS names the presets ("asan tsan",
# or 1 for both; tests/README.md, "Sanitizer runs": off by default until
# both runs are green). Each step prints its wall time. Run tools/setup.sh
# once before.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

jobs="${TROUPE_BUILD_JOBS:-$(nproc)}"

# timed NAME COMMAND...: runs the command and prints how long it took.
timed() {
  local name="$1" start=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - start)) s"
}

timed "configure" cmake --preset default
timed "build" cmake --build --preset default -j "$jobs"
timed "ctest" ctest --preset default -j "$jobs"
if [ -d tests/e2e ] && compgen -G "tests/e2e/test_*.py" > /dev/null; then
  TROUPE_BIN="$repo_root/build/troupe" timed "e2e" "$repo_root/.venv/bin/python" -m pytest -q tests/e2e
fi

run_fuzz_targets() {
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
}

fuzz_seconds="${TROUPE_FUZZ_SECONDS:-20}"
if [ "$fuzz_seconds" -gt 0 ]; then
  timed "fuzz" run_fuzz_targets
fi

sanitizers="${TROUPE_SANITIZERS:-0}"
if [ "$sanitizers" = 0 ]; then sanitizers=""; fi
if [ "$sanitizers" = 1 ]; then sanitizers="asan tsan"; fi
for preset in $sanitizers; do
  # TSan needs every library that passes data between threads instrumented:
  # CAF is built from source for it (tools/sanitizers/caf-tsan.sh).
  if [ "$preset" = tsan ]; then
    TROUPE_BUILD_JOBS="$jobs" timed "tsan caf build" tools/sanitizers/caf-tsan.sh --build
  fi
  # Each preset builds only the test executables it runs (CMakePresets.json).
  timed "$preset configure" cmake --preset "$preset"
  timed "$preset build" cmake --build --preset "$preset" -j "$jobs"
  timed "$preset ctest" ctest --preset "$preset" -j "$jobs"
done
