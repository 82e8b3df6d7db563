#!/usr/bin/env bash
# Makes the training venv (.venv-train at the repository root) with PyTorch,
# HF tokenizers/transformers and safetensors from PyPI. Only tools/train/
# needs it; the build and CI do not. Idempotent.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python_bin="${PYTHON:-python3}"
if [ ! -x "$repo_root/.venv-train/bin/python" ]; then
  "$python_bin" -m venv "$repo_root/.venv-train"
fi
"$repo_root/.venv-train/bin/pip" install --quiet --upgrade pip
"$repo_root/.venv-train/bin/pip" install --quiet -r "$repo_root/tools/train/requirements.txt"
echo "training venv ready: $repo_root/.venv-train"
