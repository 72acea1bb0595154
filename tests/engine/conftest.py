"""Engine tests: the embedded model's folder, and a small engine on it (module-scoped: one
per test file; prompts, hf_greedy and FakeConstraint are in oracles.py). One torch thread:
tests/conftest.py."""
from __future__ import annotations

import pytest
import torch

from structgen.engine import LLM


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


# A tiny random-weight Llama with the embedded model's tokenizer (vocabulary 49152), so
# that real constraints compile: tensor-parallel and data-parallel tests.
TINY_LLAMA = dict(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  rms_norm_eps=1e-6, initializer_range=0.2, tie_word_embeddings=False)


@pytest.fixture(scope="session")
def tiny_llama(smol_folder, tmp_path_factory):
    """(a model folder: config, safetensors and tokenizer; its weights by transformers' names)."""
    import shutil

    from transformers import AutoModelForCausalLM, LlamaConfig
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(LlamaConfig(**TINY_LLAMA), dtype=torch.float32).eval()
    folder = tmp_path_factory.mktemp("tiny-llama")
    hf.save_pretrained(folder)
    for f in smol_folder.iterdir():
        if f.is_file() and f.name != "config.json" and f.suffix != ".safetensors":
            shutil.copy(f, folder / f.name)
    return folder, dict(hf.state_dict())
