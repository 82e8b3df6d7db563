#!/usr/bin/env bash
# Builds Troupe with the CUDA backend on this (GPU-less) machine and packs
# what a freshly started GPU machine needs to run it into one xz tarball:
# the troupe binary, the test binaries (debug info stripped), and every
# shared library they load that such a machine lacks. The CUDA runtime and
# cuBLASLt come from that machine's own toolkit. tools/gpu-check.sh unpacks
# and runs it.
#
#   tools/gpu-pack.sh [--build-dir DIR] [--output FILE] [--no-build]
#
# Defaults: build dir <repo>/build, output <repo>/build-gpu-pack/troupe-gpu.tar.xz
# (ignored by git as build*; carry build-gpu-pack to the GPU machine). Fails if the pack exceeds 64 MiB.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$repo_root/build"
output="$repo_root/build-gpu-pack/troupe-gpu.tar.xz"
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --output) output="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "gpu-pack: unknown argument $1" >&2; exit 2 ;;
  esac
done
limit_bytes=$((64 * 1024 * 1024))

if [ "$build" = 1 ]; then
  cmake -S "$repo_root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTROUPE_ENABLE_CUDA=ON
  cmake --build "$build_dir" -j "${TROUPE_BUILD_JOBS:-2}"
fi
if [ ! -f "$build_dir/kernels/libtroupe_kernels_cuda.a" ]; then
  echo "gpu-pack: $build_dir has no CUDA backend (is nvcc in /usr/local/cuda?)" >&2
  exit 1
fi

binaries=()
[ -x "$build_dir/troupe" ] && binaries+=("$build_dir/troupe")
for test_binary in "$build_dir"/tests/*_tests; do
  [ -x "$test_binary" ] && binaries+=("$test_binary")
done
if [ ! -x "$build_dir/tests/gpu_tests" ]; then
  echo "gpu-pack: $build_dir/tests/gpu_tests is missing" >&2
  exit 1
fi

staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/bin" "$staging/tests" "$staging/lib" "$staging/lib/fallback"
for binary in "${binaries[@]}"; do
  case "$binary" in
    */tests/*) destination="$staging/tests/$(basename "$binary")" ;;
    *) destination="$staging/bin/$(basename "$binary")" ;;
  esac
  strip --strip-debug -o "$destination" "$binary"
done

# Libraries the GPU machine provides itself: the C runtime, the CUDA
# toolkit and driver. libstdc++ / libgcc_s go to lib/fallback, used there
# only if the machine's own are older than ours.
is_system_library() {
  case "$(basename "$1")" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas*.so*|libnvidia*|libnvrtc*) return 0 ;;
  esac
  case "$1" in /usr/local/cuda*) return 0 ;; esac
  return 1
}
for library in $(ldd "${binaries[@]}" 2>/dev/null | awk '/=> \// { print $3 }' | sort -u); do
  is_system_library "$library" && continue
  case "$(basename "$library")" in
    libstdc++.so*|libgcc_s.so*) cp -L "$library" "$staging/lib/fallback/" ;;
    *) cp -L "$library" "$staging/lib/" ;;
  esac
done

{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "commit: $(git -C "$repo_root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo_root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version | tail -1)"
  echo "binaries: $(cd "$staging" && find bin tests -type f -printf '%f ')"
  echo "libraries: $(cd "$staging/lib" && find . -type f -printf '%P ')"
} > "$staging/MANIFEST"

mkdir -p "$(dirname "$output")"
tar -cJf "$output" -C "$staging" .
size=$(stat -c %s "$output")
echo "gpu-pack: $output ($((size / 1024 / 1024)) MiB)"
if [ "$size" -ge "$limit_bytes" ]; then
  echo "gpu-pack: the pack exceeds 64 MiB, the most that travels with a GPU command" >&2
  exit 1
fi
