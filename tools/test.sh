#!/usr/bin/env bash
# Builds Troupe and runs every test: the C++ suites (CTest; GPU tests skip
# when no GPU is present), the Python end-to-end suites against a live
# server, a short fixed-time run of every fuzz target (tools/fuzz.sh;
# TROUPE_FUZZ_SECONDS per target, default 20, 0 skips), then the C++ suites
# again under ASan + UBSan (every suite) and the actor/engine and HTTP
# suites under TSan (TROUPE_SANITIZERS: "asan tsan" by default, one of
# them, or 0 for none; tests/README.md, "Sanitizer runs").
#
# The whole run must fit CI's 90 minutes: the sanitizer stages run inside
# TROUPE_TEST_BUDGET_S seconds (default 4500) from the script's start. One
# still running then is stopped, and one with under 10 minutes left is not
# started; either way the script says what it left out. The sanitizer
# suites stop at their first failure, so a run cut short has passed every
# test it ran. Each step prints its wall time. Run tools/setup.sh once
# before.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

jobs="${TROUPE_BUILD_JOBS:-$(nproc)}"
budget_s="${TROUPE_TEST_BUDGET_S:-4500}"

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

# budgeted NAME COMMAND...: as timed, but stopped (its whole process group)
# when the budget ends; then it says what was left out and returns 3.
budgeted() {
  local name="$1" start=$SECONDS rc=0
  shift
  local left=$((budget_s - SECONDS))
  if [ "$left" -gt 0 ]; then timeout --kill-after=30 "$left" "$@" || rc=$?; else rc=124; fi
  echo "test.sh: $name took $((SECONDS - start)) s"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "test.sh: $name stopped at the end of the $budget_s s budget (TROUPE_TEST_BUDGET_S): the rest of" \
      "the sanitizer runs is left out; every test that ran before passed"
    return 3
  fi
  return "$rc"
}

# One sanitizer preset: its builds, then its suites, which stop at the first
# failure (so a stop at the budget's end follows only passing tests).
run_sanitizer() {
  local preset="$1"
  # TSan needs every library that passes data between threads instrumented:
  # CAF is built from source for it (tools/sanitizers/caf-tsan.sh).
  if [ "$preset" = tsan ]; then
    TROUPE_BUILD_JOBS="$jobs" budgeted "tsan caf build" tools/sanitizers/caf-tsan.sh --build || return
  fi
  # Each preset builds only the test executables it runs (CMakePresets.json).
  budgeted "$preset configure" cmake --preset "$preset" || return
  budgeted "$preset build" cmake --build --preset "$preset" -j "$jobs" || return
  budgeted "$preset ctest" ctest --preset "$preset" -j "$jobs" --stop-on-failure || return
}

sanitizers="${TROUPE_SANITIZERS:-asan tsan}"
if [ "$sanitizers" = 0 ]; then sanitizers=""; fi
if [ "$sanitizers" = 1 ]; then sanitizers="asan tsan"; fi
for preset in $sanitizers; do
  if [ $((budget_s - SECONDS)) -lt 600 ]; then
    echo "test.sh: leaving out the $preset run: $SECONDS s of the $budget_s s budget spent (TROUPE_TEST_BUDGET_S)"
    break
  fi
  status=0
  run_sanitizer "$preset" || status=$?
  if [ "$status" -eq 3 ]; then break; fi
  if [ "$status" -ne 0 ]; then exit "$status"; fi
done
echo "test.sh: all done in $SECONDS s"
