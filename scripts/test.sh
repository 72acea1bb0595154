#!/usr/bin/env bash
# The test suite (fast default: add --runslow for the long real-model tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# PYTHONSAFEPATH: the repository root is not on sys.path, so its top-level folders (kernels/...)
# never shadow installed packages of the same name (Hugging Face's `kernels`).
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONSAFEPATH=1
exec .venv/bin/python -m pytest -q "$@"
