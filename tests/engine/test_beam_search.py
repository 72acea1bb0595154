"""Beam search on the embedded SmolLM2-135M against transformers' own beam search (fp32):
token-identical beams and scores, shared copy-on-write KV blocks, constrained beams."""
from __future__ import annotations

import asyncio
import json
import re
import time

import jsonschema
import numpy as np
import pytest
import torch
from oracles import PROMPTS, FakeConstraint, FakeMatcher

from structgen.engine import BeamSearchParams, SamplingParams
from structgen.engine.async_engine import AsyncEngine, RequestError

EOS = 2


@pytest.fixture(scope="module")
def hf(smol_folder):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(smol_folder, dtype=torch.float32).eval()


def hf_beams(hf, tokenizer, prompt, p: BeamSearchParams, processors=()):
    """transformers' beams for one prompt, best first: [(output ids up to EOS, score)];
    `p.stop` as its `stop_strings` (a beam it stops is padded with EOS: its length is
    that of its beam indices)."""
    from transformers import LogitsProcessorList
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.inference_mode():
        g = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=p.max_tokens,
                        num_beams=p.beam_width, num_return_sequences=p.beam_width, do_sample=False,
                        length_penalty=p.length_penalty, early_stopping=p.early_stopping,
                        eos_token_id=None if p.ignore_eos else EOS, pad_token_id=EOS,
                        logits_processor=LogitsProcessorList(processors),
                        stop_strings=list(p.stop) or None, tokenizer=tokenizer,
                        output_scores=True, return_dict_in_generate=True)
    lengths = (g.beam_indices >= 0).sum(dim=1).tolist()
    out = []
    for row, n, score in zip(g.sequences[:, ids.shape[1]:].tolist(), lengths, g.sequences_scores.tolist()):
        if p.stop:
            row = row[:n]
        elif not p.ignore_eos and EOS in row:
            row = row[:row.index(EOS) + 1]
        out.append((row, score))
    return out


def assert_all_free(engine):
    bm = engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks and all(r == 0 for r in bm.ref_counts)
    assert not engine.scheduler.running and not engine.scheduler.waiting


def assert_same_beams(out, ref, tokenizer, stop=(), include_stop=False):
    """Same tokens and scores as transformers' `ref`; each text is the decoded tokens, cut
    at the first stop string's first occurrence (Python's str.find)."""
    assert out.error is None
    assert [s.token_ids for s in out.sequences] == [ids for ids, _ in ref]
    for s, (ids, score) in zip(out.sequences, ref):
        assert s.score == pytest.approx(score, abs=1e-3)
        assert s.cum_logprob == pytest.approx(sum(s.logprobs), abs=1e-3)
        text = tokenizer.decode(ids, skip_special_tokens=True)
        hits = sorted((text.find(x), x) for x in stop if x in text)
        if hits:
            (i, x), = hits[:1]
            assert (s.text, s.finish_reason, s.stop_reason) == (text[:i + len(x) * include_stop], "stop", x)
        else:
            assert s.text == text and s.stop_reason in (None, EOS)
    assert [s.score for s in out.sequences] == sorted((s.score for s in out.sequences), reverse=True)


def prompt_text(tokenizer, spec):
    """A PROMPTS index, or a question put in the chat template (the model then ends its
    answers with EOS: finished hypotheses early, where the stopping rules matter)."""
    if isinstance(spec, int):
        return PROMPTS[spec]
    return tokenizer.apply_chat_template([{"role": "user", "content": spec}], tokenize=False,
                                         add_generation_prompt=True)


# (prompt, BeamSearchParams): widths 2-4, each early_stopping mode, length penalties
# either side of 1, ignore_eos; a long prompt that spans many blocks. The chat cases are
# where transformers' stopping heuristic (early_stopping=False) and its rule that only the
# best beam_width candidates may finish change the result.
CASES = [
    (0, BeamSearchParams(2, max_tokens=8)),
    (1, BeamSearchParams(4, max_tokens=8)),
    (2, BeamSearchParams(4, max_tokens=8, length_penalty=0.5, early_stopping="never")),
    (0, BeamSearchParams(3, max_tokens=10, length_penalty=2.0, early_stopping=True)),
    (3, BeamSearchParams(4, max_tokens=6)),
    (2, BeamSearchParams(2, max_tokens=6, ignore_eos=True)),
    ("What is the capital of Spain?", BeamSearchParams(2, max_tokens=28, length_penalty=2.0)),
    ("Is water wet? Answer yes or no.", BeamSearchParams(4, max_tokens=20, length_penalty=0.5,
                                                          early_stopping=True)),
]


def test_beams_match_transformers_in_one_batch(llm, hf):
    """All cases in one call (beams of several requests share steps), each against
    transformers run alone."""
    prompts = [prompt_text(llm.tokenizer, spec) for spec, _ in CASES]
    outs = llm.beam_search(prompts, [p for _, p in CASES])
    assert_all_free(llm)
    for out, prompt, (_, p) in zip(outs, prompts, CASES):
        assert len(out.sequences) == p.beam_width
        assert_same_beams(out, hf_beams(hf, llm.tokenizer, prompt, p), llm.tokenizer)


@pytest.mark.parametrize("config", [
    # (slow: CI time; test_beams_share_prompt_blocks_copy_on_write runs beams without a
    # prefix cache against transformers, on blocks of 8)
    pytest.param({"enable_prefix_caching": False, "block_size": 4}, marks=pytest.mark.slow),
    {"num_kv_blocks": 16, "block_size": 8, "max_num_batched_tokens": 64},   # beams preempted
], ids=["no-prefix-cache", "preemption"])
def test_beams_survive_engine_configs(llm, hf, config):
    engine = llm.with_config(**config)
    p = BeamSearchParams(4, max_tokens=8)
    outs = engine.beam_search(PROMPTS[3:5], p)
    assert_all_free(engine)
    for prompt, out in zip(PROMPTS[3:5], outs):
        assert_same_beams(out, hf_beams(hf, llm.tokenizer, prompt, p), llm.tokenizer)
    if "num_kv_blocks" in config:
        assert engine.scheduler.num_preemptions > 0


def test_beams_share_prompt_blocks_copy_on_write(llm, hf):
    """k beams of a long prompt hold the prompt's blocks once plus their own tails; every
    block's reference count equals the number of beams holding it; all freed at the end."""
    bs, k, new = 8, 4, 12
    engine = llm.with_config(block_size=bs, enable_prefix_caching=False)
    bm, runner = engine.block_manager, engine.runner
    prompt = PROMPTS[3]
    n_prompt = len(engine.tokenizer(prompt).input_ids)
    seen = {"steps": 0, "copies": 0, "max_used": 0}
    forward, pop = runner.forward_logits, bm.pop_copies

    def counting_pop():
        copies = pop()
        seen["copies"] += len(copies)
        return copies

    def checked_forward(batch):
        tables = [s.block_table for s in engine.scheduler.running]
        used = bm.num_blocks - bm.num_free_blocks
        holders = np.bincount([b for t in tables for b in t], minlength=bm.num_blocks)
        assert list(holders) == bm.ref_counts
        assert used == len({b for t in tables for b in t})
        if len(tables) == k:
            # The prompt's full blocks: one copy, held by every beam.
            shared = set.intersection(*(set(t) for t in tables))
            assert len(shared) >= n_prompt // bs
        seen["max_used"] = max(seen["max_used"], used)
        seen["steps"] += 1
        return forward(batch)

    runner.forward_logits, bm.pop_copies = checked_forward, counting_pop
    p = BeamSearchParams(k, max_tokens=new, ignore_eos=True)
    out = engine.beam_search(prompt, p)[0]
    assert_all_free(engine)
    assert seen["steps"] == new and seen["copies"] > 0
    # Prompt once, plus per beam its tail and the copied partial block; far below k prompts.
    assert seen["max_used"] <= -(-n_prompt // bs) + k * (-(-new // bs) + 1)
    assert seen["max_used"] < k * (n_prompt // bs)
    assert_same_beams(out, hf_beams(hf, engine.tokenizer, prompt, p), engine.tokenizer)


def test_constrained_beams_match_transformers_and_are_valid(llm, hf):
    """Every beam is valid under its constraint (Python `re`, jsonschema); the beams equal
    transformers' beam search with our logits processor masking its log-probs."""
    from structgen import fsm
    from structgen.guided.logits_processor import ConstraintLogitsProcessor
    vocab = llm.constraints.vocabulary
    pattern = r"(Paris|Lyon|Nice)(, France)?\."
    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"],
              "additionalProperties": False}
    cases = [("The capital of France is", pattern, fsm.compile_regex(pattern, vocab),
              lambda text: re.fullmatch(pattern, text)),
             ("Is the sea salty? Answer in JSON: ", schema, fsm.compile_json_schema(schema, vocab),
              lambda text: jsonschema.validate(json.loads(text), schema) is None)]
    for prompt, _, constraint, valid in cases:
        p = BeamSearchParams(4, max_tokens=16, constraint=constraint)
        out = llm.beam_search(prompt, p)[0]
        assert_all_free(llm)
        assert out.sequences and all(valid(s.text) for s in out.sequences)
        assert all(s.finish_reason == "constraint" for s in out.sequences)
        ref = hf_beams(hf, llm.tokenizer, prompt, p, [ConstraintLogitsProcessor(constraint)])
        assert_same_beams(out, ref, llm.tokenizer)


def test_wide_constrained_beams_equal_exhaustive_search(llm, hf):
    """With length_penalty=0, early_stopping="never" and more beams than the constraint has
    outputs, beam search is exhaustive: its beams are every valid token sequence, ranked by
    cumulative logprob as one transformers forward per sequence scores them."""
    from structgen import fsm
    constraint = fsm.compile_regex(r"(yes|no)", llm.constraints.vocabulary)
    sequences, stack = [], [(constraint.matcher(), [])]
    words = np.zeros((llm.constraints.vocabulary.num_words,), dtype=np.int32)
    while stack:
        m, tokens = stack.pop()
        m.fill_next_token_bitmask(words)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")
        for t in np.flatnonzero(bits).tolist():
            if t == EOS:
                sequences.append(tokens + [t])
            else:
                child = m.copy()
                assert child.accept_token(t)
                stack.append((child, tokens + [t]))
    assert 2 < len(sequences) <= 8
    prompt = "Is the sea salty? Answer:"
    ids = llm.tokenizer(prompt).input_ids
    scored = []
    with torch.inference_mode():
        for tokens in sequences:
            lp = torch.log_softmax(hf(torch.tensor([ids + tokens])).logits[0].float(), -1)
            scored.append((sum(lp[len(ids) - 1 + j, t].item() for j, t in enumerate(tokens)), tokens))
    scored.sort(key=lambda st: -st[0])
    p = BeamSearchParams(8, max_tokens=6, length_penalty=0.0, early_stopping="never", constraint=constraint)
    out = llm.beam_search(prompt, p)[0]
    assert [s.token_ids for s in out.sequences] == [t for _, t in scored]
    assert [s.cum_logprob for s in out.sequences] == pytest.approx([c for c, _ in scored], abs=1e-3)


def test_matcher_without_copy_is_replayed(llm):
    """A user's matcher without copy(): forks replay the beam's tokens into a fresh one.
    Same beams as with a copying matcher, and every beam obeys the constraint."""
    class CopyingMatcher(FakeMatcher):
        def copy(self):
            m = CopyingMatcher(self.c)
            m.accepted, m.terminated = list(self.accepted), self.terminated
            return m

    class Copying(FakeConstraint):
        def matcher(self):
            return CopyingMatcher(self)

    allowed = llm.tokenizer(" one two three four five six").input_ids
    p = BeamSearchParams(4, max_tokens=8, constraint=FakeConstraint(allowed, 3, EOS, 49152))
    replayed = llm.beam_search(PROMPTS[1], p)[0]
    copied = llm.beam_search(PROMPTS[1], BeamSearchParams(4, max_tokens=8,
                                                          constraint=Copying(allowed, 3, EOS, 49152)))[0]
    assert_all_free(llm)
    assert [s.token_ids for s in replayed.sequences] == [s.token_ids for s in copied.sequences]
    assert len(replayed.sequences) == 4
    for s in replayed.sequences:
        assert set(s.token_ids[:3]) <= set(allowed) and s.token_ids[3:] == [EOS]


# Stop strings that end beams mid-way ("6," after " 5, " and after " 5, and "; "." after
# " Paris"; a newline as the first token), one run with the stop string kept.
STOP_CASES = [
    (1, BeamSearchParams(4, max_tokens=8, stop=[" 7", "6,"])),
    (0, BeamSearchParams(3, max_tokens=8, stop=".", include_stop_str_in_output=True)),
    (2, BeamSearchParams(2, max_tokens=4, stop=["\n", "sea"], length_penalty=0.5)),
]


def test_stop_strings_match_transformers_stop_strings(llm, hf):
    """A candidate whose text then holds a stop string is a finished hypothesis, as with
    transformers' `generate(num_beams=..., stop_strings=...)`: the same tokens and scores;
    the text is the decoded tokens cut at the stop string (kept with
    include_stop_str_in_output)."""
    prompts = [PROMPTS[i] for i, _ in STOP_CASES]
    outs = llm.beam_search(prompts, [p for _, p in STOP_CASES])
    assert_all_free(llm)
    stopped = 0
    for out, prompt, (_, p) in zip(outs, prompts, STOP_CASES):
        assert_same_beams(out, hf_beams(hf, llm.tokenizer, prompt, p), llm.tokenizer, p.stop,
                          p.include_stop_str_in_output)
        stopped += sum(s.stop_reason in p.stop for s in out.sequences)
    assert stopped >= 3          # (the cases do end beams at stop strings)


def test_a_candidate_past_the_best_k_that_stops_is_not_kept(llm):
    """Stop strings are checked on every candidate that could become a beam, not only on
    the best k (transformers checks its stopping criteria on all 2k): with one beam and
    the two likeliest first tokens as stop strings, the first is the only hypothesis and
    the second is never kept, so the search ends after the prompt's forward, even where
    early_stopping="never" would go on for a running beam."""
    prompt = PROMPTS[0]
    top = llm.generate(prompt, SamplingParams(max_tokens=1, logprobs=2))[0].logprobs[0]
    (t1, lp1), (t2, lp2) = sorted(top.items(), key=lambda kv: -kv[1])[:2]
    first, second = llm.tokenizer.decode([t1]), llm.tokenizer.decode([t2])
    assert first.strip() and second.strip() and first not in second and second not in first
    p = BeamSearchParams(1, max_tokens=4, length_penalty=2.0, early_stopping="never", stop=[first, second])
    assert lp2 / p.max_tokens ** p.length_penalty > lp1     # (a running second beam could still win)
    steps = llm.stats["steps"]
    out = llm.beam_search(prompt, p)[0]
    assert llm.stats["steps"] - steps == 1
    assert [(s.text, s.stop_reason, len(s.token_ids)) for s in out.sequences] == [("", first, 1)]
    assert_all_free(llm)


def test_stop_string_params_are_checked():
    assert BeamSearchParams(2, max_tokens=4, stop="x").stop == ("x",)
    assert BeamSearchParams(2, max_tokens=4, stop=["a", "b"]).stop == ("a", "b")
    with pytest.raises(ValueError, match=r"BeamSearchParams\.stop\[1\] must be a non-empty string"):
        BeamSearchParams(2, max_tokens=4, stop=["a", ""])
    with pytest.raises(ValueError, match=r"BeamSearchParams\.stop must be a string or a list"):
        BeamSearchParams(2, max_tokens=4, stop=3)
    with pytest.raises(ValueError, match=r"BeamSearchParams\.include_stop_str_in_output must be a bool"):
        BeamSearchParams(2, max_tokens=4, include_stop_str_in_output="yes")


def test_beam_search_errors(llm):
    with pytest.raises(ValueError, match="beam_width"):
        BeamSearchParams(0, max_tokens=4)
    with pytest.raises(ValueError, match="early_stopping"):
        BeamSearchParams(2, max_tokens=4, early_stopping=1)
    with pytest.raises(ValueError, match="max_tokens"):
        BeamSearchParams(2, max_tokens=0)
    with pytest.raises(ValueError, match="length_penalty"):
        BeamSearchParams(2, max_tokens=4, length_penalty=float("nan"))
    with pytest.raises(ValueError, match="max_num_seqs"):
        llm.beam_search("Hi", BeamSearchParams(16, max_tokens=4))
    with pytest.raises(ValueError, match="one BeamSearchParams per prompt"):
        llm.beam_search(["a", "b"], [BeamSearchParams(2, max_tokens=4)])
    # A request that cannot run fails alone, with its reason.
    bad, good = llm.beam_search([[], "Hi"], BeamSearchParams(2, max_tokens=2))
    assert bad.error == "empty prompt" and not bad.sequences
    assert good.error is None and len(good.sequences) == 2

    class Broken(FakeMatcher):
        def fill_next_token_bitmask(self, row):
            if self.accepted:
                raise KeyError("boom")
            super().fill_next_token_bitmask(row)

    class BrokenConstraint(FakeConstraint):
        def matcher(self):
            return Broken(self)

    allowed = llm.tokenizer(" one two three").input_ids
    raising = BeamSearchParams(2, max_tokens=6, constraint=BrokenConstraint(allowed, 3, EOS, 49152))
    dead = BeamSearchParams(2, max_tokens=6, constraint=FakeConstraint([], 10, EOS, 49152))  # allows no token
    free = BeamSearchParams(2, max_tokens=3)
    a, b, c = llm.beam_search(["Count:", "Count:", "Hi"], [raising, dead, free])
    assert "the constraint's mask failed: KeyError" in a.error and not a.sequences
    assert b.error == "RuntimeError: the constraint left no valid continuation" and not b.sequences
    assert c.error is None and len(c.sequences) == 2
    assert_all_free(llm)


def assert_equal_beams(out, ref):
    assert out.error is None and ref.error is None
    assert [s.token_ids for s in out.sequences] == [s.token_ids for s in ref.sequences]
    assert [s.text for s in out.sequences] == [s.text for s in ref.sequences]
    assert [s.score for s in out.sequences] == pytest.approx([s.score for s in ref.sequences], abs=1e-4)


def test_beam_search_through_async_engine_beside_other_requests(llm):
    """AsyncEngine.beam_search (and LLM.beam_search routed through the engine) gives the
    beams of LLM.beam_search run alone, while a plain request streams beside them with the
    tokens it has alone; an abort frees the beams' blocks; a request that cannot run fails
    alone; every block is free at the end."""
    p, q = BeamSearchParams(4, max_tokens=8, stop=["6,"]), BeamSearchParams(3, max_tokens=6)
    alone = llm.beam_search([PROMPTS[1], PROMPTS[0]], [p, q])
    plain = SamplingParams(max_tokens=12)
    plain_alone = llm.generate(PROMPTS[2], plain)[0].token_ids
    eng = AsyncEngine(llm, compile_processes=False)
    try:
        stream = eng.add_request(PROMPTS[2], plain)

        async def both():
            return await asyncio.gather(eng.beam_search(PROMPTS[1], p), eng.beam_search(PROMPTS[0], q))

        for out, ref in zip(asyncio.run(both()), alone):
            assert_equal_beams(out, ref)
        assert stream.result().token_ids == plain_alone
        bad, good = llm.beam_search([[], PROMPTS[0]], q)                     # (through the engine)
        assert bad.error == "empty prompt" and not bad.sequences
        assert_equal_beams(good, alone[1])

        long = eng.add_beam_search(PROMPTS[3], BeamSearchParams(2, max_tokens=400, ignore_eos=True))
        deadline = time.monotonic() + 30
        while eng.num_running == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        long.abort()
        assert long.result(timeout=30).error == "aborted"
        with pytest.raises(RequestError, match="empty prompt"):
            eng.add_beam_search([], p).result(timeout=30)
        with pytest.raises(ValueError, match="max_num_seqs"):
            eng.add_beam_search("Hi", BeamSearchParams(16, max_tokens=4))

        # A beam step whose forward raises fails its beam request; the plain one goes on.
        poison = llm.tokenizer("Poisoned prompt").input_ids
        forward = llm.runner.forward_logits

        def failing(batch):
            if any(seq.token_ids[:len(poison)] == poison for seq, _ in batch):
                raise RuntimeError("boom")
            return forward(batch)

        llm.runner.forward_logits = failing
        try:
            stream = eng.add_request(PROMPTS[2], plain)
            failed = eng.add_beam_search(poison, q)
            assert failed.result(timeout=60).error == "engine step failed: RuntimeError: boom"
            assert stream.result(timeout=60).token_ids == plain_alone
        finally:
            del llm.runner.forward_logits
    finally:
        eng.close()
    assert_all_free(llm)


@pytest.mark.slow
@pytest.mark.parametrize("width", [2, 3, 5, 8])
def test_wide_beams_match_transformers(llm, hf, width):
    params = [BeamSearchParams(width, max_tokens=16, length_penalty=lp, early_stopping=es)
              for lp, es in [(1.0, False), (0.7, "never"), (1.5, True), (1.0, False), (0.0, "never")]]
    outs = llm.beam_search(PROMPTS, params)
    assert_all_free(llm)
    for prompt, p, out in zip(PROMPTS, params, outs):
        assert_same_beams(out, hf_beams(hf, llm.tokenizer, prompt, p), llm.tokenizer)
