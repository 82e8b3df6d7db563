#!/usr/bin/env bash
# One command for a freshly started GPU machine (CUDA 13, CMake, PyTorch, no
# Debian packages of ours, no network): unpacks the pack that
# tools/gpu-pack.sh built, prints the device and driver, runs the GPU tests,
# runs them again under compute-sanitizer memcheck and racecheck, runs the
# GPU benchmarks, and writes a short report to $OUT/gpu-report.md (stdout
# when OUT is unset). Exits non-zero when a stage fails.
#
#   tools/gpu-check.sh [--stages unpack,env,tests,memcheck,racecheck,bench]
#
# Environment: TROUPE_GPU_PACK (default <repo>/build-gpu-pack/troupe-gpu.tar.xz),
# TROUPE_GPU_WORK (unpack dir), TROUPE_GPU_TEST_FILTER (gtest filter for the
# test stage), TROUPE_SANITIZER_FILTER (for the sanitizer stages),
# TROUPE_STAGE_TIMEOUT_<STAGE> (seconds; defaults keep the whole run under
# the 10 minutes one GPU command may take).
set -uo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pack="${TROUPE_GPU_PACK:-$repo_root/build-gpu-pack/troupe-gpu.tar.xz}"
work="${TROUPE_GPU_WORK:-${TMPDIR:-/tmp}/troupe-gpu}"
stages="unpack,env,tests,memcheck,racecheck,bench"
while [ $# -gt 0 ]; do
  case "$1" in
    --stages) stages="unpack,$2"; shift 2 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
export PATH="/usr/local/cuda/bin:$PATH"
logs="$work/logs"
mkdir -p "$logs"
summary="$logs/summary.md"
: > "$summary"
failed=0

wants() { [[ ",$stages," == *",$1,"* ]]; }
timeout_for() {
  local name="TROUPE_STAGE_TIMEOUT_${1^^}"
  echo "${!name:-$2}"
}
row() { echo "| $1 | $2 | $3 | $4 |" >> "$summary"; }

# Runs stage $1 (command in the remaining arguments) under its timeout, logs
# to $logs/$1.log and returns the command's status.
run_stage() {
  local stage="$1" seconds="$2"
  shift 2
  local start=$SECONDS
  timeout --kill-after=10 "$seconds" "$@" > "$logs/$stage.log" 2>&1
  local status=$?
  stage_seconds=$((SECONDS - start))
  [ $status -eq 124 ] && echo "gpu-check: $stage stopped after ${seconds}s" >> "$logs/$stage.log"
  return $status
}

gtest_summary() {
  local log="$1"
  local passed failed_count skipped
  passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  failed_count=$(grep -oE '\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | tail -1)
  skipped=$(grep -oE '\[  SKIPPED \] [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  echo "${passed:-0} passed, ${failed_count:-0} failed, ${skipped:-0} skipped"
}

if wants unpack; then
  if [ ! -f "$pack" ]; then
    row unpack FAILED 0 "no pack at $pack: run tools/gpu-pack.sh on the build machine and carry build-gpu-pack"
    failed=1
  else
    rm -rf "$work/pack" && mkdir -p "$work/pack"
    if run_stage unpack 120 tar -xJf "$pack" -C "$work/pack"; then
      row unpack ok "$stage_seconds" "$(head -2 "$work/pack/MANIFEST" | tr '\n' ' ')"
    else
      row unpack FAILED "$stage_seconds" "tar could not unpack $pack"
      failed=1
    fi
  fi
fi
bin="$work/pack/bin"
tests="$work/pack/tests"
export LD_LIBRARY_PATH="$work/pack/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Our libstdc++ only when the machine's is older than the one we built with.
if [ -x "$tests/gpu_tests" ] && ldd "$tests/gpu_tests" 2>&1 | grep -q "version .GLIBCXX\|version .CXXABI"; then
  export LD_LIBRARY_PATH="$work/pack/lib/fallback:$LD_LIBRARY_PATH"
fi

device="unknown"
if wants env; then
  {
    echo "## nvidia-smi"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv 2>&1
    echo "## nvcc"
    nvcc --version 2>&1 | tail -2
    echo "## compute-sanitizer"
    compute-sanitizer --version 2>&1 | head -2
    echo "## glibc"
    ldd --version 2>&1 | head -1
    echo "## unresolved libraries"
    for binary in "$bin"/* "$tests"/*; do [ -x "$binary" ] && ldd "$binary" 2>&1 | grep -E "not found|version" | sed "s|^|$(basename "$binary"): |"; done
  } > "$logs/env.log" 2>&1
  device="$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1)"
  if [ -z "$device" ]; then
    row env FAILED 0 "nvidia-smi found no GPU"
    failed=1
  elif grep -q "not found" "$logs/env.log"; then
    row env FAILED 0 "$device; missing libraries, see the log"
    failed=1
  else
    row env ok 0 "$device"
  fi
fi

if wants tests; then
  if run_stage tests "$(timeout_for tests 240)" "$tests/gpu_tests" --gtest_filter="${TROUPE_GPU_TEST_FILTER:-*}" \
       --gtest_output="xml:$logs/gpu_tests.xml"; then
    if [ "$device" != unknown ] && [ -n "$device" ] && grep -q "no CUDA device" "$logs/tests.log"; then
      row "tests (gpu label)" FAILED "$stage_seconds" "tests skipped for want of a device although nvidia-smi sees one"
      failed=1
    else
      row "tests (gpu label)" ok "$stage_seconds" "$(gtest_summary "$logs/tests.log")"
    fi
  else
    row "tests (gpu label)" FAILED "$stage_seconds" "$(gtest_summary "$logs/tests.log"): $(grep -E '^\[  FAILED  \] [A-Za-z]' "$logs/tests.log" | sed 's/\[  FAILED  \] //' | sort -u | head -8 | tr '\n' ' ')"
    failed=1
  fi
fi

# The sanitizers slow kernels 10-100x: the tests run with smaller shapes.
for tool in memcheck racecheck; do
  wants "$tool" || continue
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  if run_stage "$tool" "$(timeout_for "$tool" 150)" env TROUPE_GPU_TESTS_QUICK=1 compute-sanitizer --tool "$tool" \
       --error-exitcode 99 "${extra[@]}" "$tests/gpu_tests" --gtest_filter="${TROUPE_SANITIZER_FILTER:-*}"; then
    row "$tool" ok "$stage_seconds" "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$tool.log" | tail -1)"
  else
    row "$tool" FAILED "$stage_seconds" "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$tool.log" | tail -1) $(gtest_summary "$logs/$tool.log")"
    failed=1
  fi
done

# HOOK: GPU benchmarks. `troupe bench` (the lead's) is not there yet; once it
# is, this stage runs it on the GPU with TROUPE_BENCH_ARGS.
if wants bench; then
  if [ -x "$bin/troupe" ] && "$bin/troupe" bench --help > /dev/null 2>&1; then
    if run_stage bench "$(timeout_for bench 120)" "$bin/troupe" bench ${TROUPE_BENCH_ARGS:---device cuda}; then
      row bench ok "$stage_seconds" "$(tail -1 "$logs/bench.log")"
    else
      row bench FAILED "$stage_seconds" "$(tail -1 "$logs/bench.log")"
      failed=1
    fi
  else
    row bench skipped 0 "troupe bench is not available yet (hook in tools/gpu-check.sh)"
  fi
fi

report() {
  echo "# Troupe GPU check"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- device: ${device}"
  [ -f "$work/pack/MANIFEST" ] && sed 's/^/- pack /' "$work/pack/MANIFEST"
  echo "- result: $([ $failed = 0 ] && echo PASS || echo FAIL)"
  echo
  echo "| stage | result | seconds | summary |"
  echo "|---|---|---|---|"
  cat "$summary"
  for stage in env tests memcheck racecheck bench; do
    [ -f "$logs/$stage.log" ] || continue
    echo
    echo "## $stage (last lines)"
    echo '```'
    tail -n 40 "$logs/$stage.log"
    echo '```'
  done
}
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  report > "$OUT/gpu-report.md"
  [ -f "$logs/gpu_tests.xml" ] && cp "$logs/gpu_tests.xml" "$OUT/gpu-tests.xml"
  echo "gpu-check: report in $OUT/gpu-report.md ($([ $failed = 0 ] && echo PASS || echo FAIL))"
else
  report
fi
exit $failed
