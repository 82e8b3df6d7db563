#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang into build-fuzz/ and
# runs one for a fixed time:
#   tools/fuzz.sh TARGET SECONDS [extra libFuzzer flags...]
#   tools/fuzz.sh --build-only
#   tools/fuzz.sh --list
# The corpus lives in build-fuzz/corpus/TARGET, seeded from tests/fixtures
# (tests/fuzz/make_seeds.py) and kept between runs; crashes are written to
# build-fuzz/crashes/TARGET/. Exit status is non-zero when a crash was found.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$repo_root/build-fuzz"
targets=(fuzz_openai_request fuzz_ws_message fuzz_admin_patch fuzz_tokenizer_encode fuzz_tokenizer_json
         fuzz_safetensors fuzz_chat_template fuzz_gguf fuzz_hf_int4 fuzz_constraints)
jobs="${TROUPE_BUILD_JOBS:-$(nproc)}"

if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi

cc="${TROUPE_FUZZ_CC:-clang-14}"
cxx="${TROUPE_FUZZ_CXX:-clang++-14}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$repo_root/tests/fuzz" -B "$build_dir" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx"
fi
cmake --build "$build_dir" -j "$jobs"
if [ "${1:-}" = "--build-only" ]; then exit 0; fi

target="${1:?usage: tools/fuzz.sh TARGET SECONDS (tools/fuzz.sh --list names the targets)}"
seconds="${2:?usage: tools/fuzz.sh TARGET SECONDS}"
shift 2
if [ ! -x "$build_dir/$target" ]; then
  echo "fuzz.sh: unknown target '$target'; one of: ${targets[*]}" >&2
  exit 2
fi

corpus="$build_dir/corpus/$target"
crashes="$build_dir/crashes/$target"
mkdir -p "$corpus" "$crashes"
python3 "$repo_root/tests/fuzz/make_seeds.py" "$target" "$corpus"
dict="$repo_root/tests/fuzz/dicts/$target.dict"
dict_flag=()
if [ -f "$dict" ]; then dict_flag=(-dict="$dict"); fi

# The engine refuses large inputs itself; 64 KiB reaches every code path of
# these parsers and keeps executions fast. Tokenizer files need more room,
# and a GGUF file holds its tokenizer and a few tensors.
max_len=65536
if [ "$target" = fuzz_tokenizer_json ]; then max_len=262144; fi
if [ "$target" = fuzz_gguf ]; then max_len=131072; fi
cd "$crashes"
# Memory: 2 GiB per input keeps a run on a shared CI machine honest; a
# single input slower than 10 s counts as a hang.
exec "$build_dir/$target" "$corpus" "${dict_flag[@]}" -max_total_time="$seconds" -max_len="$max_len" \
  -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$crashes/" "$@"
