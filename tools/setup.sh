#!/usr/bin/env bash
# Installs everything Troupe's build and tests need on Debian 12 (headless
# Chromium and its driver for the console's browser test; clang-14 and its
# runtime (libFuzzer, sanitizers) for the fuzz targets, tools/fuzz.sh).
# Idempotent: safe to re-run. Python test tools go into .venv at the repo root.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi

packages=(
  build-essential cmake ninja-build ccache pkg-config git curl
  libcaf-dev libboost1.81-dev libboost-json1.81-dev libdnnl-dev
  libpcre2-dev libutf8proc-dev libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-venv
  chromium chromium-driver
  clang-14 libclang-rt-14-dev
)
$sudo_cmd apt-get update
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y --no-install-recommends "${packages[@]}"

# The source of the CAF release Debian ships, for the TSan build of it that
# the sanitizer run links (tools/sanitizers/caf-tsan.sh).
"$repo_root/tools/sanitizers/caf-tsan.sh" --download

python_bin="${PYTHON:-python3}"
if [ ! -x "$repo_root/.venv/bin/python" ]; then
  "$python_bin" -m venv "$repo_root/.venv"
fi
"$repo_root/.venv/bin/pip" install --quiet --upgrade pip
"$repo_root/.venv/bin/pip" install --quiet -r "$repo_root/tools/requirements-test.txt"
echo "setup done: packages installed, Python test tools in $repo_root/.venv"
