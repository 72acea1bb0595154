"""End-to-end generation on the embedded SmolLM2-135M against transformers (fp32, greedy)."""
from __future__ import annotations

import pytest
import torch
from oracles import PROMPTS, FakeConstraint, hf_greedy

from structgen.engine import LLM, SamplingParams

MAX_NEW = 20


@pytest.fixture(scope="module")
def hf(smol_folder):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(smol_folder, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def reference(hf, llm):
    return hf_greedy(hf, llm.tokenizer, PROMPTS, MAX_NEW)


def assert_all_free(engine: LLM):
    bm = engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks
    assert all(r == 0 for r in bm.ref_counts)
    assert not engine.scheduler.running and not engine.scheduler.waiting


def run(engine, prompts=PROMPTS, **kw):
    outs = engine.generate(prompts, SamplingParams(max_tokens=MAX_NEW, **kw), use_tqdm=False)
    assert_all_free(engine)
    return outs


@pytest.mark.parametrize("config", [
    {},                                                     # defaults: prefix cache + chunked prefill
    # (slow: CI time; the engine without a prefix cache stays checked against transformers by
    # test_beam_search's test_beams_share_prompt_blocks_copy_on_write, and against decoding
    # with it by test_speculative_draft's small-chunks case)
    pytest.param({"enable_prefix_caching": False}, marks=pytest.mark.slow),
    {"enable_chunked_prefill": False},
    {"max_num_batched_tokens": 24, "block_size": 4},        # prompts split over many chunks
    {"num_kv_blocks": 10, "block_size": 8, "max_num_batched_tokens": 64},  # forced preemption
    {"max_num_seqs": 2},                                    # waiting requests join as others finish
], ids=["default", "no-prefix-cache", "no-chunked-prefill", "small-chunks", "preemption", "2-seqs"])
def test_greedy_matches_transformers(llm, reference, config):
    engine = llm.with_config(**config) if config else llm
    outs = run(engine)
    assert len(outs) == len(PROMPTS)
    for out, ref in zip(outs, reference):
        assert out.token_ids == ref
        assert out.finish_reason in ("length", "stop")
        assert out.text == engine.tokenizer.decode(ref, skip_special_tokens=True)
    if "num_kv_blocks" in config:
        assert engine.scheduler.num_preemptions > 0


def test_long_prompt_greedy_matches_transformers(llm, hf):
    """A prompt of more than `Linear.SGEMM_ROWS` tokens in one chunk: its projections take
    the sgemm path, which rounds differently from the packed one."""
    from oracles import LONG

    from structgen.engine.model import Linear
    prompt = LONG * 4 + "Question: which is the longest river in Europe?\nAnswer:"
    assert len(llm.tokenizer(prompt).input_ids) > Linear.SGEMM_ROWS
    engine = llm.with_config(enable_prefix_caching=False)     # the whole prompt in one chunk
    assert [o.token_ids for o in run(engine, [prompt])] == hf_greedy(hf, llm.tokenizer, [prompt], MAX_NEW)


def test_prefix_cache_hits_and_survives_between_calls(llm, reference):
    engine = llm.with_config(block_size=8)
    first = run(engine, PROMPTS[:4])
    assert all(o.num_cached_tokens == 0 for o in first)
    # Blocks were freed but keep their hashes: the last prompt shares ~60 tokens with
    # the one before it.
    second = run(engine, PROMPTS[4:])
    assert second[0].num_cached_tokens >= 48
    # Admitted in the same step, a prompt reuses blocks an earlier one is computing then.
    fresh = llm.with_config(block_size=8)
    both = run(fresh, PROMPTS[3:])
    assert both[0].num_cached_tokens == 0 and both[1].num_cached_tokens >= 48
    assert [o.token_ids for o in both] == reference[3:]
    again = run(engine)
    assert all(o.num_cached_tokens >= 8 * (len(o.prompt_token_ids) // 8 - 1) for o in again)
    assert [o.token_ids for o in first + second] == reference
    assert [o.token_ids for o in again] == reference


def test_repetition_penalty_matches_transformers(llm, hf):
    prompts = PROMPTS[:2]
    ref = hf_greedy(hf, llm.tokenizer, prompts, 12, repetition_penalty=1.3)
    outs = llm.generate(prompts, SamplingParams(max_tokens=12, repetition_penalty=1.3), use_tqdm=False)
    assert [o.token_ids for o in outs] == ref


def test_logprobs_match_transformers(llm, hf):
    out = llm.generate(PROMPTS[0], SamplingParams(max_tokens=6, logprobs=3), use_tqdm=False)[0]
    ids = out.prompt_token_ids + out.token_ids
    with torch.inference_mode():
        lp = torch.log_softmax(hf(torch.tensor([ids])).logits[0].float(), -1)
    n0 = len(out.prompt_token_ids)
    for i, (tok, entry) in enumerate(zip(out.token_ids, out.logprobs)):
        assert list(entry)[0] == tok and len(entry) >= 3
        ref = lp[n0 - 1 + i]
        for t, v in entry.items():
            assert abs(v - ref[t].item()) < 1e-3
        assert set(torch.topk(ref, 3).indices.tolist()) <= set(entry)


def test_stop_strings_and_stop_ids(llm):
    p = "1, 2, 3, 4,"
    base = llm.generate(p, SamplingParams(max_tokens=12), use_tqdm=False)[0]
    assert base.text.startswith(" 5, 6, 7, 8,")
    out = llm.generate(p, SamplingParams(max_tokens=12, stop=["8"]), use_tqdm=False)[0]
    assert (out.text, out.finish_reason, out.outputs[0].stop_reason) == (" 5, 6, 7, ", "stop", "8")
    out = llm.generate(p, SamplingParams(max_tokens=12, stop="8", include_stop_str_in_output=True),
                       use_tqdm=False)[0]
    assert out.text == " 5, 6, 7, 8"
    eight = llm.tokenizer.encode("8", add_special_tokens=False)[0]
    out = llm.generate(p, SamplingParams(max_tokens=12, stop_token_ids=[eight]), use_tqdm=False)[0]
    assert out.token_ids[-1] == eight and out.finish_reason == "stop"
    assert out.outputs[0].stop_reason == eight
    assert_all_free(llm)


def test_seeded_sampling_is_independent_of_the_batch(llm):
    target = SamplingParams(max_tokens=12, temperature=0.9, top_p=0.95, top_k=50, seed=1234)
    alone = llm.generate(PROMPTS[2], target, use_tqdm=False)[0]
    others = [SamplingParams(max_tokens=n, temperature=1.0) for n in (5, 12, 3)] + [
        SamplingParams(max_tokens=8, temperature=0.7, seed=99)]
    mixed = llm.generate([PROMPTS[0], PROMPTS[1], PROMPTS[2], PROMPTS[3], PROMPTS[4]],
                         [others[0], others[1], target, others[2], others[3]], use_tqdm=False)
    assert mixed[2].token_ids == alone.token_ids
    again = llm.generate(PROMPTS[2], target, use_tqdm=False)[0]
    assert again.token_ids == alone.token_ids


def test_n_samples(llm):
    params = SamplingParams(n=3, max_tokens=8, temperature=1.0, seed=5)
    a = llm.generate(PROMPTS[2], params, use_tqdm=False)[0]
    b = llm.generate(PROMPTS[2], params, use_tqdm=False)[0]
    assert len(a.outputs) == 3 and [o.index for o in a.outputs] == [0, 1, 2]
    assert [o.token_ids for o in a.outputs] == [o.token_ids for o in b.outputs]
    assert len({tuple(o.token_ids) for o in a.outputs}) > 1
    assert_all_free(llm)


def _fake(llm, **kw):
    tok = llm.tokenizer
    digits = [tok.convert_tokens_to_ids(str(d)) for d in range(10)]
    eos = tok.eos_token_id
    return FakeConstraint(digits, kw.pop("length", 5), eos, llm.model_config.vocab_size, **kw), digits, eos


def test_guided_and_free_mixed(llm, reference):
    fake, digits, eos = _fake(llm, length=5)
    params = [SamplingParams(max_tokens=MAX_NEW), SamplingParams(max_tokens=MAX_NEW, constraint=fake),
              SamplingParams(max_tokens=MAX_NEW), SamplingParams(max_tokens=MAX_NEW, constraint=fake,
                                                                temperature=1.0, seed=3),
              SamplingParams(max_tokens=MAX_NEW)]
    outs = llm.generate(PROMPTS, params, use_tqdm=False)
    for i in (0, 2, 4):
        assert outs[i].token_ids == reference[i]          # free requests unaffected
    for i in (1, 3):
        assert outs[i].finish_reason == "constraint"
        assert outs[i].token_ids[-1] == eos and len(outs[i].token_ids) == 6
        assert all(t in digits for t in outs[i].token_ids[:-1])
        assert outs[i].text.isdigit() and len(outs[i].text) == 5
    assert_all_free(llm)


def test_bad_constraint_fails_only_its_request(llm, reference):
    class Broken:
        def matcher(self):
            raise RuntimeError("boom")

    params = [SamplingParams(max_tokens=MAX_NEW, constraint=("no-such-kind", "x")),
              SamplingParams(max_tokens=MAX_NEW),
              SamplingParams(max_tokens=MAX_NEW, constraint=Broken()),
              SamplingParams(max_tokens=MAX_NEW, constraint=("json", {"type": "object"}) if False else 42)]
    outs = llm.generate(PROMPTS[:4], params, use_tqdm=False)
    assert outs[1].token_ids == reference[1] and outs[1].finish_reason in ("length", "stop")
    for i in (0, 2, 3):
        assert outs[i].finish_reason == "error" and outs[i].token_ids == [] and outs[i].error
    assert "no-such-kind" in outs[0].error and "boom" in outs[2].error
    assert_all_free(llm)


def test_jump_forward_appends_forced_tokens(llm, hf):
    tok = llm.tokenizer
    forced = tok.encode(' {"answer": ', add_special_tokens=False)
    fake, digits, eos = _fake(llm, length=3, forced=forced)
    engine = llm.with_config(block_size=4)
    out = engine.generate(PROMPTS[0], SamplingParams(max_tokens=MAX_NEW, constraint=fake, logprobs=2),
                          use_tqdm=False)[0]
    assert out.token_ids[:len(forced)] == forced
    assert out.finish_reason == "constraint" and out.token_ids[-1] == eos
    assert all(t in digits for t in out.token_ids[len(forced):-1])
    # The first forced token is sampled (the mask allows only it); later ones are
    # appended after sampling, without a forward each.
    assert engine.stats["forced_tokens"] >= 1
    assert engine.stats["steps"] < len(out.token_ids)
    # Every token, forced ones too, carries the model's logprob at its position (forced
    # ones from the next forward), as transformers computes it over the whole text.
    ids = out.prompt_token_ids + out.token_ids
    with torch.inference_mode():
        lp = torch.log_softmax(hf(torch.tensor([ids])).logits[0].float(), -1)
    n0 = len(out.prompt_token_ids)
    for i, (t, entry) in enumerate(zip(out.token_ids, out.logprobs)):
        ref = lp[n0 - 1 + i]
        assert list(entry)[0] == t
        assert all(abs(v - ref[k].item()) < 1e-3 for k, v in entry.items())
        assert set(torch.topk(ref, 2).indices.tolist()) <= set(entry)
    assert_all_free(engine)


def test_generate_stream(llm, reference):
    pieces = list(llm.generate_stream(PROMPTS[1], SamplingParams(max_tokens=MAX_NEW)))
    assert "".join(pieces) == llm.tokenizer.decode(reference[1], skip_special_tokens=True)
    assert len(pieces) > 3
    pieces = list(llm.generate_stream(PROMPTS[1], SamplingParams(max_tokens=MAX_NEW, stop=[" 8,"])))
    assert "".join(pieces) == " 5, 6, 7,"


def test_chat_template(llm):
    out = llm.chat([{"role": "user", "content": "Say hi."}], SamplingParams(max_tokens=4),
                   use_tqdm=False)[0]
    assert out.prompt_token_ids[0] == llm.tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert out.token_ids and out.finish_reason in ("length", "stop")


def test_interrupted_generate_leaves_engine_clean(llm, reference):
    engine = llm.with_config()
    calls = {"n": 0}
    real_step = engine.step

    def flaky_step():
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_step()

    engine.step = flaky_step
    with pytest.raises(KeyboardInterrupt):
        engine.generate(PROMPTS, SamplingParams(max_tokens=MAX_NEW), use_tqdm=False)
    engine.step = real_step
    assert_all_free(engine)
    assert [o.token_ids for o in run(engine)] == reference
