"""A fault at any stage of a step fails only the request at fault: the other requests'
outputs equal a clean run's, and every KV block is free afterwards. Also: parameters are
checked when SamplingParams is made, and a KV cache too small for one sequence is found
at start-up."""
from __future__ import annotations

import math

import pytest
from oracles import PROMPTS, FakeConstraint

from structgen.engine import SamplingParams, model_runner
from structgen.engine import llm as llm_module

MAX_NEW = 8


class Boom(RuntimeError):
    pass


class FailingMatcher:
    """A matcher (the user's own object) whose `method` raises after `after` accepted tokens."""

    def __init__(self, method: str, after: int):
        self.method, self.after, self.n = method, after, 0

    def _maybe(self, method):
        if method == self.method and self.n >= self.after:
            raise Boom(f"{method} broke")

    def fill_next_token_bitmask(self, row):
        self._maybe("fill_next_token_bitmask")
        row[:] = -1

    def accept_token(self, token):
        self._maybe("accept_token")
        self.n += 1
        return True

    def is_terminated(self):
        return False

    def forced_tokens(self):
        self._maybe("forced_tokens")
        return []


class FailingConstraint:
    def __init__(self, method, after=2):
        self.method, self.after = method, after

    def matcher(self):
        return FailingMatcher(self.method, self.after)


def run(llm, faulty: SamplingParams | None):
    """PROMPTS greedy, with the request at index 1 replaced by the faulty one."""
    params = [SamplingParams(max_tokens=MAX_NEW) for _ in PROMPTS]
    if faulty is not None:
        params[1] = faulty
    outs = llm.generate(PROMPTS, params, use_tqdm=False)
    bm = llm.block_manager
    assert bm.num_free_blocks == bm.num_blocks and not llm.scheduler.running and not llm.scheduler.waiting
    return outs


@pytest.fixture(scope="module")
def clean(llm):
    return [o.token_ids for o in run(llm, None)]


@pytest.mark.parametrize("method", ["fill_next_token_bitmask", "accept_token", "forced_tokens"])
def test_a_failing_matcher_fails_its_request(llm, clean, method):
    outs = run(llm, SamplingParams(max_tokens=MAX_NEW, constraint=FailingConstraint(method)))
    assert outs[1].finish_reason == "error" and "Boom" in outs[1].error and "broke" in outs[1].error
    assert [o.token_ids for i, o in enumerate(outs) if i != 1] == [c for i, c in enumerate(clean) if i != 1]


def test_a_failing_compile_fails_its_request(llm, clean, monkeypatch):
    get = llm.constraints.get

    def compile_or_fail(spec):
        if spec == ("regex", "boom"):
            raise RecursionError("compiler bug")
        return get(spec)
    monkeypatch.setattr(llm.constraints, "get", compile_or_fail)
    outs = run(llm, SamplingParams(max_tokens=MAX_NEW, constraint=("regex", "boom")))
    assert outs[1].finish_reason == "error" and "RecursionError: compiler bug" in outs[1].error
    assert [o.token_ids for i, o in enumerate(outs) if i != 1] == [c for i, c in enumerate(clean) if i != 1]


def test_a_failing_draw_fails_its_row(llm, clean, monkeypatch):
    """The batched draw raises on a marked row: each row is then drawn alone."""
    sample = model_runner.sample

    def sample_or_fail(logits, batch, generator=None):
        if (batch.temperature == 0.5).any():
            raise Boom("sampler broke")
        return sample(logits, batch, generator)
    monkeypatch.setattr(model_runner, "sample", sample_or_fail)
    outs = run(llm, SamplingParams(max_tokens=MAX_NEW, temperature=0.5, seed=1))
    assert outs[1].finish_reason == "error" and "sampler broke" in outs[1].error
    assert [o.token_ids for i, o in enumerate(outs) if i != 1] == [c for i, c in enumerate(clean) if i != 1]


def test_a_failing_detokenizer_or_stop_check_fails_its_request(llm, clean, monkeypatch):
    decode_next = llm_module.detokenizer.decode_next

    def decode_or_fail(tokenizer, seq, skip):
        if seq.params.stop == ["detok"]:
            raise Boom("detokenizer broke")
        return decode_next(tokenizer, seq, skip)
    monkeypatch.setattr(llm_module.detokenizer, "decode_next", decode_or_fail)
    outs = run(llm, SamplingParams(max_tokens=MAX_NEW, stop=["detok"]))
    assert outs[1].finish_reason == "error" and "detokenizer broke" in outs[1].error
    assert [o.token_ids for i, o in enumerate(outs) if i != 1] == [c for i, c in enumerate(clean) if i != 1]
    monkeypatch.undo()

    class Broken(str):
        """A stop string whose length raises once armed (in the stop check)."""
        armed = False

        def __len__(self):
            if Broken.armed:
                raise Boom("stop check broke")
            return str.__len__(self)
    params = SamplingParams(max_tokens=MAX_NEW, stop=[Broken("zz")])
    Broken.armed = True
    outs = run(llm, params)
    assert outs[1].finish_reason == "error" and "stop check broke" in outs[1].error
    assert [o.token_ids for i, o in enumerate(outs) if i != 1] == [c for i, c in enumerate(clean) if i != 1]


def test_no_token_left_names_the_constraint(llm):
    """A constraint that allows nothing errors cleanly."""
    vocab = llm.model_config.vocab_size
    c = FakeConstraint([], 3, eos=0, vocab_size=vocab)
    out = llm.generate(PROMPTS[0], SamplingParams(max_tokens=4, constraint=c), use_tqdm=False)[0]
    assert out.finish_reason == "error" and out.error == "the constraint allows no token here"


@pytest.mark.parametrize("field,value,message", [
    ("logprobs", 100000, r"logprobs must be in \[0, 20\], not 100000"),
    ("logprobs", -1, r"logprobs must be in \[0, 20\]"),
    ("temperature", math.nan, "temperature must be a finite number, not nan"),
    ("temperature", -0.1, r"temperature must be in \[0, inf\)"),
    ("max_tokens", 2.5, "max_tokens must be an integer, not 2.5"),
    ("max_tokens", None, "max_tokens must be an integer, not None"),
    ("max_tokens", 0, r"max_tokens must be in \[1, inf\]"),
    ("n", True, "n must be an integer, not True"),
    ("top_p", 0.0, r"top_p must be in \(0, 1\]"),
    ("min_p", 1.5, r"min_p must be in \[0, 1\]"),
    ("presence_penalty", 3, r"presence_penalty must be in \[-2, 2\]"),
    ("repetition_penalty", 0, r"repetition_penalty must be in \(0, inf\)"),
    ("min_tokens", 99, r"min_tokens must be in \[0, 16\]"),
    ("seed", 1.0, "seed must be an integer"),
    ("stop", [""], r"stop\[0\] must be a non-empty string"),
    ("stop_token_ids", [3, -4], r"stop_token_ids\[1\] must be in \[0, inf\]"),
])
def test_parameters_are_checked_when_made(field, value, message):
    with pytest.raises(ValueError, match=f"SamplingParams.{message}"):
        SamplingParams(**{field: value})


def test_off_values_are_accepted():
    assert SamplingParams(top_k=-1).top_k == 0 and SamplingParams(top_k=None).top_k == 0
    assert SamplingParams(logprobs=0, seed=-5, stop="x").stop == ["x"]


def test_a_cache_below_one_sequence_is_found_at_start(llm):
    with pytest.raises(ValueError, match=r"holds 4 blocks of 16 tokens \(64 tokens\), less than max_model_len=100"):
        llm.with_config(num_kv_blocks=4, max_model_len=100)
    with pytest.warns(UserWarning, match="max_model_len lowered from .* to 64"):
        small = llm.with_config(num_kv_blocks=4)
    assert small.max_model_len == 64
    out = small.generate([list(range(10, 80))], SamplingParams(max_tokens=4), use_tqdm=False)[0]
    assert out.finish_reason == "error" and "max_model_len=64" in out.error
