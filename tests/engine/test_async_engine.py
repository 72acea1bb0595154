"""AsyncEngine on the embedded SmolLM2-135M: requests from threads and asyncio tasks give
the tokens of one-at-a-time LLM.generate; abort frees every block; a slow or bad
constraint fails its own request only."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest
from oracles import PROMPTS

from structgen.engine import SamplingParams
from structgen.engine.async_engine import AsyncEngine, CompileTimeoutError, RequestError
from structgen.fsm import RegexError

MAX_NEW = 12


@pytest.fixture(scope="module")
def reference(llm):
    """Greedy tokens of each prompt, generated alone (before any engine owns the LLM)."""
    params = SamplingParams(max_tokens=MAX_NEW)
    return [llm.generate(p, params, use_tqdm=False)[0].token_ids for p in PROMPTS]


@pytest.fixture
def engine(llm, reference):
    eng = AsyncEngine(llm)
    yield eng
    eng.close()
    assert llm._engine is None
    assert_all_free(llm)


def assert_all_free(llm):
    bm = llm.block_manager
    assert bm.num_free_blocks == bm.num_blocks
    assert all(r == 0 for r in bm.ref_counts)
    assert not llm.scheduler.running and not llm.scheduler.waiting


def consume(stream):
    """Token ids and text concatenated from the deltas, and the last finish reason."""
    ids, text, reason = [], "", None
    for d in stream:
        ids += d.token_ids
        text += d.text
        reason = d.finish_reason or reason
    return ids, text, reason


def test_threads_match_generate(engine, reference):
    results = [None] * len(PROMPTS)

    def worker(i):
        stream = engine.add_request(PROMPTS[i], SamplingParams(max_tokens=MAX_NEW))
        results[i] = consume(stream), stream.result()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for ((ids, text, reason), out), ref in zip(results, reference):
        assert ids == ref == out.token_ids
        assert text == out.text
        assert reason == out.finish_reason in ("length", "stop")


def test_asyncio_tasks_match_generate(engine, reference):
    async def one(prompt):
        ids, text = [], ""
        stream = engine.add_request(prompt, SamplingParams(max_tokens=MAX_NEW))
        async for d in stream:
            ids += d.token_ids
            text += d.text
        out = await stream.result_async()
        assert text == out.text
        return ids

    async def main():
        return await asyncio.gather(*(one(p) for p in PROMPTS))

    assert asyncio.run(main()) == reference


def test_generate_routes_through_engine(engine, llm, reference):
    """While an engine owns the LLM, concurrent llm.generate calls go through it."""
    got = {}

    def worker(k):
        got[k] = [o.token_ids for o in llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_NEW))]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] == got[1] == reference


def test_concurrent_generate_without_engine(llm, reference):
    """Two threads calling generate on a plain LLM: the second waits its turn."""
    plain = llm.with_config()
    got = {}

    def worker(k):
        got[k] = [o.token_ids for o in plain.generate(PROMPTS[:3], SamplingParams(max_tokens=MAX_NEW))]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] == got[1] == reference[:3]


def test_abort_mid_stream_frees_blocks(engine, llm):
    stream = engine.add_request(PROMPTS[3], SamplingParams(max_tokens=400, ignore_eos=True, n=2))
    seen = 0
    for d in stream:
        seen += len(d.token_ids)
        if seen >= 3:
            stream.abort()
        if d.finish_reason:
            assert d.finish_reason == "abort"
    out = stream.result()
    assert [o.finish_reason for o in out.outputs] == ["abort", "abort"]
    assert 3 <= len(out.token_ids) < 400
    assert_all_free(llm)


def test_abort_while_compiling(engine, llm, monkeypatch):
    real = llm.constraints.get
    monkeypatch.setattr(llm.constraints, "get", lambda spec: (time.sleep(0.5), real(spec))[1])
    stream = engine.add_request("Pick:", SamplingParams(max_tokens=4, constraint=("regex", "ab|cd")))
    engine.abort(stream.request_id)
    assert stream.result().finish_reason == "abort"


def test_compile_over_budget_fails_alone(engine, llm, monkeypatch):
    real = llm.constraints.get
    release = threading.Event()

    def slow(spec):
        release.wait(10)
        return real(spec)

    monkeypatch.setattr(llm.constraints, "get", slow)
    engine.compile_timeout_s = 0.2
    spec = ("regex", "(yes|no)")
    slow_stream = engine.add_request("Answer:", SamplingParams(max_tokens=4, constraint=spec))
    plain = engine.add_request(PROMPTS[0], SamplingParams(max_tokens=MAX_NEW))
    with pytest.raises(CompileTimeoutError, match=r"budget of 0\.2 s \(compile_timeout_s\)"):
        list(slow_stream)
    assert plain.result().finish_reason in ("length", "stop")
    # The compile went on; once done, the next request with that spec reuses it.
    release.set()
    time.sleep(0.3)
    engine.compile_timeout_s = 0.2
    out = engine.add_request("Answer:", SamplingParams(max_tokens=4, constraint=spec)).result()
    assert out.text in ("yes", "no")


def test_bad_regex_fails_alone(engine, llm):
    with pytest.raises(RegexError) as oracle:
        llm.constraints.get(("regex", "[a-"))
    bad = engine.add_request("x", SamplingParams(max_tokens=4, constraint=("regex", "[a-")))
    good = engine.add_request(PROMPTS[1], SamplingParams(max_tokens=MAX_NEW))
    with pytest.raises(RegexError) as got:
        bad.result()
    assert str(got.value) == str(oracle.value)
    assert good.result().finish_reason in ("length", "stop")


def test_bad_prompt_fails_alone(engine, llm):
    with pytest.raises(RequestError, match="max_model_len"):
        engine.add_request(list(range(llm.max_model_len + 1)), SamplingParams(max_tokens=2)).result()


def test_close_aborts_everything(llm, reference):
    eng = AsyncEngine(llm)
    stream = eng.add_request(PROMPTS[0], SamplingParams(max_tokens=400, ignore_eos=True))
    next(iter(stream))
    eng.close()
    assert stream.result().finish_reason == "abort"
    with pytest.raises(RequestError, match="closed"):
        eng.add_request("x")
    assert_all_free(llm)
