#!/usr/bin/env bash
# Builds tests/gpu against the CPU emulator and runs it.
#   tests/gpu/emulator/run.sh [gtest filter]     (default: all tests)
# Build dir: $TROUPE_EMULATOR_BUILD (default /tmp/troupe-gpu-emulator).
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
for name in dtype rope_spec step_batch tensor; do
  g++ "${flags[@]}" -c "$repo_root/kernels/$name.cpp" -o "$build/obj/c_$name.o"
done
for source in "$repo_root"/tests/gpu/*.cpp; do
  g++ "${flags[@]}" -c "$source" -o "$build/obj/t_$(basename "$source" .cpp).o"
done
g++ "${flags[@]}" -c "$here/emu_runtime.cpp" -o "$build/obj/emu_runtime.o"
g++ "${flags[@]}" -c "$here/emu_gemm.cpp" -o "$build/obj/emu_gemm.o"
g++ -o "$build/gpu_tests_emulated" "$build"/obj/*.o -lgtest -lgtest_main -pthread
TROUPE_GPU_TESTS_QUICK=1 "$build/gpu_tests_emulated" --gtest_filter="${1:-*}"
