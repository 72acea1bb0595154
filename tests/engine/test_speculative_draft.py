"""Speculative decoding with a draft model (engine/draft_model.py), on tiny random-weight
Llamas with the embedded tokenizer: greedy output token-identical to decoding without it
(free, regex- and JSON-guided with jump-forward, preemption), every draft accepted when
the draft is the target, sampled output distributed as the target's (two-sample chi-square
against decoding without speculation), a mismatched vocabulary refused, a failing draft
failing its request alone, and both caches' blocks all free at the end."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from structgen.engine import LLM, SamplingParams
from structgen.engine.draft_model import check_same_vocabulary
from structgen.engine.model import ModelConfig
from structgen.engine.sampler import rejection_sample

MAX_NEW = 20
PROMPTS = ["The invoice was issued by Northwind Traders in Portsmouth on 3 March.",
           "Dr. Amelia Hart works at the University of Tasmania in Hobart.",
           "Repeat: one two three four five six seven.",
           "A list of colours: red, green, blue,",
           "Contoso Ltd ordered 14 crates of green tea."]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "city": {"type": "string", "maxLength": 12}},
          "required": ["name", "city"], "additionalProperties": False}
CONSTRAINTS = [None, ("regex", r"[a-z]{2,6}( [a-z]{2,6}){1,4}\."), ("json", SCHEMA), None, ("json", SCHEMA)]


def tiny_folder(tiny_llama, tmp_path_factory, name: str, seed: int, **overrides):
    """A tiny Llama like conftest's, with other random weights (or config), same tokenizer files."""
    from transformers import AutoModelForCausalLM, LlamaConfig
    src, _ = tiny_llama
    torch.manual_seed(seed)
    hf = AutoModelForCausalLM.from_config(LlamaConfig.from_pretrained(src, **overrides), dtype=torch.float32)
    folder = tmp_path_factory.mktemp(name)
    hf.save_pretrained(folder)
    for f in src.iterdir():
        if f.is_file() and f.name != "config.json" and f.suffix != ".safetensors":
            shutil.copy(f, folder / f.name)
    return folder


@pytest.fixture(scope="module")
def other_draft(tiny_llama, tmp_path_factory):
    """A draft that disagrees with the target: other random weights, one layer."""
    return tiny_folder(tiny_llama, tmp_path_factory, "tiny-draft", seed=1, num_hidden_layers=1)


@pytest.fixture(scope="module")
def target(tiny_llama):
    return LLM(tiny_llama[0], max_num_seqs=8, block_size=8, num_kv_blocks=96, max_model_len=128)


def params(**kw):
    return [SamplingParams(max_tokens=MAX_NEW, constraint=c, **kw) for c in CONSTRAINTS]


def spec(draft, k=4):
    return {"method": "draft_model", "model": str(draft), "num_speculative_tokens": k}


def assert_all_free(engine):
    for bm in (engine.block_manager, engine.speculator.draft_model.block_manager):
        assert bm.num_free_blocks == bm.num_blocks and all(r == 0 for r in bm.ref_counts)
    assert not engine.speculator.draft_model.shadows
    assert not engine.scheduler.running and not engine.scheduler.waiting


def checked(engine):
    """After every step no sequence holds drafts or target blocks past its computed tokens,
    and no draft cache holds blocks past its shadow's computed tokens."""
    real_step = engine.step

    def step():
        finished = real_step()
        bs = engine.block_manager.block_size
        for seq in engine.scheduler.running:
            assert not seq.draft_token_ids and seq.draft_masks is None and seq.draft_probs is None
            assert len(seq.block_table) == -(-seq.num_computed_tokens // bs)
        for _, shadow in engine.speculator.draft_model.shadows.values():
            assert len(shadow.block_table) == -(-shadow.num_computed_tokens // bs)
        return finished

    engine.step = step
    return engine


def generate(engine, prompts, ps):
    outs = engine.generate(prompts, ps, use_tqdm=False)
    if engine.speculator is not None:
        assert_all_free(engine)
    return outs


@pytest.fixture(scope="module")
def reference(target):
    return [o.token_ids for o in generate(target, PROMPTS, params())]


# -- greedy: token-identical ------------------------------------------------------------------
@pytest.mark.parametrize("config", [
    {},
    {"num_kv_blocks": 10, "max_model_len": 64},                      # preemption
    {"max_num_batched_tokens": 12, "enable_prefix_caching": False},    # chunked prefill, no prefix cache
], ids=["default", "preemption", "small-chunks"])
def test_greedy_output_is_identical_with_a_disagreeing_draft(target, reference, other_draft, config):
    engine = checked(target.with_config(speculative_config=spec(other_draft), **config))
    outs = generate(engine, PROMPTS, params())
    assert [o.token_ids for o in outs] == reference
    st = engine.speculator.stats
    assert st["draft_tokens"] > 0 and engine.stats["forced_tokens"] > 0     # JSON keys jump forward
    assert st["accepted_tokens"] < st["draft_tokens"]                       # it does disagree
    if "num_kv_blocks" in config:
        assert engine.scheduler.num_preemptions > 0


def test_the_target_as_its_own_draft_has_every_draft_accepted(target, reference, tiny_llama):
    engine = checked(target.with_config(speculative_config=spec(tiny_llama[0], k=5)))
    outs = generate(engine, PROMPTS, params())
    assert [o.token_ids for o in outs] == reference
    st = engine.speculator.stats
    assert st["draft_tokens"] > 2 * len(PROMPTS) and st["accepted_tokens"] == st["draft_tokens"]
    # Every step of a sequence past its first token produced its drafts plus one, so steps
    # are fewer than tokens.
    assert engine.stats["steps"] < sum(len(r) for r in reference) / 2
    # Sampled: the draft's distribution q equals the target's p, so min(1, p/q) accepts
    # (all but rounding): a verifier that ignored q would accept with p(t) < 1 only.
    st.update(draft_tokens=0, accepted_tokens=0)
    generate(engine, PROMPTS, params(temperature=1.0, top_k=50, seed=5))
    assert st["draft_tokens"] > 2 * len(PROMPTS) and st["accepted_tokens"] >= 0.97 * st["draft_tokens"]


def test_seeded_sampling_is_valid_and_reproducible(target, other_draft):
    engine = checked(target.with_config(speculative_config=spec(other_draft)))
    ps = params(temperature=0.8, top_p=0.95, seed=3)
    outs = generate(engine, PROMPTS, ps)
    assert engine.speculator.stats["accepted_tokens"] > 0
    for o, c in zip(outs, CONSTRAINTS):
        if c is not None and o.finish_reason == "constraint":
            assert o.text
    assert all(o.finish_reason in ("length", "stop", "constraint") for o in outs)
    assert [o.token_ids for o in generate(engine, PROMPTS, ps)] == [o.token_ids for o in outs]


# -- sampling keeps the target distribution ------------------------------------------------------
def test_rejection_sampling_with_draft_probabilities_keeps_the_target_distribution():
    """Drafts drawn from q, settled against p: the first token follows p0; given the first
    draft was accepted, the second follows p1 (chi-square, 99.9% quantiles)."""
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([[0.1, 0.4, 0.2, 0.3, 0.0],
                      [0.5, 0.1, 0.1, 0.2, 0.1],
                      [0.2, 0.2, 0.2, 0.2, 0.2]])
    q = torch.tensor([[0.4, 0.1, 0.1, 0.1, 0.3],
                      [0.1, 0.1, 0.6, 0.1, 0.1]])
    first, second = np.zeros(5), np.zeros(5)
    for _ in range(12000):
        drafts = [int(torch.multinomial(q[j], 1, generator=g)) for j in range(2)]
        a, t = rejection_sample(p, drafts, g, q)
        out = drafts[:a] + [t]
        first[out[0]] += 1
        if a >= 1:
            second[out[1]] += 1

    def chi2(counts, probs):
        keep = probs > 0
        assert counts[~keep].sum() == 0                      # never a zero-probability token
        e = counts.sum() * probs[keep]
        return float(((counts[keep] - e) ** 2 / e).sum())
    assert chi2(first, p[0].numpy()) < 16.27                 # 3 degrees of freedom
    assert chi2(second, p[1].numpy()) < 18.47                # 4


def two_sample_chi2(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """Chi-square statistic that two equal-size samples' counts share one distribution,
    and its degrees of freedom."""
    keep = (a + b) > 0
    a, b = a[keep], b[keep]
    return float(((a - b) ** 2 / (a + b)).sum()), int(keep.sum()) - 1


# 99.9% quantiles of chi-square by degrees of freedom.
CHI2_999 = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46, 7: 24.32, 8: 26.12, 9: 27.88,
            10: 29.59, 11: 31.26, 12: 32.91, 13: 34.53, 14: 36.12, 15: 37.70}


@pytest.mark.slow   # (CI time; test_rejection_sampling_with_draft_probabilities_... checks the rule on the sampler alone)
def test_sampled_output_follows_the_target_distribution(target, other_draft):
    """500 samples of four digits (regex [0-3]{4}: one token each) at temperature 1, with and
    without a disagreeing draft: the digits at positions 1-3 (drafted ones; the first is
    always sampled alone) have the same distribution, each and in pairs."""
    engine = target.with_config(speculative_config=spec(other_draft, k=3), max_num_seqs=64, num_kv_blocks=320)
    digits = [target.tokenizer.convert_tokens_to_ids(str(d)) for d in range(4)]
    n = 500
    ps = [SamplingParams(max_tokens=4, temperature=1.0, seed=11 + i, constraint=("regex", "[0-3]{4}"))
          for i in range(n)]

    def counts(llm):
        outs = llm.generate([PROMPTS[0]] * n, ps, use_tqdm=False)
        assert all(len(o.token_ids) == 4 and set(o.token_ids) <= set(digits) for o in outs)
        tok = np.array([[digits.index(t) for t in o.token_ids] for o in outs])
        return [np.bincount(tok[:, j], minlength=4) for j in (1, 2, 3)], \
               [np.bincount(4 * tok[:, j] + tok[:, j + 1], minlength=16) for j in (1, 2)]
    base = counts(target.with_config(max_num_seqs=64, num_kv_blocks=320))
    spec_counts = counts(engine)
    for a, b in zip(base[0] + base[1], spec_counts[0] + spec_counts[1]):
        stat, df = two_sample_chi2(a, b)
        assert stat < CHI2_999[df], (a, b)
    st = engine.speculator.stats
    assert 0 < st["accepted_tokens"] < st["draft_tokens"]        # drafts were both taken and rejected
    assert_all_free(engine)


# -- refusals and faults -----------------------------------------------------------------------
def test_a_draft_with_another_vocabulary_size_is_refused(tiny_llama, tmp_path_factory, target):
    other = tiny_folder(tiny_llama, tmp_path_factory, "tiny-other-vocab", seed=2, vocab_size=49160)
    with pytest.raises(ValueError, match=r"the draft model '.*tiny-other-vocab.*' does not share the "
                                         r"vocabulary of the target '.*': vocab_size 49160 in the draft, "
                                         r"49152 in the target"):
        target.with_config(speculative_config=spec(other))


def test_a_draft_with_fewer_positions_than_max_model_len_is_refused(tiny_llama, tmp_path_factory, target):
    short = tiny_folder(tiny_llama, tmp_path_factory, "tiny-short", seed=2, max_position_embeddings=64)
    with pytest.raises(ValueError, match=r"has max_position_embeddings=64, under the target's max_model_len=128"):
        target.with_config(speculative_config=spec(short))
    assert target.with_config(speculative_config=spec(short), max_model_len=64).speculator.draft_model


def test_a_draft_with_other_token_strings_is_refused():
    class Tok:
        def __init__(self, vocab, eos):
            self.vocab, self.eos_token_id = vocab, eos

        def get_vocab(self):
            return dict(self.vocab)
    cfg = ModelConfig.__new__(ModelConfig)
    cfg.vocab_size = 4
    a = Tok({"a": 0, "b": 1, "c": 2, "</s>": 3}, 3)
    check_same_vocabulary("t", cfg, a, "d", cfg, Tok(a.vocab, 3))
    with pytest.raises(ValueError, match=r"'d' does not share the vocabulary of the target 't': "
                                         r"token 1 is 'b' in the target and 'x' in the draft"):
        check_same_vocabulary("t", cfg, a, "d", cfg, Tok({"a": 0, "x": 1, "c": 2, "</s>": 3}, 3))
    with pytest.raises(ValueError, match="eos_token_id is 3 in the target and 2 in the draft"):
        check_same_vocabulary("t", cfg, a, "d", cfg, Tok(a.vocab, 2))


def test_a_failing_draft_model_fails_only_its_request(target, reference, other_draft):
    engine = target.with_config(speculative_config=spec(other_draft))
    dm = engine.speculator.draft_model
    real = dm.runner.forward_logits
    poison = target.tokenizer(PROMPTS[2]).input_ids

    def forward_logits(batch):
        if any(s.token_ids[:len(poison)] == poison for s, _ in batch):
            raise RuntimeError("draft broke")
        return real(batch)
    dm.runner.forward_logits = forward_logits
    outs = generate(engine, PROMPTS, params())
    assert outs[2].finish_reason == "error"
    assert "the draft model failed while drafting: RuntimeError: draft broke" in outs[2].error
    assert [o.token_ids for i, o in enumerate(outs) if i != 2] == [r for i, r in enumerate(reference) if i != 2]
    assert engine.speculator.stats["accepted_tokens"] > 0


def test_no_drafts_for_a_chunk_writing_a_block_another_sequence_matched_this_step():
    """A re-admitted sequence's chunk fills a block that is published when scheduled; a
    sequence admitted after it matches that block. Allocating draft slots then would copy
    the block on write, and the other sequence would read a copy nobody writes: no drafts."""
    from structgen.engine.block_manager import BlockManager
    from structgen.engine.config import SpeculativeConfig
    from structgen.engine.sequence import Sequence
    from structgen.engine.speculative import Speculator
    bm = BlockManager(16, 4)
    a = Sequence(0, 0, 0, list(range(10)), 9, SamplingParams(max_tokens=20))   # one output token
    a.num_computed_tokens = 4
    a.block_table = [bm._take_free_block()]
    assert bm.allocate(a, 6)
    bm.register_full_blocks(a, 10)
    b = Sequence(1, 1, 0, list(range(9)), 9, SamplingParams())
    bm.match_prefix(b)
    assert b.block_table == a.block_table[:2]                  # block 1, a's write block, is shared
    sp = Speculator(SpeculativeConfig("ngram", 4), bm, 64, 128, 1, set())
    assert sp._room(a, 6) == 0
    b2 = Sequence(2, 2, 0, list(range(10)), 9, SamplingParams(max_tokens=20))
    assert bm.allocate(b2, 10)
    assert sp._room(b2, 10) == 4                               # not shared: drafts as usual
    assert bm.allocate(a, 7) and bm.pop_copies()               # the copy the guard avoids


# -- the draft's cache size and its chunked catch-up -------------------------------------------
def test_a_draft_cache_for_about_one_sequence_skips_drafting_but_not_output(target, reference, other_draft):
    """speculative_config.num_kv_blocks=8 at max_model_len=64 (block 8): one sequence's worth.
    Sequences whose shadow gets no blocks decode without drafts, nothing fails, the output is
    the same, and every block of both caches is free at the end."""
    engine = checked(target.with_config(speculative_config={**spec(other_draft), "num_kv_blocks": 8},
                                        max_model_len=64))
    dm = engine.speculator.draft_model
    assert dm.block_manager.num_blocks == 8 < engine.block_manager.num_blocks
    refused = []
    real = dm.block_manager.allocate

    def allocate(seq, n):
        ok = real(seq, n)
        refused.append(not ok)
        return ok
    dm.block_manager.allocate = allocate
    outs = generate(engine, PROMPTS, params())
    assert [o.token_ids for o in outs] == reference
    assert any(refused) and engine.speculator.stats["draft_tokens"] > 0      # both: skipped and drafted


def test_the_draft_cache_size_is_checked_at_start_up(target, other_draft):
    with pytest.raises(ValueError, match=r"speculative_config.num_kv_blocks=7 must be an integer >= 8: the "
                                         r"blocks of 8 tokens one sequence of max_model_len=64 needs"):
        target.with_config(speculative_config={**spec(other_draft), "num_kv_blocks": 7}, max_model_len=64)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match=r"speculative_config.num_kv_blocks must be an integer >= 1"):
            target.with_config(speculative_config={**spec(other_draft), "num_kv_blocks": bad})
    with pytest.raises(ValueError, match=r"speculative_config.num_kv_blocks is for method='draft_model'"):
        target.with_config(speculative_config={"method": "ngram", "num_speculative_tokens": 2,
                                               "num_kv_blocks": 16})


def test_the_first_catch_up_is_chunked_by_the_token_budget(target, reference, other_draft):
    """max_num_batched_tokens=12, prompts longer than that: no draft forward over 12 tokens, a
    prompt's catch-up is split over steps, and the output is the same."""
    budget = 12
    assert max(len(target.tokenizer(p).input_ids) for p in PROMPTS) > budget
    engine = checked(target.with_config(speculative_config=spec(other_draft), max_num_batched_tokens=budget))
    dm = engine.speculator.draft_model
    sizes, chunked = [], []
    real = dm.runner.forward_logits

    def forward_logits(batch):
        sizes.append(sum(n for _, n in batch))
        chunked.extend(s.num_computed_tokens + n < s.num_tokens for s, n in batch)
        return real(batch)
    dm.runner.forward_logits = forward_logits
    outs = generate(engine, PROMPTS, params())
    assert [o.token_ids for o in outs] == reference
    assert max(sizes) <= budget and any(chunked)
    assert engine.speculator.stats["draft_tokens"] > 0


def test_a_draft_cache_too_small_for_the_batch_lets_every_sequence_draft_in_turn(target, other_draft):
    """speculative_config.num_kv_blocks=8 at max_model_len=64 (block 8) holds the shadows
    of two or three of six sequences at first and one at the end. The shadows take turns
    (DraftModel.ROTATE_AFTER): a spy on the proposals sees every sequence draft at some
    point and the cache never stuck (shadows holding blocks that none of them can grow
    into); the greedy output stays token-identical to decoding without speculation, and
    every block of both caches is free at the end."""
    prompts = PROMPTS + ["Seven swans swam south, singing softly."]
    ps = [SamplingParams(max_tokens=40, ignore_eos=True)] * len(prompts)
    want = [o.token_ids for o in generate(target, prompts, ps)]
    engine = checked(target.with_config(speculative_config={**spec(other_draft), "num_kv_blocks": 8},
                                        max_model_len=64))
    dm = engine.speculator.draft_model
    drafted, rounds = set(), []
    real = dm.propose

    def propose(wanted, ends, mask_words):
        proposals, faults = real(wanted, ends, mask_words)
        got = {seq.request_id for seq, p in proposals.items() if p.tokens}
        drafted.update(got)
        rounds.append((len(wanted), len(got)))
        return proposals, faults
    dm.propose = propose
    outs = generate(engine, prompts, ps)
    assert [o.token_ids for o in outs] == want
    assert any(n > d for n, d in rounds)                     # the cache was too small for all
    assert max(d for _, d in rounds) < len(prompts)          # never all at once
    assert drafted == {o.request_id for o in outs}, rounds
    idle = "".join("." if d == 0 else "d" for _, d in rounds)  # shadows stuck: rounds without drafts
    assert "." * (dm.ROTATE_AFTER + 1) not in idle, idle
