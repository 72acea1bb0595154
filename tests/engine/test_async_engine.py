"""AsyncEngine on the embedded SmolLM2-135M: requests from threads and asyncio tasks give
the tokens of one-at-a-time LLM.generate; abort frees every block; a slow or bad
constraint fails its own request only; constraints compiled in worker processes give
the tokens of those compiled here; the workers end with the engine."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest
from compile_hooks import GATE, boot_workers, gated
from oracles import PROMPTS

from structgen.engine import SamplingParams
from structgen.engine.async_engine import AsyncEngine, CompileTimeoutError, RequestError
from structgen.engine.compile_pool import CompileKilledError
from structgen.fsm import RegexError

MAX_NEW = 12


@pytest.fixture(scope="module")
def reference(llm):
    """Greedy tokens of each prompt, generated alone (before any engine owns the LLM)."""
    params = SamplingParams(max_tokens=MAX_NEW)
    return [llm.generate(p, params, use_tqdm=False)[0].token_ids for p in PROMPTS]


GUIDED = [("json", {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b", "c"]},
                                                                 "uniqueItems": True}},
                    "additionalProperties": {"type": "integer"}}),
          ("regex", r"[A-Z][a-z]{2,7}( [a-z]{1,6}){0,3}\."),
          ("grammar", 'start: "(" NUM ("+" NUM)* ")"\nNUM: /[0-9]{1,2}/\n')]


@pytest.fixture(scope="module")
def guided_reference(llm):
    """Each GUIDED spec's greedy tokens, compiled in this process (before any engine)."""
    return [llm.generate(PROMPTS[0], SamplingParams(max_tokens=24, constraint=c), use_tqdm=False)[0].token_ids
            for c in GUIDED]


@pytest.fixture
def engine(llm, reference, guided_reference):
    eng = AsyncEngine(llm, compile_fn=gated)
    yield eng
    eng.close()
    assert llm._engine is None
    assert_all_free(llm)


def gate_spec(tmp_path, name="gate"):
    """A JSON spec ("yes" or "no") whose compile waits until the returned file exists."""
    path = tmp_path / name
    return ("json", {"enum": ["yes", "no"], "description": f"{GATE}{path}"}), path


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


def test_constraints_compiled_in_workers_match_in_process(engine, guided_reference):
    streams = [engine.add_request(PROMPTS[0], SamplingParams(max_tokens=24, constraint=c)) for c in GUIDED]
    assert [s.result().token_ids for s in streams] == guided_reference
    assert engine._pool.workers == 2 and engine._pool._procs     # (compiled there, not here)


def test_abort_while_compiling(engine, tmp_path):
    spec, _ = gate_spec(tmp_path)
    stream = engine.add_request("Pick:", SamplingParams(max_tokens=4, constraint=spec))
    engine.abort(stream.request_id)
    assert stream.result().finish_reason == "abort"


def test_compile_over_budget_fails_alone(engine, tmp_path):
    spec, gate = gate_spec(tmp_path)
    boot_workers(engine)
    engine.compile_timeout_s = 0.2
    slow_stream = engine.add_request("Answer:", SamplingParams(max_tokens=4, constraint=spec))
    plain = engine.add_request(PROMPTS[0], SamplingParams(max_tokens=MAX_NEW))
    with pytest.raises(CompileTimeoutError, match=r"budget of 0\.2 s \(compile_timeout_s\); the compile goes on"):
        list(slow_stream)
    assert plain.result().finish_reason in ("length", "stop")
    # The compile went on; once done, the next request with that spec reuses it.
    gate.touch()
    time.sleep(0.5)
    out = engine.add_request("Answer:", SamplingParams(max_tokens=4, constraint=spec)).result()
    assert out.text in ('"yes"', '"no"')


def test_queued_compile_is_dropped_when_its_request_gives_up(llm, tmp_path):
    """One worker, busy: the compile queued behind it never starts before its request's
    budget ends; it is dropped then, and compiled anew for a later request."""
    with AsyncEngine(llm, compile_workers=1, compile_fn=gated) as eng:
        busy, gate = gate_spec(tmp_path)
        queued = ("regex", "(yes|no)")
        boot_workers(eng, 1)
        eng.compile_timeout_s = 0.3
        first = eng.add_request("Answer:", SamplingParams(max_tokens=4, constraint=busy))
        second = eng.add_request("Answer:", SamplingParams(max_tokens=4, constraint=queued))
        with pytest.raises(CompileTimeoutError, match="goes on in the background"):
            first.result()
        with pytest.raises(CompileTimeoutError, match="had not started .* is dropped"):
            second.result()
        gate.touch()
        eng.compile_timeout_s = 30
        assert eng.add_request("Answer:", SamplingParams(max_tokens=4, constraint=queued)).result().text in ("yes", "no")


def test_stuck_compile_is_killed_and_its_worker_replaced(llm, tmp_path):
    with AsyncEngine(llm, compile_timeout_s=30, compile_workers=1, compile_hard_limit_s=0.5,
                     compile_fn=gated) as eng:
        stuck, _ = gate_spec(tmp_path)            # (its gate never opens)
        with pytest.raises(CompileKilledError, match=r"hard limit of 0\.5 s; its compile worker was killed"):
            eng.add_request("Answer:", SamplingParams(max_tokens=4, constraint=stuck)).result()
        out = eng.add_request("Answer:", SamplingParams(max_tokens=4, constraint=("regex", "(yes|no)"))).result()
        assert out.text in ("yes", "no") and eng._pool.killed == 1


def test_compile_workers_end_with_the_engine(llm):
    eng = AsyncEngine(llm, compile_workers=2)
    eng.add_request("Answer:", SamplingParams(max_tokens=2, constraint=("regex", "(yes|no)"))).result()
    eng.add_request("Answer:", SamplingParams(max_tokens=2, constraint=("regex", "(ja|nein)"))).result()
    procs = [w.proc for w in eng._pool._procs]
    assert procs and all(p.poll() is None for p in procs)
    eng.close()
    assert all(p.poll() is not None for p in procs)


def test_unpicklable_spec_compiles_in_this_process(engine):
    """A Pydantic class made in a function cannot reach a worker: it compiles here."""
    import json

    import pydantic

    class Answer(pydantic.BaseModel):
        ok: bool

    out = engine.add_request("Answer:", SamplingParams(max_tokens=12, constraint=("json", Answer))).result()
    assert Answer.model_validate(json.loads(out.text))


def test_threads_instead_of_processes(llm, guided_reference):
    with AsyncEngine(llm, compile_processes=False) as eng:
        streams = [eng.add_request(PROMPTS[0], SamplingParams(max_tokens=24, constraint=c)) for c in GUIDED]
        assert [s.result().token_ids for s in streams] == guided_reference


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
