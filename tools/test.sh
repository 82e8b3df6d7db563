#!/usr/bin/env bash
# Builds Troupe and runs every test: the C++ suites (CTest; GPU tests skip
# when no GPU is present), the Python end-to-end suites against a live
# server, a short fixed-time run of every fuzz target (tools/fuzz.sh;
# TROUPE_FUZZ_SECONDS per target, default 20, 0 skips), then the C++ suites
# again under ASan + UBSan (every suite) and the actor/engine and HTTP
# suites under TSan (TROUPE_SANITIZERS: "asan tsan" by default, one of
# them, or 0 for none; tests/README.md, "Sanitizer runs").
#
# The whole run must fit CI's 90 minutes. Each sanitizer stage starts only
# if its worst case (a cold compiler cache, scaled by how slow this machine
# ran the plain suites against the reference machine) ends within
# TROUPE_TEST_BUDGET_S seconds (default 4800) of the start; otherwise the
# script says which stage it leaves out and why. Each step prints its wall
# time. Run tools/setup.sh once before.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

jobs="${TROUPE_BUILD_JOBS:-$(nproc)}"
budget_s="${TROUPE_TEST_BUDGET_S:-4800}"

# timed NAME COMMAND...: runs the command and prints how long it took.
timed() {
  local name="$1" start=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - start)) s"
}

timed "configure" cmake --preset default
timed "build" cmake --build --preset default -j "$jobs"
ctest_start=$SECONDS
timed "ctest" ctest --preset default -j "$jobs"
ctest_s=$((SECONDS - ctest_start))
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

# Worst-case seconds of each sanitizer stage on the reference machine (2
# cores, tests/README.md "Sanitizer runs"): build from a cold compiler cache
# plus the suites' run. The plain ctest took reference_ctest_s there.
reference_ctest_s=300
declare -A worst_case_s=([asan]=2900 [tsan]=2100)

# fits PRESET: whether PRESET's worst case, scaled by this machine's speed,
# ends inside the budget.
fits() {
  local scale_pct=$((ctest_s * 100 / reference_ctest_s))
  if [ "$scale_pct" -lt 100 ]; then scale_pct=100; fi
  local needed=$((worst_case_s[$1] * scale_pct / 100))
  if [ $((SECONDS + needed)) -le "$budget_s" ]; then return 0; fi
  echo "test.sh: leaving out the $1 run: $SECONDS s spent, it may need $needed s" \
    "(worst case x $scale_pct%), the budget is $budget_s s (TROUPE_TEST_BUDGET_S)"
  return 1
}

sanitizers="${TROUPE_SANITIZERS:-asan tsan}"
if [ "$sanitizers" = 0 ]; then sanitizers=""; fi
if [ "$sanitizers" = 1 ]; then sanitizers="asan tsan"; fi
for preset in $sanitizers; do
  fits "$preset" || continue
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
echo "test.sh: all done in $SECONDS s"
