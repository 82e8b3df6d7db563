#!/usr/bin/env bash
# One command for a freshly started GPU machine (CUDA 13, CMake, PyTorch, no
# Debian packages of ours, no network): unpacks the pack that
# tools/gpu-pack.sh built, prints the device and driver, runs the GPU tests,
# runs them again under compute-sanitizer memcheck and racecheck, runs
# speculative decoding on a CUDA engine (actors_tests'
# SpeculativeEngineCuda: every proposer against no speculation), runs the
# GPU benchmarks (bf16, then the quantised formats: qbench), and writes a
# short report to $OUT/gpu-report.md (stdout when OUT is unset). Exits
# non-zero when a stage fails.
#
#   tools/gpu-check.sh [--stages unpack,env,tests,memcheck,racecheck,spec,bench,qbench]
#
# Environment: TROUPE_GPU_PACK (default <repo>/build-gpu-pack/troupe-gpu.tar.xz),
# TROUPE_GPU_WORK (unpack dir), TROUPE_GPU_TEST_FILTER (gtest filter for the
# test stage), TROUPE_SANITIZER_FILTER (for the sanitizer stages),
# TROUPE_STAGE_TIMEOUT_<STAGE> (seconds), TROUPE_BENCH_PRESETS (default
# "1b 8b"), TROUPE_BENCH_ARGS (troupe bench's flags),
# TROUPE_QBENCH_PRESETS (default "1b") and TROUPE_QBENCH_FORMATS (default
# "int8 int4 int4_asym int4_nl int5_asym") for qbench.
#
# Under the device tool's 10-minute limit per command, run it as four calls:
#   tools/gpu-check.sh --stages env,tests,memcheck,racecheck
#   tools/gpu-check.sh --stages env,spec
#   tools/gpu-check.sh --stages env,bench
#   tools/gpu-check.sh --stages env,qbench
set -uo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pack="${TROUPE_GPU_PACK:-$repo_root/build-gpu-pack/troupe-gpu.tar.xz}"
work="${TROUPE_GPU_WORK:-${TMPDIR:-/tmp}/troupe-gpu}"
stages="unpack,env,tests,memcheck,racecheck,spec,bench,qbench"
while [ $# -gt 0 ]; do
  case "$1" in
    --stages) stages="unpack,$2"; shift 2 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
export PATH="/usr/local/cuda/bin:$PATH"
# The model tests read the fixture checkpoints from this checkout, not from
# the path the pack was built at.
export TROUPE_FIXTURES_DIR="$repo_root/tests/fixtures"
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

# Speculative decoding through the engine on CUDA: the drafter on its own
# stream, a layer-skipping one in the target's KV pool (the suite has no
# cases without a GPU, so none run is a failure here).
if wants spec; then
  if run_stage spec "$(timeout_for spec 240)" "$tests/actors_tests" --gtest_filter='*SpeculativeEngineCuda*'; then
    if grep -qE '^\[  PASSED  \] [1-9]' "$logs/spec.log"; then
      row "speculation (cuda engine)" ok "$stage_seconds" "$(gtest_summary "$logs/spec.log")"
    else
      row "speculation (cuda engine)" FAILED "$stage_seconds" "no case ran: does actors_tests see the device?"
      failed=1
    fi
  else
    row "speculation (cuda engine)" FAILED "$stage_seconds" "$(gtest_summary "$logs/spec.log"): $(grep -E '^\[  FAILED  \] [A-Za-z]' "$logs/spec.log" | sed 's/\[  FAILED  \] //' | sort -u | head -8 | tr '\n' ' ')"
    failed=1
  fi
fi

# GPU benchmarks: `troupe bench` on random bf16 checkpoints of the 1b and 8b
# shapes (made here by `troupe make-model`, kept in $work/models between
# calls on the same machine): prefill, decode at several batch sizes, and
# decode's bandwidth next to the device copy bandwidth. With the tests and
# sanitizers this does not fit one 10-minute command: run
# `--stages env,bench` as a call of its own.
# Runs `troupe bench` on the random bf16 checkpoint of preset $1 (made on
# first use) as stage $2 with quantization $3 and LM head format $4 (auto
# when absent), under the bench timeout.
bench_preset() {
  local preset="$1" stage="$2" quantization="$3" head="${4:-auto}"
  local model_dir="$work/models/$preset"
  if run_stage "$stage" "$(timeout_for bench 280)" bash -c '
      set -e
      [ -f "$2/config.json" ] || "$1" make-model --arch llama --preset "$3" --dtype bf16 --out "$2" \
          --tokenizer "$4/tests/fixtures/text/tokenizers/llama3_1"
      shift 4
      exec "$@"' make-model "$bin/troupe" "$model_dir" "$preset" "$repo_root" \
      "$bin/troupe" bench --model "$model_dir" --device cuda --quantization "$quantization" \
      --lm-head-quantization "$head" \
      ${TROUPE_BENCH_ARGS:---batches 1,8,32,128 --prompt-len 2048 --decode-prompt-len 256 --decode-tokens 32}; then
    row "${stage//-/ }" ok "$stage_seconds" "$(grep -E '^\| decode, batch 1 ' "$logs/$stage.log")"
  else
    row "${stage//-/ }" FAILED "$stage_seconds" "$(tail -1 "$logs/$stage.log")"
    failed=1
  fi
}
if wants bench; then
  for preset in ${TROUPE_BENCH_PRESETS:-1b 8b}; do bench_preset "$preset" "bench-$preset" none; done
fi
# The quantised linear layers (fused GEMV for decode, expanded bf16 slabs
# through cuBLASLt for prefill) on the same random weights, each with the
# int8 head `auto` gives on CUDA. int4 runs once more with an int4 head,
# rescored (the 1b shape's head is tied; logit_refinement.cu), to time the
# rescoring against the bytes it saves: where it wins, the CUDA backend's
# logit_refinement_pays can turn `auto` to it. Six runs of up to 280 s may
# not fit one 10-minute call: split TROUPE_QBENCH_FORMATS across calls.
if wants qbench; then
  for preset in ${TROUPE_QBENCH_PRESETS:-1b}; do
    for format in ${TROUPE_QBENCH_FORMATS:-int8 int4 int4_asym int4_nl int5_asym}; do
      bench_preset "$preset" "bench-$preset-$format" "$format"
      if [ "$format" = int4 ]; then bench_preset "$preset" "bench-$preset-int4-head-int4" int4 int4; fi
    done
  done
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
  for log in "$logs"/env.log "$logs"/tests.log "$logs"/memcheck.log "$logs"/racecheck.log "$logs"/spec.log \
    "$logs"/bench-*.log; do
    [ -f "$log" ] || continue
    echo
    echo "## $(basename "$log" .log) (last lines)"
    echo '```'
    tail -n 40 "$log"
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
