"""prompt_logprobs and best_of on the embedded SmolLM2-135M, against transformers' logits."""
from __future__ import annotations

import pytest
import torch
from oracles import PROMPTS

from structgen.engine import SamplingParams


@pytest.fixture(scope="module")
def hf(smol_folder):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(smol_folder, dtype=torch.float32).eval()


def hf_logprobs(hf, ids) -> torch.Tensor:
    """log_softmax of transformers' logits at every position of ids."""
    with torch.inference_mode():
        return torch.log_softmax(hf(torch.tensor([ids])).logits[0].float(), -1)


def assert_prompt_logprobs(out, hf, k):
    ids = out.prompt_token_ids
    ref = hf_logprobs(hf, ids)
    entries = out.prompt_logprobs
    assert len(entries) == len(ids) and entries[0] is None
    for i in range(1, len(ids)):
        assert list(entries[i])[0] == ids[i]            # the prompt token first
        assert set(torch.topk(ref[i - 1], k).indices.tolist()) <= set(entries[i])
        for t, v in entries[i].items():
            assert v == pytest.approx(ref[i - 1, t].item(), abs=1e-3)


@pytest.mark.parametrize("config", [
    {},
    {"max_num_batched_tokens": 24, "block_size": 4},                        # prompts over many chunks
    {"num_kv_blocks": 10, "block_size": 8, "max_num_batched_tokens": 64},  # preempted, recomputed
], ids=["default", "small-chunks", "preemption"])
def test_prompt_logprobs_match_transformers(llm, hf, config):
    engine = llm.with_config(**config) if config else llm
    outs = engine.generate(PROMPTS, SamplingParams(max_tokens=12, prompt_logprobs=2), use_tqdm=False)
    for out in outs:
        assert out.error is None
        assert_prompt_logprobs(out, hf, 2)
    if "num_kv_blocks" in config:
        assert engine.scheduler.num_preemptions > 0


def test_prompt_logprobs_bypass_the_prefix_cache(llm, hf):
    """A cached prefix has KV but no logits: a request that wants prompt logprobs computes its
    whole prompt (and still publishes its blocks), one without hits the cache."""
    engine = llm.with_config(block_size=8)
    plain = SamplingParams(max_tokens=2)
    engine.generate(PROMPTS[3], plain, use_tqdm=False)
    wants = engine.generate(PROMPTS[3:5], SamplingParams(max_tokens=2, prompt_logprobs=0, n=2), use_tqdm=False)
    for out in wants:
        assert out.num_cached_tokens == 0
        assert_prompt_logprobs(out, hf, 0)
    assert engine.generate(PROMPTS[4], plain, use_tqdm=False)[0].num_cached_tokens >= 48
    assert engine.generate(PROMPTS[3], plain, use_tqdm=False)[0].prompt_logprobs is None


def test_best_of_returns_the_most_likely_samples(llm, hf):
    """best_of=m draws the same m samples as n=m with the same seed (sample i uses seed + i)
    and returns the n with the highest cumulative logprob, which transformers recomputes."""
    prompt, seed, m = PROMPTS[0], 7, 6
    every = llm.generate(prompt, SamplingParams(n=m, temperature=1.0, seed=seed, max_tokens=8, logprobs=0),
                         use_tqdm=False)[0]
    ids = every.prompt_token_ids
    totals = []
    for c in every.outputs:
        lp = hf_logprobs(hf, ids + c.token_ids)
        total = sum(lp[len(ids) - 1 + j, t].item() for j, t in enumerate(c.token_ids))
        assert c.cumulative_logprob == pytest.approx(total, abs=1e-3)
        totals.append((total, c.token_ids))
    totals.sort(key=lambda tt: -tt[0])
    best = llm.generate(prompt, SamplingParams(n=2, best_of=m, temperature=1.0, seed=seed, max_tokens=8),
                        use_tqdm=False)[0]
    assert [c.token_ids for c in best.outputs] == [t for _, t in totals[:2]]
    assert [c.index for c in best.outputs] == [0, 1]
    assert all(c.logprobs is None for c in best.outputs)          # not asked for
    assert [c.cumulative_logprob for c in best.outputs] == pytest.approx([t for t, _ in totals[:2]], abs=1e-3)


def test_best_of_and_prompt_logprobs_errors(llm):
    with pytest.raises(ValueError, match=r"best_of must be in \[3, 128\]"):
        SamplingParams(n=3, best_of=2, temperature=1.0)
    with pytest.raises(ValueError, match="best_of=4 needs sampling"):
        SamplingParams(best_of=4)
    with pytest.raises(ValueError, match="prompt_logprobs must be in"):
        SamplingParams(prompt_logprobs=21)
    with pytest.raises(ValueError, match="no best_of"):
        next(llm.generate_stream("Hi", SamplingParams(best_of=2, temperature=1.0)))
