"""Engine tests: one torch thread, the embedded model's folder, and a small engine on it
(module-scoped: one per test file; prompts, hf_greedy and FakeConstraint are in oracles.py)."""
from __future__ import annotations

import os

import pytest
import torch

from structgen.engine import LLM

# One thread by default: on a shared 2-core machine, two OpenMP threads per process
# oversubscribe the cores and every op waits at barriers (measured 7x slower here).
torch.set_num_threads(int(os.environ.get("STRUCTGEN_TEST_THREADS", "1")))


@pytest.fixture(scope="session")
def smol_folder():
    from structgen.engine.loader import resolve_model
    try:
        return resolve_model()
    except FileNotFoundError as e:
        pytest.skip(f"embedded model unavailable: {e}")


@pytest.fixture(scope="module")
def llm(smol_folder):
    return LLM(smol_folder, max_num_seqs=8, block_size=16, num_kv_blocks=128)
