#!/usr/bin/env bash
# CAF built with ThreadSanitizer, for the `tsan` preset.
#
# Debian's libcaf_core is not instrumented, so TSan cannot see the mailbox
# hand-off that orders a message's construction on the sending thread before
# its use on the receiving one, and reports every message as a race. The
# `tsan` preset therefore links a CAF of the same version as Debian's
# libcaf-dev, compiled from its upstream source (Debian's own .orig tarball,
# checksum-pinned) with -fsanitize=thread, installed under build-caf-tsan/.
#
#   tools/sanitizers/caf-tsan.sh --download   fetch the source into .cache/ (tools/setup.sh)
#   tools/sanitizers/caf-tsan.sh --build      build and install it, unless already built (tools/test.sh)
#   tools/sanitizers/caf-tsan.sh --prefix     print the install prefix
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# The version must be Debian's libcaf-dev: our headers and this library meet
# in one program only if they are the same release.
caf_version=0.17.6
caf_sha256=e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c
tarball="$repo_root/.cache/actor-framework_${caf_version}.orig.tar.gz"
source_url="http://deb.debian.org/debian/pool/main/a/actor-framework/actor-framework_${caf_version}.orig.tar.gz"
build_root="$repo_root/build-caf-tsan"
prefix="$build_root/install"
# Flags as the tsan preset compiles the project (CMakePresets.json).
cxx_flags="-fsanitize=thread -fno-omit-frame-pointer -O1 -g1"
# GCC 12 no longer pulls <limits> in through other standard headers, which
# CAF 0.17.6's receive_buffer.hpp relies on (Debian patches the include in).
caf_only_flags="-include limits"
stamp="$prefix/.built-with"

installed_version() {
  dpkg-query -W -f='${Version}' libcaf-dev 2>/dev/null | sed 's/-[^-]*$//'
}

download() {
  local installed
  installed="$(installed_version)"
  if [ "$installed" != "$caf_version" ]; then
    echo "caf-tsan.sh: libcaf-dev is \"$installed\", this script builds $caf_version; update caf_version and caf_sha256" >&2
    exit 1
  fi
  if [ -f "$tarball" ] && echo "$caf_sha256  $tarball" | sha256sum --check --status; then return; fi
  mkdir -p "$(dirname "$tarball")"
  curl --fail --silent --show-error --location --retry 3 -o "$tarball.part" "$source_url"
  if ! echo "$caf_sha256  $tarball.part" | sha256sum --check --status; then
    echo "caf-tsan.sh: $source_url does not have the expected SHA-256 $caf_sha256" >&2
    rm -f "$tarball.part"
    exit 1
  fi
  mv "$tarball.part" "$tarball"
}

build() {
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$caf_version $cxx_flags $caf_only_flags" ]; then return; fi
  if [ ! -f "$tarball" ]; then
    echo "caf-tsan.sh: $tarball is missing; run tools/setup.sh (or $0 --download)" >&2
    exit 1
  fi
  rm -rf "$build_root"
  mkdir -p "$build_root/src"
  tar -xzf "$tarball" -C "$build_root/src" --strip-components=1
  # Only what the project links (core and io), configured as Debian's build
  # (quiet log level, memory management on), so the installed build_config.hpp
  # matches what /usr/include/caf promised.
  cmake -S "$build_root/src" -B "$build_root/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="" -DCMAKE_CXX_FLAGS="$cxx_flags $caf_only_flags" \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" \
    -DCAF_LOG_LEVEL=QUIET -DCAF_NO_EXAMPLES=yes -DCAF_NO_TOOLS=yes -DCAF_NO_UNIT_TESTS=yes \
    -DCAF_NO_OPENSSL=yes -DCAF_NO_OPENCL=yes -DCAF_NO_PYTHON=yes -DCAF_NO_SUMMARY=yes \
    -DCAF_NO_COMPILER_CHECK=yes > "$build_root/configure.log"
  cmake --build "$build_root/build" -j "${TROUPE_BUILD_JOBS:-$(nproc)}"
  cmake --install "$build_root/build" > "$build_root/install.log"
  echo "$caf_version $cxx_flags $caf_only_flags" > "$stamp"
}

case "${1:-}" in
  --download) download ;;
  --build) build ;;
  --prefix) echo "$prefix" ;;
  *)
    echo "usage: $0 --download | --build | --prefix" >&2
    exit 2
    ;;
esac
