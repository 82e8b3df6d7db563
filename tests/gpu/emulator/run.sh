#!/usr/bin/env bash
# Builds tests/gpu against the CPU emulator and runs it.
#   tests/gpu/emulator/run.sh [gtest filter]     (default: all tests)
# Build dir: $TROUPE_EMULATOR_BUILD (default /tmp/troupe-gpu-emulator).
# model_test.cpp, quantized_model_test.cpp and stored_codes_test.cpp (whole
# forward passes) need the model, text, chat, config and kernels libraries
# of a CMake build (with or without CUDA: the backend factory is recompiled
# here with it): name its directory in $TROUPE_EMULATOR_LIBS; without it
# those files are left out.
# With it the script also links $build/troupe_emulated, the `troupe` CLI on
# the emulated GPU (`--device cuda`, and `auto` picks it): for example
#   TROUPE_BIN=$build/troupe_emulated .venv/bin/pytest tests/e2e
# runs the end-to-end suite with the engine on the CUDA backend; and
# $build/speculative_cuda_tests_emulated, tests/actors/speculative_cuda_test.cpp
# (speculation through a CUDA engine) on it.
# Shapes follow TROUPE_GPU_TESTS_QUICK=1, which this script sets: the
# emulator runs a kernel thousands of times slower than a GPU.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../../.." && pwd)"
build="${TROUPE_EMULATOR_BUILD:-/tmp/troupe-gpu-emulator}"
cuda_include="${CUDA_HOME:-/usr/local/cuda}/include"
mkdir -p "$build/obj"
flags=(-std=c++20 -O1 -g -I"$repo_root" -I"$cuda_include" -I"$here" -I"$build" -DTROUPE_HAVE_CUDA=1
       -DTROUPE_SOURCE_DIR=\""$repo_root"\" -DTROUPE_FIXTURES_DIR=\""$repo_root/tests/fixtures"\"
       -DTROUPE_BINARY_DIR=\""$build"\")

python3 "$here/transform.py" "$repo_root/kernels/cuda/sampling_device.cuh" "$build/sampling_device.emu.hpp"
for source in "$repo_root"/kernels/cuda/*.cu; do
  name="$(basename "$source" .cu)"
  python3 "$here/transform.py" "$source" "$build/$name.emu.cpp"
  g++ "${flags[@]}" -include "$here/emu_cuda.hpp" -Wno-attributes -c "$build/$name.emu.cpp" -o "$build/obj/k_$name.o"
done
for source in "$repo_root"/kernels/cuda/*.cpp; do
  name="$(basename "$source" .cpp)"
  [ "$name" = gemm ] && continue  # cuBLASLt: emu_gemm.cpp stands in
  g++ "${flags[@]}" -c "$source" -o "$build/obj/h_$name.o"
done
for name in backend_defaults dtype rope_spec step_batch tensor speculative quantization tree_attention \
    stored_code_source; do
  g++ "${flags[@]}" -c "$repo_root/kernels/$name.cpp" -o "$build/obj/c_$name.o"
done
# Verify groups run on the host over the CPU sampler and its ISA tables
# (flags as in kernels/CMakeLists.txt); quantised layers are packed from the
# CPU quantiser's codes.
for name in sampler cpu_features quantized_weights quantized_reference round_to_nearest logit_refinement; do
  g++ "${flags[@]}" -c "$repo_root/kernels/cpu/$name.cpp" -o "$build/obj/c_$name.o"
done
isa_flags=(-ffp-contract=off)
g++ "${flags[@]}" "${isa_flags[@]}" -c "$repo_root/kernels/cpu/isa_scalar.cpp" -o "$build/obj/c_isa_scalar.o"
isa_flags+=(-mavx2 -mfma -mf16c)
g++ "${flags[@]}" "${isa_flags[@]}" -c "$repo_root/kernels/cpu/isa_avx2.cpp" -o "$build/obj/c_isa_avx2.o"
isa_flags+=(-mavx512f -mavx512bw -mavx512vl -mavx512dq)
g++ "${flags[@]}" "${isa_flags[@]}" -c "$repo_root/kernels/cpu/isa_avx512.cpp" -o "$build/obj/c_isa_avx512.o"
g++ "${flags[@]}" "${isa_flags[@]}" -mavx512vnni -c "$repo_root/kernels/cpu/isa_avx512vnni.cpp" \
    -o "$build/obj/c_isa_avx512vnni.o"
g++ "${flags[@]}" "${isa_flags[@]}" -mavx512bf16 -mavx512vnni -c "$repo_root/kernels/cpu/isa_avx512bf16.cpp" \
    -o "$build/obj/c_isa_avx512bf16.o"
libs=()
if [ -n "${TROUPE_EMULATOR_LIBS:-}" ]; then
  l="$TROUPE_EMULATOR_LIBS"
  libs=("$l/model/libtroupe_model.a" "$l/kernels/libtroupe_kernels.a" "$l/config/libtroupe_config.a"
        "$l/model/libtroupe_text.a" "$l/model/libtroupe_chat.a" "$l/base/libtroupe_base.a" -ldnnl -lgomp -lpcre2-8 -lutf8proc -lboost_json
        -lboost_container)
  g++ "${flags[@]}" -c "$repo_root/kernels/backend.cpp" -o "$build/obj/c_backend.o"
else
  rm -f "$build/obj/c_backend.o"
  rm -f "$build/obj/t_model_test.o" "$build/obj/t_quantized_model_test.o" "$build/obj/t_stored_codes_test.o"
fi
for source in "$repo_root"/tests/gpu/*.cpp; do
  case "$(basename "$source")" in
    model_test.cpp | quantized_model_test.cpp | stored_codes_test.cpp) [ -z "${TROUPE_EMULATOR_LIBS:-}" ] && continue ;;
  esac
  g++ "${flags[@]}" -c "$source" -o "$build/obj/t_$(basename "$source" .cpp).o"
done
g++ "${flags[@]}" -c "$here/emu_runtime.cpp" -o "$build/obj/emu_runtime.o"
g++ "${flags[@]}" -c "$here/emu_gemm.cpp" -o "$build/obj/emu_gemm.o"
g++ -o "$build/gpu_tests_emulated" "$build"/obj/*.o "${libs[@]}" -lgtest -lgtest_main -pthread
if [ -n "${TROUPE_EMULATOR_LIBS:-}" ]; then
  g++ -o "$build/troupe_emulated" "$l"/tools/CMakeFiles/troupe.dir/cli/*.o "$build"/obj/[khc]_*.o "$build"/obj/emu_*.o \
      -Wl,--start-group "$l/api/libtroupe_api.a" "$l/api/libtroupe_engine.a" "$l/actors/libtroupe_actors.a" \
      "$l/actors/libtroupe_actors_core.a" "$l/memory/libtroupe_memory.a" "$l/constraints/libtroupe_constraints.a" \
      "${libs[@]}" -Wl,--end-group \
      -lcaf_core -lspdlog -lfmt -pthread
  # Speculation through a CUDA engine (tests/actors/speculative_cuda_test.cpp),
  # run as $build/speculative_cuda_tests_emulated [--gtest_filter=...].
  g++ "${flags[@]}" -I"$repo_root/api" -c "$repo_root/tests/actors/speculative_cuda_test.cpp" \
      -o "$build/speculative_cuda_test.o"
  g++ -o "$build/speculative_cuda_tests_emulated" "$build/speculative_cuda_test.o" "$build"/obj/[khc]_*.o \
      "$build"/obj/emu_*.o -Wl,--start-group "$l/api/libtroupe_engine.a" "$l/actors/libtroupe_actors.a" \
      "$l/actors/libtroupe_actors_core.a" "$l/memory/libtroupe_memory.a" "$l/constraints/libtroupe_constraints.a" \
      "${libs[@]}" -Wl,--end-group -lcaf_core -lspdlog -lfmt -lgtest -lgtest_main -pthread
fi
TROUPE_GPU_TESTS_QUICK=1 "$build/gpu_tests_emulated" --gtest_filter="${1:-*}"
