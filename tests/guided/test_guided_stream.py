"""guided's serving features on the embedded model: stream, n, stop, logprobs, threads,
per-prompt errors. Outputs are checked with re.fullmatch; max_tokens stays small."""
from __future__ import annotations

import random
import re
import time

import pytest
from oracles import ExclusiveUse, in_threads

from structgen import guided

DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
SENTENCE = r"[A-Z][a-z]+ (is|was) [a-z ]{1,20}\."
PROMPT = "When did Apollo 11 land? Give the date."
# Engines of their own (small KV caches), apart from test_guided.py's shared model.
CONFIG = dict(max_num_seqs=8, max_model_len=512)


@pytest.fixture(scope="module")
def model():
    """Driven by the LLM's lock (no AsyncEngine)."""
    return guided.load(backend="engine", **CONFIG)


@pytest.fixture(scope="module")
def async_model():
    """Driven by an AsyncEngine, as after a first stream() call."""
    m = guided.load(backend="engine", num_kv_blocks=128, **CONFIG)
    m.async_engine
    return m


@pytest.mark.parametrize("which", ["model", "async_model"])
def test_three_threads_match_single_thread_greedy(which, request):
    m = request.getfixturevalue(which)
    gen = guided.regex(m, DATE)
    want = gen(PROMPT, max_tokens=16)
    assert re.fullmatch(DATE, want)
    got = [None] * 3

    def worker(i):
        got[i] = gen(PROMPT, max_tokens=16)

    errors = in_threads(worker, 3)
    assert not errors, errors
    assert got == [want] * 3


def test_callers_never_share_the_engines_tokenizer():
    """Threads encode their prompts at random times while the engine's thread decodes
    others (a long stream, and theirs): never both inside one tokenizer at once (the
    engine has its own)."""
    m = guided.load(backend="engine", num_kv_blocks=96, **CONFIG)
    m.tokenizer = spy = ExclusiveUse(m.tokenizer, hold_s=0.005)      # (before the engine exists)
    gen = guided.regex(m, DATE)
    long = guided.regex(m, r"[a-z ]{80,100}").stream("Write letters.", max_tokens=100)
    next(long)

    def worker(i):
        pause = random.Random(i)
        for k in range(5):
            time.sleep(pause.uniform(0, 0.3))   # (not in step with the engine's emits)
            out = gen.generate(f"{PROMPT} ({i}, {k})", max_tokens=16)[0]
            assert re.fullmatch(DATE, out.text)

    errors = in_threads(worker, 4)
    long.close()
    m.async_engine.close()
    assert not errors, errors
    assert spy.calls >= 40 and not spy.overlaps, spy.overlaps[:3]


def test_stream_concatenates_to_generate_text(async_model):
    gen = guided.regex(async_model, SENTENCE)
    pieces = list(gen.stream("Say something about Paris.", max_tokens=24))
    out = gen.generate("Say something about Paris.", max_tokens=24)[0]
    assert len(pieces) > 1
    assert "".join(pieces) == out.text
    if out.complete:
        assert re.fullmatch(SENTENCE, out.text)


def drain(it):
    """The pieces of a stream and its return value."""
    pieces = []
    while True:
        try:
            pieces.append(next(it))
        except StopIteration as end:
            return pieces, end.value


def test_stream_returns_the_replayed_output(async_model):
    gen = guided.regex(async_model, DATE)
    pieces, out = drain(gen.stream(PROMPT, max_tokens=16))
    want = gen.generate(PROMPT, max_tokens=16)[0]
    assert "".join(pieces) == out.text == want.text
    assert (out.token_ids, out.complete, out.finish_reason, out.value) == \
        (want.token_ids, want.complete, want.finish_reason, want.value)
    assert out.complete and re.fullmatch(DATE, out.value)


def test_stream_refuses_a_token_the_constraint_forbids(async_model, monkeypatch):
    """A stream whose engine hands it a token outside the constraint raises at its end."""
    from structgen.engine.async_engine import StreamDelta
    gen = guided.regex(async_model, DATE)
    tok = async_model.tokenizer
    ids = tok.encode("1969-07-2x", add_special_tokens=False)
    deltas = [StreamDelta(0, [t], tok.decode([t])) for t in ids]
    deltas[-1].finish_reason = "length"

    class Handle:                      # (what add_request returns: deltas, then finished)
        finished = True

        def __iter__(self):
            return iter(deltas)

    monkeypatch.setattr(async_model.async_engine, "add_request", lambda *a, **k: Handle())
    with pytest.raises(RuntimeError, match="forbids"):
        drain(gen.stream(PROMPT, max_tokens=16))


def test_stream_closed_early_frees_its_blocks(async_model):
    gen = guided.regex(async_model, r"[a-z ]{40,60}")
    it = gen.stream("Write letters.", max_tokens=40)
    next(it)
    it.close()
    llm = async_model.engine
    deadline = time.monotonic() + 10
    while llm.scheduler.has_unfinished() and time.monotonic() < deadline:
        time.sleep(0.02)
    bm = llm.block_manager
    assert bm.num_free_blocks == bm.num_blocks


def test_stream_needs_the_engine_backend():
    gen = guided.regex(guided.load(backend="transformers"), DATE)
    with pytest.raises(ValueError, match="engine backend"):
        next(gen.stream(PROMPT))


def test_n_two_with_seed(model):
    gen = guided.regex(model, DATE)
    outs = gen.generate([PROMPT, "Today's date?"], n=2, temperature=0.9, seed=3, max_tokens=16)
    assert [len(o) for o in outs] == [2, 2]
    for per_prompt in outs:
        for o in per_prompt:
            assert o.complete and re.fullmatch(DATE, o.text)
    values = gen(PROMPT, n=2, temperature=0.9, seed=3, max_tokens=16)
    assert values == [o.text for o in outs[0]]


def test_stop_string_ends_output(model):
    gen = guided.regex(model, r"item (one|two), (one|two), done")
    (o,) = gen.generate("List two items.", stop=",", max_tokens=16, logprobs=True)
    assert o.finish_reason == "stop" and not o.complete and o.value is None
    assert o.text in ("item one", "item two")
    # token_ids end before the token that held the stop string: they spell a prefix of text
    spelled = model.tokenizer.decode(o.token_ids)
    assert o.text.startswith(spelled) and len(o.logprobs) == len(o.token_ids) and "," not in spelled
    with pytest.raises(guided.IncompleteOutputError):
        gen("List two items.", stop=",", max_tokens=16)


def test_stop_string_ends_stream(async_model):
    gen = guided.regex(async_model, r"item (one|two), (one|two), done")
    pieces, out = drain(gen.stream("List two items.", stop=",", max_tokens=16))
    assert "".join(pieces) == out.text in ("item one", "item two") and out.finish_reason == "stop"
    assert out.text.startswith(async_model.tokenizer.decode(out.token_ids))


def test_logprobs_per_token(model):
    gen = guided.regex(model, DATE)
    (o,) = gen.generate(PROMPT, logprobs=True, max_tokens=16)
    assert o.complete and len(o.logprobs) == len(o.token_ids)
    sampled = [x for x in o.logprobs if x is not None]
    assert sampled and all(x <= 0.0 for x in sampled)
    assert gen.generate(PROMPT, max_tokens=16)[0].logprobs is None


def test_failing_prompt_is_named_and_others_kept(model):
    gen = guided.regex(model, DATE, chat=False)
    with pytest.raises(guided.GenerationError, match="prompt 1") as err:
        gen.generate(["Apollo 11 landed on", ""], max_tokens=16)
    assert list(err.value.errors) == [1] and "empty prompt" in err.value.errors[1]
    first, second = err.value.outputs
    assert re.fullmatch(DATE, first.text) and first.complete
    assert second.finish_reason == "error" and second.error
