"""The CPU batch-1 decode shortcuts against their references: the lone-token KV store
against the torch reference's store, numpy's greedy argmax against torch's, and batch-1
greedy decoding of the embedded model (column-major LM head, row-major down projection,
lone-decode store and attention) against transformers token for token."""
from __future__ import annotations

import pytest
import torch
from oracles import PROMPTS, hf_greedy

from structgen.engine import LLM, SamplingParams
from structgen.engine.attention import attention_backend, store_kv_cache_cpu
from structgen.engine.sampler import greedy_tokens
from structgen.kernels import reference


@pytest.mark.parametrize("slots", [[37], [-1], [0], [5, -1, 63, 2]],
                         ids=["lone", "lone-not-stored", "first-slot", "several"])
def test_store_matches_reference(slots):
    """Key and value as the model passes them (views of a fused projection); caches start
    as NaN, so a slot written by one and not the other shows."""
    g = torch.Generator().manual_seed(len(slots))
    T, kv_heads, head_dim = len(slots), 3, 16
    qkv = torch.randn(T, (4 + 2 * kv_heads) * head_dim, generator=g)
    key = qkv[:, 4 * head_dim:(4 + kv_heads) * head_dim].view(T, kv_heads, head_dim)
    value = qkv[:, (4 + kv_heads) * head_dim:].view(T, kv_heads, head_dim)
    caches = [torch.full((4, 16, kv_heads, head_dim), float("nan")) for _ in range(4)]
    mapping = torch.tensor(slots)
    store_kv_cache_cpu(key, value, caches[0], caches[1], mapping)
    reference.store_kv_cache(key, value, caches[2], caches[3], mapping)
    for ours, ref in ((caches[0], caches[2]), (caches[1], caches[3])):
        assert torch.equal(ours.isnan(), ref.isnan())
        assert torch.equal(ours.nan_to_num(), ref.nan_to_num())
    assert int((~caches[0].isnan()).sum()) == sum(s >= 0 for s in slots) * kv_heads * head_dim


def test_cpu_backend_takes_the_lone_store():
    assert attention_backend("cpu").store_kv_cache is store_kv_cache_cpu
    assert attention_backend("cuda", "torch").store_kv_cache is reference.store_kv_cache


def test_greedy_tokens_match_torch_argmax():
    """Ties (the first maximum wins), NaN (counts as the maximum, the first one), rows all
    -inf, and a strided view, as torch.argmax decides them."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 49152, generator=g)
    logits[0, [7, 3, 40000]] = 50.0
    logits[1, [9000, 12]] = float("nan")
    logits[2] = float("-inf")
    logits[3, 49151] = float("inf")
    logits[4] = 0.0
    logits[5, :100] = -0.0
    logits[5, 100:] = float("-inf")
    with torch.inference_mode():
        for rows in (logits, logits[:, ::3], logits[1:2], logits.t().contiguous().t()):
            ours = greedy_tokens(rows)
            assert ours.dtype == torch.int64
            assert torch.equal(ours, rows.argmax(dim=-1))
    half = logits[:2].to(torch.bfloat16).requires_grad_()     # torch's own argmax there
    assert torch.equal(greedy_tokens(half), half.argmax(dim=-1))


@pytest.fixture(scope="module")
def lone(smol_folder):
    return LLM(smol_folder, max_num_seqs=1, block_size=16, num_kv_blocks=64,
               max_model_len=1024, enable_prefix_caching=False)


def test_batch1_greedy_matches_transformers(lone, smol_folder):
    """One sequence at a time: every decode step is a lone decode (the store and attention
    shortcuts; one-row products over the column-major weights) and samples greedily
    through numpy. Token-identical to transformers."""
    from transformers import AutoModelForCausalLM
    hf = AutoModelForCausalLM.from_pretrained(smol_folder, dtype=torch.float32).eval()
    prompts = [PROMPTS[2], PROMPTS[3]]
    expected = hf_greedy(hf, lone.tokenizer, prompts, 24, min_new_tokens=24)
    for prompt, ref in zip(prompts, expected):
        out = lone.generate(prompt, SamplingParams(max_tokens=24, min_tokens=24), use_tqdm=False)[0]
        assert out.token_ids == ref
    head = lone.model.lm_head.weight
    assert head.stride() == (1, head.shape[0])          # the column-major LM head was used
