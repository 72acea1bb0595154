"""Data-parallel replicas on CPU: two engines (conftest's tiny_llama) behind one Replicas,
against one LLM on the same weights; the router alone; the server and its CLI flag."""
from __future__ import annotations

import re
import time

import pytest
from oracles import PROMPTS

from structgen.engine import LLM, BeamSearchParams, SamplingParams
from structgen.engine.async_engine import AsyncEngine, RequestError
from structgen.engine.replicas import Replicas, Router, RouterOptions

MAX_NEW = 8
CONFIG = dict(max_num_seqs=8, block_size=8, num_kv_blocks=64, max_model_len=128)


@pytest.fixture(scope="module")
def single(tiny_llama):
    return LLM(tiny_llama[0], **CONFIG)


@pytest.fixture(scope="module")
def reps(tiny_llama):
    engines = [AsyncEngine(LLM(tiny_llama[0], **CONFIG), compile_processes=False) for _ in range(2)]
    r = Replicas(engines, RouterOptions(affinity_blocks=2, affinity_slack=1))
    yield r
    r.close()


def replica(r: Replicas, stream) -> int:
    return r.replicas.index(stream.engine)


def completed(r: Replicas) -> list[int]:
    return [e.metrics.requests.get("completed", 0) for e in r.replicas]


def wait_idle(r: Replicas, timeout=30.0):
    deadline = time.monotonic() + timeout
    while any(e.num_running or e.num_waiting for e in r.replicas) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_router_least_loaded_then_prefix_affinity_within_slack():
    r = Router(3, block_size=4, options=RouterOptions(affinity_blocks=2, affinity_slack=2))
    up = [True] * 3
    assert r.pick([1] * 7, [2, 0, 1], up) == 1                  # short prompt: least loaded
    assert r.pick([5] * 20, [0, 0, 0], up) == 0                 # ties: least recently routed
    assert r.pick([6] * 20, [0, 0, 0], up) == 2
    home = r.pick(list(range(8)) + [1], [3, 1, 0], up)          # first 8 tokens are the key
    assert home == 2
    assert r.pick(list(range(8)) + [2, 3], [0, 0, 2], up) == 2  # 2 over the least: still home
    assert r.pick(list(range(8)) + [4], [0, 0, 3], up) == 1     # 3 over: the least loaded (and
    assert r.pick(list(range(8)), [0, 0, 2], up) == 1           # least recently used), the new home
    assert r.pick(list(range(8)), [0, 0, 0], [True, False, True]) != 1   # a stopped replica: never
    with pytest.raises(RequestError, match="every replica is stopped"):
        r.pick([1], [0, 0, 0], [False] * 3)
    with pytest.raises(ValueError, match="affinity_slack must be an integer >= 0"):
        RouterOptions(affinity_slack=-1)


def test_every_request_answered_once_as_one_engine_would(reps, single):
    prompts = PROMPTS * 3
    params = [SamplingParams(max_tokens=MAX_NEW, constraint=("regex", r"[a-z ]{1,12}\.") if i % 2 else None)
              for i in range(len(prompts))]
    before = completed(reps)
    outs = reps.generate(prompts, params)
    want = single.generate(prompts, params, use_tqdm=False)
    assert [o.token_ids for o in outs] == [o.token_ids for o in want]
    assert all(o.error is None for o in outs)
    done = [a - b for a, b in zip(completed(reps), before)]
    assert sum(done) == len(prompts) and min(done) > 0          # each answered once; both served


def test_shared_long_prefix_stays_on_one_replica(reps):
    # The two long prompts share their first blocks; sent one after the other, the second
    # goes where the first went, and finds its prefix in that replica's cache.
    first = reps.add_request(PROMPTS[3], SamplingParams(max_tokens=2))
    first.result(60)
    second = reps.add_request(PROMPTS[4], SamplingParams(max_tokens=2))
    assert replica(reps, second) == replica(reps, first)
    assert second.result(60).num_cached_tokens >= 40


def test_abort_stays_with_its_replica(reps):
    wait_idle(reps)
    aborted = lambda: [e.metrics.requests.get("aborted", 0) for e in reps.replicas]  # noqa: E731
    # Prompts too short for prefix affinity: one each, to the least loaded.
    streams = [reps.add_request(p, SamplingParams(max_tokens=100, ignore_eos=True)) for p in PROMPTS[:2]]
    assert sorted(replica(reps, s) for s in streams) == [0, 1]
    for s in streams:
        next(iter(s))                   # running
    for k, s in enumerate(streams):
        before, i = aborted(), replica(reps, s)
        assert reps.replica_of(s.request_id) == i
        reps.abort(s.request_id)
        assert s.result(30).finish_reason == "abort"
        assert [a - b for a, b in zip(aborted(), before)] == [int(j == i) for j in range(2)]
        assert all(not t.finished for t in streams[k + 1:])            # the other one runs on
    reps.abort("no-such-request")       # unknown: nothing happens anywhere
    assert reps.replica_of(streams[0].request_id) is None


def test_beam_search_is_routed_and_equals_one_engine(reps, single):
    p = BeamSearchParams(2, max_tokens=4, stop=["x"])
    streams = [reps.add_beam_search(prompt, p) for prompt in PROMPTS[:2]]
    assert {replica(reps, s) for s in streams} == {0, 1}          # (least loaded: one each)
    for prompt, s in zip(PROMPTS[:2], streams):
        want = single.beam_search(prompt, p)[0]
        assert [b.token_ids for b in s.result(timeout=60).sequences] == [b.token_ids for b in want.sequences]
    wait_idle(reps)


def test_request_ids_are_unique_across_replicas(reps):
    a = reps.add_request(PROMPTS[0], SamplingParams(max_tokens=50, ignore_eos=True), request_id="x")
    with pytest.raises(ValueError, match="request id 'x' is already in use"):
        reps.add_request(PROMPTS[1], SamplingParams(max_tokens=2), request_id="x")
    reps.abort("x")
    a.result(30)


def test_errors_stay_with_their_replica(reps, monkeypatch):
    wait_idle(reps)
    broken = reps.replicas[1].llm

    def fail(*_a, **_k):
        raise RuntimeError("injected fault")
    monkeypatch.setattr(broken.runner, "execute", fail)
    streams = [reps.add_request(p, SamplingParams(max_tokens=4)) for p in PROMPTS[:4]]
    outs = [(replica(reps, s), s.result(60)) for s in streams]
    assert {i for i, _ in outs} == {0, 1}
    for i, out in outs:
        if i == 1:
            assert out.finish_reason == "error" and "injected fault" in out.error
        else:
            assert out.finish_reason == "length" and out.error is None


def test_metrics_per_replica_and_in_total(reps):
    from structgen.engine.metrics import render
    wait_idle(reps)
    text = render(reps)
    sample = dict(re.findall(r"^(\S+) (\S+)$", text, re.M))
    for outcome in ("completed", "error", "aborted"):
        total = int(sample[f'structgen_requests_total{{outcome="{outcome}"}}'])
        each = [int(sample[f'structgen_replica_requests_total{{replica="{i}",outcome="{outcome}"}}'])
                for i in range(2)]
        assert total == sum(each) == sum(e.metrics.requests.get(outcome, 0) for e in reps.replicas)
    count = int(sample["structgen_time_to_first_token_seconds_count"])
    assert count == sum(int(sample[f'structgen_replica_time_to_first_token_seconds_count{{replica="{i}"}}'])
                        for i in range(2)) > 0
    # Each family's HELP and TYPE once (a valid exposition).
    assert len(re.findall(r"^# TYPE structgen_replica_requests_total ", text, re.M)) == 1


def test_serve_cli_builds_replicas_behind_one_app(tiny_llama, monkeypatch):
    import importlib

    from fastapi.testclient import TestClient

    from structgen.engine import server
    cli = importlib.import_module("structgen.serve")
    got = {}
    monkeypatch.setattr(server, "serve", lambda engine, name, *a, **k: got.update(engine=engine, name=name))
    cli.main([str(tiny_llama[0]), "--data-parallel-size", "2", "--device", "cpu", "--max-model-len", "64",
              "--kv-cache-bytes", str(1 << 20), "--compile-workers", "1"])
    engine = got["engine"]
    try:
        assert isinstance(engine, Replicas) and len(engine.replicas) == 2
        client = TestClient(server.build_app(engine, got["name"]))
        assert client.get("/health").json() == {"status": "ok"}
        for _ in range(2):
            r = client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 3})
            assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "length"
        assert 'structgen_replica_requests_total{replica="1",outcome="completed"} 1' in client.get("/metrics").text
        engine.replicas[1].close()                  # a replica whose loop stopped:
        assert client.get("/health").status_code == 503
        for _ in range(2):                          # gets no more requests
            r = client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 3})
            assert r.status_code == 200
        assert [e.metrics.requests.get("completed", 0) for e in engine.replicas] == [3, 1]
    finally:
        engine.close()
