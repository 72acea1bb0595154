"""Shared fixtures: real tokenizers (offline) and their vocabularies; the --runslow option.
Plain helpers and oracles (no fixtures) are in oracles.py."""
from __future__ import annotations

import json
import os
import shutil

import torch

# Without a GPU, Triton kernels run in its interpreter; set before any kernel is defined.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import oracles
import pytest
from oracles import mistral_data

from structgen import fsm

# One thread by default: on a shared 2-core machine, two OpenMP threads per process
# oversubscribe the cores and every op waits at barriers (measured 7x slower here). Set
# here, not in tests/engine/conftest.py, so that a run of one folder (tests/guided,
# tests/kernels) has the thread count of the whole suite, which collects engine's first.
torch.set_num_threads(int(os.environ.get("STRUCTGEN_TEST_THREADS", "1")))


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def generous_compile_budget():
    """Compiles in tests get 60 s, not the 2 s default: a shared CI machine is slower
    than a user's (tests/fsm/test_budgets.py checks the budgets themselves)."""
    with fsm.compile_budget(60, "constraint (tests' budget)"):
        yield


@pytest.fixture(scope="session")
def smol_tokenizer():
    from transformers import AutoTokenizer

    from structgen.engine.loader import resolve_model
    return AutoTokenizer.from_pretrained(resolve_model())


@pytest.fixture(scope="session")
def smol_vocab(smol_tokenizer):
    return fsm.Vocabulary.from_tokenizer(smol_tokenizer)


@pytest.fixture(scope="session")
def sp_tokenizer(tmp_path_factory):
    """mistral's tokenizer.model.v1 (SentencePiece, byte fallback) as an HF tokenizer."""
    from transformers import AutoTokenizer
    folder = tmp_path_factory.mktemp("sp")
    shutil.copy(mistral_data("tokenizer.model.v1"), folder / "tokenizer.model")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizer"}))
    return AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="session")
def sp_vocab(sp_tokenizer):
    return fsm.Vocabulary.from_tokenizer(sp_tokenizer)


@pytest.fixture(scope="session")
def tekken_path():
    return mistral_data("tekken_240911.json")


@pytest.fixture(scope="session")
def tekken_vocab(tekken_path):
    return fsm.Vocabulary.from_tekken_json(tekken_path)


@pytest.fixture(scope="session")
def tekken_encoding(tekken_path):
    """An independent oracle: tiktoken's own BPE over the tekken ranks."""
    return oracles.tekken_encoding(tekken_path)
