#!/usr/bin/env bash
# The main job: constrained generation with the embedded SmolLM2-135M-Instruct.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec .venv/bin/python examples/quickstart.py "$@"
