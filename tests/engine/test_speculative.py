"""Speculative decoding by prompt lookup: greedy output token-identical to decoding without
it (free, JSON- and regex-guided, through stops, prefix caching, preemption and chunked
prefill), drafts checked and rolled back by the matcher, blocks freed; rejection sampling
keeps the target distribution; configuration errors name the field."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from oracles import FakeConstraint

from structgen.engine import EngineConfig, SamplingParams
from structgen.engine.block_manager import chain_hash
from structgen.engine.config import SpeculativeConfig
from structgen.engine.sampler import rejection_sample
from structgen.engine.speculative import check_drafts, ngram_draft

SPEC = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
MAX_NEW = 40
DOCS = [
    "Invoice 4471 was issued by Northwind Traders, 12 Harbour Street, Portsmouth, on 3 March 2024 to "
    "Contoso Ltd for 14 crates of green tea at 23.50 EUR each, total 329.00 EUR, due within 30 days.",
    "Dr. Amelia Hart, a marine biologist at the University of Tasmania in Hobart, published a study on "
    "2 June 2023 showing that kelp forests off the east coast shrank by 95 percent since 1950.",
]
SCHEMA = {"type": "object", "properties": {"person": {"type": "string"}, "place": {"type": "string"},
                                           "date": {"type": "string"}},
          "required": ["person", "place", "date"], "additionalProperties": False}
REGEX = r"[A-Z][^\n]{10,300}\."


def chat(llm, content: str) -> list[int]:
    text = llm.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                             add_generation_prompt=True)
    return llm.tokenizer(text, add_special_tokens=False).input_ids


def extraction_requests(llm, **kw):
    """Prompts whose outputs copy spans of them: free, JSON-guided, regex-guided."""
    copy = [chat(llm, "Repeat the following text word for word.\n\n" + d) for d in DOCS]
    extract = [chat(llm, d + "\nExtract the main person or company, the place and the date as JSON.")
               for d in DOCS]
    prompts = copy + extract + copy
    params = ([SamplingParams(max_tokens=MAX_NEW, **kw)] * 2
              + [SamplingParams(max_tokens=MAX_NEW, constraint=("json", SCHEMA), **kw)] * 2
              + [SamplingParams(max_tokens=MAX_NEW, constraint=("regex", REGEX), **kw)] * 2)
    return prompts, params


def assert_all_free(engine):
    bm = engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks and all(r == 0 for r in bm.ref_counts)
    assert not engine.scheduler.running and not engine.scheduler.waiting


def checked_steps(engine):
    """Wrap engine.step: after every step no sequence holds drafts or blocks past its
    computed tokens (rejected drafts' blocks went back); record each result's tokens."""
    real_step, real_execute = engine.step, engine.runner.execute
    produced: dict[int, list[list[int]]] = {}

    def execute(batch, eos_ids):
        results = real_execute(batch, eos_ids)
        for r in results:
            produced.setdefault(r.seq.seq_id, []).append(list(r.tokens))
        return results

    def step():
        finished = real_step()
        bs = engine.block_manager.block_size
        for seq in engine.scheduler.running:
            assert not seq.draft_token_ids and seq.draft_masks is None
            assert len(seq.block_table) == -(-seq.num_computed_tokens // bs)
        return finished

    engine.step, engine.runner.execute = step, execute
    return produced


def generate(engine, prompts, params):
    outs = engine.generate(prompts, params, use_tqdm=False)
    assert_all_free(engine)
    return outs


@pytest.fixture(scope="module")
def reference(llm):
    """Outputs without speculation (the default engine)."""
    return [o.token_ids for o in generate(llm, *extraction_requests(llm))]


# -- configuration ---------------------------------------------------------------------------
@pytest.mark.parametrize("spec,message", [
    ({"method": "ngram"}, r"speculative_config.num_speculative_tokens is required"),
    ({"num_speculative_tokens": 3}, r"speculative_config.method is required"),
    ({**SPEC, "lookahead": 2}, r"unknown key\(s\) \['lookahead'\]"),
    ({**SPEC, "method": "eagle"}, r"speculative_config.method must be 'ngram' or 'draft_model', not 'eagle'"),
    ({"method": "draft_model", "num_speculative_tokens": 3}, r"speculative_config.model \(the draft model's"),
    ({"method": "draft_model", "model": "x", "num_speculative_tokens": 3, "prompt_lookup_max": 2},
     r"speculative_config.prompt_lookup_max is for method='ngram'"),
    ({**SPEC, "num_speculative_tokens": 0}, r"num_speculative_tokens must be an integer >= 1, not 0"),
    ({**SPEC, "num_speculative_tokens": 2.0}, r"num_speculative_tokens must be an integer >= 1, not 2.0"),
    ({**SPEC, "prompt_lookup_min": 0}, r"prompt_lookup_min must be an integer >= 1, not 0"),
    ({**SPEC, "prompt_lookup_min": 4}, r"prompt_lookup_min=4 must be <= prompt_lookup_max=3"),
    ({**SPEC, "model": "smollm2"}, r"speculative_config.model is for method='draft_model'"),
])
def test_config_errors_name_the_field(spec, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(speculative_config=spec)


def test_config_defaults_and_forms():
    assert EngineConfig().speculative_config is None
    c = EngineConfig(speculative_config={"method": "ngram", "num_speculative_tokens": 4}).speculative_config
    assert (c.prompt_lookup_min, c.prompt_lookup_max) == (5, 5)          # vLLM's default
    c = SpeculativeConfig(method="ngram", num_speculative_tokens=2, prompt_lookup_min=2)
    assert c.prompt_lookup_max == 2 and EngineConfig(speculative_config=c).speculative_config is c
    with pytest.raises(ValueError, match="must be a dict or a SpeculativeConfig, not str"):
        EngineConfig(speculative_config="ngram")


# -- drafting --------------------------------------------------------------------------------
def test_ngram_draft_takes_the_longest_suffix_latest_occurrence():
    toks = [1, 2, 3, 4, 9, 2, 3, 5, 6, 3]
    assert ngram_draft(toks, 1, 1, 3) == [5, 6, 3]        # [3]: latest earlier occurrence at 6
    assert ngram_draft(toks + [4], 1, 3, 3) == [9, 2, 3]  # [3, 4] occurs only at 2..3
    assert ngram_draft(toks + [4], 3, 3, 3) == []         # no 3-token match
    assert ngram_draft([7, 8, 7, 8], 1, 4, 9) == [7, 8]   # [7, 8] at 0..1: only what follows, up to the end
    assert ngram_draft([5], 1, 3, 2) == [] and ngram_draft([], 1, 3, 2) == []
    assert ngram_draft([4, 4, 4], 2, 2, 5) == [4]


def test_check_drafts_stops_at_the_first_rejected_token_and_rolls_back():
    vocab, eos = 64, 63
    words = (vocab + 31) // 32
    c = FakeConstraint(allowed=[5, 6, 7], length=3, eos=eos, vocab_size=vocab, forced=[40])
    m = c.matcher()
    assert m.accept_token(40)
    drafts, masks = check_drafts(m, [5, 6, 9, 7], words)
    assert drafts == [5, 6] and masks.shape == (3, words)
    assert m.accepted == [40]                                   # rolled back to where it was
    allowed = [sorted(t for t in range(vocab) if (int(row[t >> 5]) >> (t & 31)) & 1) for row in masks]
    assert allowed == [[5, 6, 7], [5, 6, 7], [5, 6, 7]]          # before 5, before 6, before 9
    drafts, masks = check_drafts(m, [7, 7, 7, eos, 5], words)    # EOS ends the drafts
    assert drafts == [7, 7, 7, eos] and len(masks) == 5 and m.accepted == [40]


# -- greedy: token-identical ------------------------------------------------------------------
@pytest.mark.parametrize("config", [
    {},
    pytest.param({"enable_prefix_caching": False}, marks=pytest.mark.slow),    # (slow: CI time)
    pytest.param({"enable_chunked_prefill": False}, marks=pytest.mark.slow),
    {"max_num_batched_tokens": 24, "block_size": 4},                           # chunked prefill, tight budget
    {"num_kv_blocks": 24, "block_size": 8, "max_model_len": 192},              # preemption
], ids=["default", "no-prefix-cache", "no-chunked-prefill", "small-chunks", "preemption"])
def test_greedy_output_is_identical_to_no_speculation(llm, reference, config):
    engine = llm.with_config(speculative_config=SPEC, **config)
    checked_steps(engine)
    outs = generate(engine, *extraction_requests(llm))
    assert [o.token_ids for o in outs] == reference
    stats = engine.speculator.stats
    assert stats["accepted_tokens"] > 0 and engine.stats["forced_tokens"] > 0     # JSON keys jump forward
    if "num_kv_blocks" in config:
        assert engine.scheduler.num_preemptions > 0


def test_stop_string_and_eos_inside_accepted_drafts(llm):
    engine = llm.with_config(speculative_config=SPEC)
    produced = checked_steps(engine)
    prompt = chat(llm, "Repeat the following text word for word.\n\n" + DOCS[1])
    params = [SamplingParams(max_tokens=60),                          # ends with EOS
              SamplingParams(max_tokens=60, stop=["Hobart"]),
              SamplingParams(max_tokens=60, stop=["Hobart"], include_stop_str_in_output=True),
              SamplingParams(max_tokens=60, stop_token_ids=llm.tokenizer.encode(" kelp", add_special_tokens=False)[:1]),
              SamplingParams(max_tokens=9), SamplingParams(max_tokens=22)]
    outs = generate(engine, [prompt] * len(params), params)
    ref = generate(llm, [prompt] * len(params), params)
    def ending(o):
        return o.token_ids, o.text, o.finish_reason, o.outputs[0].stop_reason
    assert [ending(o) for o in outs] == [ending(o) for o in ref]
    assert outs[0].token_ids[-1] in llm.eos_token_ids and outs[1].text.endswith("in ")
    assert [len(o.token_ids) for o in outs[4:]] == [9, 22]
    # The EOS and stop cases ended inside a verified run of drafts: tokens after the end
    # were produced and dropped.
    for i in range(4):
        assert sum(map(len, produced[i])) > len(outs[i].token_ids), i
        assert len(produced[i][-1]) > 1


def test_prefix_cache_holds_only_verified_tokens(llm):
    """Blocks filled during verification are hashed only over the sequence's own tokens, and
    a later prompt that continues an output reuses them with identical results."""
    engine = llm.with_config(speculative_config=SPEC, block_size=4, num_kv_blocks=512)
    prompts, params = extraction_requests(llm)
    outs = generate(engine, prompts, params)
    real = set()
    for o in outs:
        ids, prev = o.prompt_token_ids + o.token_ids, None
        for i in range(len(ids) // 4):
            prev = chain_hash(prev, ids[4 * i:4 * i + 4])
            real.add(prev)
    bm = engine.block_manager
    assert bm.hash_to_block and set(bm.hash_to_block) <= real
    follow = [o.prompt_token_ids + o.token_ids[:30] for o in outs[:2]]
    again = generate(engine, follow, SamplingParams(max_tokens=16))
    assert all(o.num_cached_tokens >= len(f) - 4 for o, f in zip(again, follow))
    assert [o.token_ids for o in again] == [o.token_ids for o in generate(llm, follow, SamplingParams(max_tokens=16))]


def test_logprobs_and_penalties_match_no_speculation(llm):
    engine = llm.with_config(speculative_config=SPEC)
    prompts, params = extraction_requests(llm, logprobs=2, repetition_penalty=1.1)
    prompts, params = prompts[::2], params[::2]
    outs, ref = generate(engine, prompts, params), generate(llm, prompts, params)
    assert engine.speculator.stats["accepted_tokens"] > 0
    for o, r in zip(outs, ref):
        assert o.token_ids == r.token_ids
        for a, b in zip(o.logprobs, r.logprobs):
            if b is None:                                   # a forced token that ended the sequence
                assert a is None
                continue
            assert set(a) == set(b)
            assert all(abs(a[t] - b[t]) < 1e-3 for t in a)


# -- sampling -----------------------------------------------------------------------------------
def test_rejection_sampling_keeps_the_target_distribution():
    """Chi-square over 12000 draws: the first token follows p0; given the first draft was
    accepted, the second follows p1."""
    g = torch.Generator().manual_seed(0)
    probs = torch.tensor([[0.1, 0.4, 0.2, 0.3, 0.0],
                          [0.5, 0.1, 0.1, 0.2, 0.1],
                          [0.2, 0.2, 0.2, 0.2, 0.2]])
    drafts = [1, 3]
    first, second = np.zeros(5), np.zeros(5)
    for _ in range(12000):
        a, t = rejection_sample(probs, drafts, g)
        out = drafts[:a] + [t]
        first[out[0]] += 1
        if out[0] == drafts[0]:
            second[out[1]] += 1

    def chi2(counts, p):
        keep = p > 0
        assert counts[~keep].sum() == 0                      # never a zero-probability token
        e = counts.sum() * p[keep]
        return float(((counts[keep] - e) ** 2 / e).sum())
    # 99.9% quantiles of chi-square with 3 and 4 degrees of freedom: 16.27, 18.47.
    assert chi2(first, probs[0].numpy()) < 16.27
    assert chi2(second, probs[1].numpy()) < 18.47


def test_sampled_requests_speculate_validly_and_reproducibly(llm):
    engine = llm.with_config(speculative_config=SPEC)
    checked_steps(engine)
    prompts, params = extraction_requests(llm, temperature=0.3, seed=7)
    outs = generate(engine, prompts, params)
    assert engine.speculator.stats["accepted_tokens"] > 0
    for o in outs[2:4]:
        if o.finish_reason == "constraint":
            assert set(json.loads(o.text)) <= {"person", "place", "date"}
    assert [o.token_ids for o in generate(engine, prompts, params)] == [o.token_ids for o in outs]


# -- faults -------------------------------------------------------------------------------------
def test_a_matcher_failing_while_drafting_fails_its_request(llm, reference):
    class AnyMatcher:
        """Allows everything; cannot roll back."""
        def fill_next_token_bitmask(self, row):
            row[:] = -1

        def accept_token(self, token):
            return True

        def is_terminated(self):
            return False

        def forced_tokens(self):
            return []

        def rollback(self, n):
            raise RuntimeError("rollback broke")

    class Broken:
        def matcher(self):
            return AnyMatcher()
    engine = llm.with_config(speculative_config=SPEC)
    prompts, params = extraction_requests(llm)
    params[0] = SamplingParams(max_tokens=MAX_NEW, constraint=Broken())
    outs = generate(engine, prompts, params)
    assert outs[0].finish_reason == "error" and "while checking drafts" in outs[0].error
    assert "RuntimeError: rollback broke" in outs[0].error
    assert [o.token_ids for o in outs[1:]] == reference[1:]
