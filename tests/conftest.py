"""Shared fixtures: real tokenizers (offline) and their vocabularies."""
from __future__ import annotations

import importlib.util
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from structgen import fsm


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def _mistral_data(name: str) -> Path:
    spec = importlib.util.find_spec("mistral_common")
    assert spec is not None, "test extra missing: pip install --no-deps mistral-common"
    return Path(list(spec.submodule_search_locations)[0]) / "data" / name


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
    shutil.copy(_mistral_data("tokenizer.model.v1"), folder / "tokenizer.model")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizer"}))
    return AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="session")
def sp_vocab(sp_tokenizer):
    return fsm.Vocabulary.from_tokenizer(sp_tokenizer)


@pytest.fixture(scope="session")
def tekken_path():
    return _mistral_data("tekken_240911.json")


@pytest.fixture(scope="session")
def tekken_vocab(tekken_path):
    return fsm.Vocabulary.from_tekken_json(tekken_path)


@pytest.fixture(scope="session")
def tekken_encoding(tekken_path):
    """An independent oracle: tiktoken's own BPE over the tekken ranks."""
    import base64

    import tiktoken
    data = json.loads(Path(tekken_path).read_text())
    cfg = data["config"]
    n = cfg["default_vocab_size"] - cfg["default_num_special_tokens"]
    ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in data["vocab"][:n]}
    return tiktoken.Encoding("tekken", pat_str=cfg["pattern"], mergeable_ranks=ranks,
                             special_tokens={}), cfg["default_num_special_tokens"]


def small_vocab(tokens, eos=True) -> fsm.Vocabulary:
    """A toy vocabulary: the given byte strings, then an EOS token (no bytes)."""
    toks = tuple(tokens) + ((None,) if eos else ())
    return fsm.Vocabulary(toks, (len(toks) - 1,) if eos else (), len(toks) + 5)  # padded width


def distinct_keys(pairs: list) -> dict:
    """json.loads' object_pairs_hook that asserts no key comes twice in one object."""
    assert len({k for k, _ in pairs}) == len(pairs), pairs
    return dict(pairs)


def live_tokens_brute_force(a, s) -> set:
    """Token ids whose bytes keep state s of automaton a's DFA alive, one token at a time
    (the oracle masks are compared with)."""
    return {i for i, b in enumerate(a.vocab.token_bytes) if b and a.dfa.walk(s, b) != 0}


def exact_validator(schema):
    """jsonschema's validator of schema (its numbers read as Decimal too) for instances
    read with Decimal numbers (`json.loads(text, parse_float=Decimal)`), as exact as the
    automaton: an integer is a number without a fraction part (jsonschema's own check
    takes only int and float), multipleOf and bounds without rounding."""
    import jsonschema

    def is_integer(checker, inst):
        if isinstance(inst, Decimal):
            return inst.is_finite() and inst == inst.to_integral_value()
        return jsonschema.Draft202012Validator.TYPE_CHECKER.is_type(inst, "integer")
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", is_integer)
    cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)
    return cls(json.loads(json.dumps(schema), parse_float=Decimal))
