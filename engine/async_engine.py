"""The online API: one background thread steps an `LLM` while requests come and go.

`AsyncEngine(llm)` owns the LLM's step loop. Any thread or asyncio task may call
`add_request` (which returns a `RequestStream` of output deltas) and `abort`, at any
time. Constraint specs compile off the loop, in worker processes (engine/compile_pool.py),
within a time budget per request: a slow or broken constraint fails its own request,
and neither the loop nor any other request waits for it (nor for the GIL it holds).

    >>> engine = AsyncEngine(LLM())                                          # doctest: +SKIP
    >>> stream = engine.add_request("Hi", SamplingParams(max_tokens=8))      # doctest: +SKIP
    >>> for delta in stream: print(delta.text, end="")                       # doctest: +SKIP
    >>> async for delta in engine.add_request("Hi"): ...                     # doctest: +SKIP
    >>> engine.close()                                                       # doctest: +SKIP

Beam search runs here too (`add_beam_search`, `await beam_search(...)`): its steps take
turns with the steps of the other requests, on a scheduler of its own over the same KV
blocks; its stream carries no deltas (beams are ranked only at the end) and its result is
a `BeamSearchOutput`.

Every request ends either completed (`result()` returns its `RequestOutput`; a sample's
finish_reason may be "abort" or "error") or failed (`result()` and iteration raise: a
`ConstraintError` with the compiler's message, `CompileTimeoutError`, `RequestError`).
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from ..fsm import ConstraintError
from .beam_search import BeamSearch, BeamSearchOutput
from .compile_pool import CompilePool, budgeted
from .constraints import compile_spec
from .llm import LLM, CompletionOutput, RequestOutput
from .metrics import EngineMetrics
from .sampling_params import BeamSearchParams, SamplingParams
from .scheduler import Scheduler
from .sequence import Sequence


class RequestError(RuntimeError):
    """A request that could not be run (empty prompt, prompt too long, engine closed)."""


class CompileTimeoutError(ConstraintError):
    """A constraint took longer to compile than the request's budget (`compile_timeout_s`)."""


@dataclass
class StreamDelta:
    """What one sample of a request produced since the previous delta."""
    index: int                       # the sample (0 .. n-1)
    token_ids: list[int]
    text: str
    logprobs: list | None = None     # per new token {id: logprob} (None for a forced token
                                     # whose logprobs were not yet computed), if requested
    finish_reason: str | None = None  # set on the sample's last delta
    stop_reason: object = None
    error: str | None = None


class RequestStream:
    """The deltas of one request, as a blocking iterator or an async iterator (one
    consumer), and its final `RequestOutput` through `result()` / `await result_async()`."""

    def __init__(self, engine: AsyncEngine, request_id: str, n: int):
        self.engine = engine
        self.request_id = request_id
        self.n = n
        self._cond = threading.Condition()
        self._items: deque[StreamDelta] = deque()
        self._done = False
        self._output: RequestOutput | None = None
        self._error: BaseException | None = None
        self._async_waiters: list = []   # (event loop, asyncio.Event) of awaiting consumers

    # -- producer side (the engine's thread) ---------------------------------------
    def _push(self, delta: StreamDelta) -> None:
        with self._cond:
            self._items.append(delta)
            self._notify()

    def _end(self, output: RequestOutput | None = None, error: BaseException | None = None) -> None:
        with self._cond:
            if self._done:
                return
            self._output, self._error, self._done = output, error, True
            self._notify()

    def _notify(self) -> None:
        self._cond.notify_all()
        for loop, event in self._async_waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:          # that event loop is closed: nobody waits there
                pass
        self._async_waiters.clear()

    # -- consumer side -------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self._done

    def __iter__(self):
        while True:
            with self._cond:
                while not self._items and not self._done:
                    self._cond.wait()
                if not self._items:
                    break
                delta = self._items.popleft()
            yield delta
        if self._error is not None:
            raise self._error

    def __aiter__(self):
        return self._aiter()

    async def _aiter(self):
        loop = asyncio.get_running_loop()
        while True:
            with self._cond:
                if self._items:
                    delta, event = self._items.popleft(), None
                elif self._done:
                    break
                else:
                    delta, event = None, asyncio.Event()
                    self._async_waiters.append((loop, event))
            if event is not None:
                await event.wait()
                continue
            yield delta
        if self._error is not None:
            raise self._error

    def result(self, timeout: float | None = None) -> RequestOutput:
        """Wait for the end; return the RequestOutput or raise why the request failed."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._done, timeout):
                raise TimeoutError(f"request {self.request_id} still running after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._output

    async def result_async(self) -> RequestOutput:
        async for _ in self:
            pass
        return self.result()

    def abort(self) -> None:
        self.engine.abort(self.request_id)


@dataclass
class _Request:
    stream: RequestStream
    prompt: object
    params: SamplingParams | BeamSearchParams
    arrival: float
    compile: Future | None = None     # the constraint spec compiling, if any
    deadline: float = 0.0
    out: RequestOutput | None = None  # once added to the LLM
    seqs: list[Sequence] | None = None
    sent_tokens: list[int] | None = None
    sent_text: list[int] | None = None
    first_token_at: float | None = None
    beams: object = None              # a beam search's request in BeamSearch, once added


class AsyncEngine:
    """Drive `llm` from one background thread; add and abort requests from anywhere.

    `compile_timeout_s`: each request's budget for compiling its constraint spec (past it
    the request fails; the compile goes on and its result is kept for the next request
    with the same spec, unless it had not started: then it is dropped). The compile runs
    inside `fsm.compile_budget(compile_timeout_s)`, so it stops itself, with fsm's
    TimeBudgetError, within about 10% past the budget. `compile_workers`:
    compiles at once. `compile_processes`: in worker processes (the default), else in
    threads of this process, where a long compile slows the step loop (it holds the
    GIL) and cannot be stopped. `compile_hard_limit_s` (processes only; default 10x the
    budget): a compile running longer is killed with its worker. `compile_fn(spec,
    vocab)`: what compiles a spec (a module-level function: the workers import it).
    While an engine owns the LLM, `llm.generate` goes through it.
    """

    COMPILE_CACHE_SIZE = 64

    def __init__(self, llm: LLM, compile_timeout_s: float = 5.0, compile_workers: int = 2,
                 compile_processes: bool = True, compile_hard_limit_s: float | None = None,
                 compile_fn=compile_spec):
        if compile_timeout_s <= 0:
            raise ValueError("compile_timeout_s must be > 0")
        if getattr(llm, "_engine", None) is not None:
            raise RuntimeError("this LLM is already driven by an AsyncEngine")
        self.llm = llm
        self.compile_timeout_s = compile_timeout_s
        self.metrics = EngineMetrics()
        self._cond = threading.Condition()
        self._inbox: deque = deque()          # ("add", _Request) | ("abort", request_id)
        self._pending: dict[str, _Request] = {}   # compiling (loop thread only)
        self._active: dict[str, _Request] = {}    # in the LLM (loop thread only)
        self._beam_active: dict[str, _Request] = {}   # beam searches in self._beams (loop thread only)
        self._beams = BeamSearch(llm, Scheduler(llm.config, llm.block_manager),
                                 others_busy=llm.scheduler.has_unfinished)
        self._ids: set[str] = set()               # every unfinished request id
        self._counter = itertools.count()
        self._compiled: OrderedDict = OrderedDict()  # spec key -> Future (kept for reuse)
        self._compile_args = (compile_workers, compile_processes, compile_hard_limit_s, compile_fn)
        self._pool = None                     # made on the first spec (processes start then)
        self._closed = False
        llm._engine = self
        self._thread = threading.Thread(target=self._run, name="structgen-engine", daemon=True)
        self._thread.start()

    # -- public API -------------------------------------------------------------------
    def add_request(self, prompt, params: SamplingParams | None = None,
                    request_id: str | None = None) -> RequestStream:
        """Queue a prompt (text or token ids); return its stream at once."""
        params = params or SamplingParams()
        if (params.best_of or params.n) > params.n or params.prompt_logprobs is not None:
            # (its streams carry samples as they are made: nothing to rank, no prompt entries)
            raise ValueError("SamplingParams.best_of > n and prompt_logprobs are offline only: use LLM.generate")
        return self._queue(prompt, params, request_id, params.n)

    def _queue(self, prompt, params, request_id: str | None, n: int) -> RequestStream:
        with self._cond:
            if self._closed:
                raise RequestError("the engine is closed")
            rid = request_id if request_id is not None else f"req-{next(self._counter)}"
            if rid in self._ids:
                raise ValueError(f"request id {rid!r} is already in use")
            self._ids.add(rid)
        req = _Request(RequestStream(self, rid, n), prompt, params, time.monotonic())
        c = params.constraint
        if c is not None and not hasattr(c, "matcher"):
            req.compile = self._compile(c)
            req.deadline = req.arrival + self.compile_timeout_s
        with self._cond:
            self._inbox.append(("add", req))
            self._cond.notify()
        return req.stream

    def add_beam_search(self, prompt, params: BeamSearchParams, request_id: str | None = None) -> RequestStream:
        """Queue a beam search of a prompt (text or token ids); return its stream at once.
        The stream carries no deltas; `result()` / `await result_async()` give the
        `BeamSearchOutput` (hypotheses best first; `error` set where it failed while
        running, or "aborted"). A prompt or constraint that cannot run raises there, as
        for `add_request`. A `beam_width` over max_num_seqs raises ValueError here."""
        if not isinstance(params, BeamSearchParams):
            raise ValueError(f"add_beam_search needs BeamSearchParams, not {type(params).__name__}")
        self._beams.check(params)
        return self._queue(prompt, params, request_id, params.beam_width)

    async def beam_search(self, prompt, params: BeamSearchParams, request_id: str | None = None) -> BeamSearchOutput:
        """`add_beam_search`, awaited: the BeamSearchOutput.

        >>> out = await engine.beam_search("Hi", BeamSearchParams(4, max_tokens=8))   # doctest: +SKIP
        """
        return await self.add_beam_search(prompt, params, request_id).result_async()

    def run_beam_search(self, prompts: list, params: list[BeamSearchParams]) -> list[BeamSearchOutput]:
        """`LLM.beam_search` through the engine: add every prompt, wait for all of them; a
        request that could not run has `error` set."""
        for p in params:
            self._beams.check(p)
        outs = []
        for prompt, s in [(prompt, self.add_beam_search(prompt, p)) for prompt, p in zip(prompts, params)]:
            try:
                outs.append(s.result())
            except (ConstraintError, RequestError) as e:
                outs.append(_failed_beam_output(prompt, str(e)))
        return outs

    def abort(self, request_id: str) -> None:
        """Finish the request (its samples end with finish_reason "abort") and free its
        KV blocks; a no-op for a finished or unknown id."""
        with self._cond:
            self._inbox.append(("abort", request_id))
            self._cond.notify()

    def generate(self, prompts: list, params: list[SamplingParams]) -> list[RequestOutput]:
        """`LLM.generate` through the engine: add every prompt, wait for all of them."""
        streams = [self.add_request(p, sp) for p, sp in zip(prompts, params)]
        outs = []
        for s, sp, p in zip(streams, params, prompts):
            try:
                outs.append(s.result())
            except (ConstraintError, RequestError) as e:
                outs.append(_failed_output(p, sp, str(e), "error"))
        return outs

    def close(self) -> None:
        """Abort every request, stop the loop thread and the compile threads."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        with self._cond:
            pool, self._pool = self._pool, None
        if isinstance(pool, CompilePool):
            pool.close()
        elif pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def alive(self) -> bool:
        """Whether the step loop is running (the server's /health)."""
        return self._thread.is_alive()

    @property
    def num_running(self) -> int:
        return len(self.llm.scheduler.running) + len(self._beams.scheduler.running)

    @property
    def num_waiting(self) -> int:
        return (len(self.llm.scheduler.waiting) + len(self._beams.scheduler.waiting) + len(self._pending)
                + len(self._beams.pending))

    # -- compiling ----------------------------------------------------------------------
    def _compile(self, spec) -> Future:
        _ = self.llm.constraints.vocabulary      # (built once, here: not under the lock below)
        try:
            key = json.dumps(list(spec) if isinstance(spec, tuple) else spec, sort_keys=True, default=repr)
        except (TypeError, ValueError):
            key = None
        with self._cond:
            fut = self._compiled.get(key) if key is not None else None
            if fut is not None and not fut.cancelled():
                self._compiled.move_to_end(key)
                return fut
            fut = self._submit(spec)
            if key is not None:
                self._compiled[key] = fut
                while len(self._compiled) > self.COMPILE_CACHE_SIZE:
                    self._compiled.popitem(last=False)
        fut.add_done_callback(lambda _f: self._wake())
        return fut

    def _submit(self, spec) -> Future:
        """(under self._cond)"""
        if self._closed:
            raise RequestError("the engine is closed")
        if self._pool is None:
            workers, processes, hard_limit, compile_fn = self._compile_args
            if processes:
                hard_limit = 10 * self.compile_timeout_s if hard_limit is None else hard_limit
                self._pool = CompilePool(self.llm.constraints.vocabulary, workers, hard_limit, compile_fn,
                                         budget_s=self.compile_timeout_s)
            else:
                self._pool = ThreadPoolExecutor(workers, thread_name_prefix="structgen-compile")
        if isinstance(self._pool, CompilePool):
            return self._pool.submit(spec)
        return self._pool.submit(self._compile_fn_here, spec)

    def _compile_fn_here(self, spec):
        return budgeted(self._compile_args[3], spec, self.llm.constraints.vocabulary, self.compile_timeout_s)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    # -- the loop (one thread) ------------------------------------------------------------
    def _run(self) -> None:
        llm = self.llm
        while True:
            with self._cond:
                while not (self._closed or self._inbox or llm.scheduler.has_unfinished()
                           or self._beams.has_unfinished() or self._pending_ready()):
                    self._cond.wait(self._next_deadline())
                inbox = list(self._inbox)
                self._inbox.clear()
                closed = self._closed
            with llm._lock:
                for kind, item in inbox:
                    if kind == "add":
                        self._pending[item.stream.request_id] = item
                    else:
                        self._abort(item)
                if closed:
                    for rid in list(self._pending) + list(self._active) + list(self._beam_active):
                        self._abort(rid)
                    break
                self._start_ready()
                if llm.scheduler.has_unfinished():
                    try:
                        llm.step()
                    except Exception as e:  # noqa: BLE001 - the step failed: its requests fail, the loop goes on
                        self._fail_all_active(e)
                    self._emit()
                if self._beams.has_unfinished():     # (its turn: one beam step)
                    try:
                        done = self._beams.step()
                    except Exception as e:  # noqa: BLE001 - the step failed: its beam requests fail, the loop goes on
                        done = self._beams.abort_all(f"engine step failed: {type(e).__name__}: {e}")
                        llm.block_manager.reset_prefix_cache()   # (published blocks may be unwritten)
                    for r in done:
                        self._end_beam_search(r)
        llm._engine = None

    def _pending_ready(self) -> bool:
        now = time.monotonic()
        return any(r.compile is None or r.compile.done() or now >= r.deadline
                   for r in self._pending.values())

    def _next_deadline(self) -> float | None:
        if not self._pending:
            return None
        return max(0.0, min(r.deadline for r in self._pending.values()) - time.monotonic()) + 1e-3

    def _start_ready(self) -> None:
        now = time.monotonic()
        for rid, req in list(self._pending.items()):
            params = req.params
            if req.compile is not None:
                if req.compile.cancelled():     # dropped by a request that gave up on it: again
                    req.compile = self._compile(params.constraint)
                if req.compile.done():
                    try:
                        params = dataclasses.replace(params, constraint=req.compile.result())
                    except Exception as e:  # noqa: BLE001 - a compile failure fails this request only
                        del self._pending[rid]
                        if not isinstance(e, ConstraintError):
                            e = ConstraintError(f"cannot compile constraint: {type(e).__name__}: {e}")
                        self._fail(req, e)
                        continue
                elif now >= req.deadline:
                    del self._pending[rid]
                    kind = params.constraint[0] if isinstance(params.constraint, (tuple, list)) else "constraint"
                    # A compile that nobody else waits for and that has not started (every
                    # worker busy) is dropped: the queue holds only what someone waits for.
                    shared = any(r.compile is req.compile for r in self._pending.values())
                    fate = ("it had not started (every compile worker was busy) and is dropped"
                            if not shared and req.compile.cancel() else
                            "the compile goes on in the background and its result is kept for the next request")
                    self._fail(req, CompileTimeoutError(
                        f"compiling the {kind} constraint took longer than its budget of "
                        f"{self.compile_timeout_s:g} s (compile_timeout_s); {fate}"))
                    continue
                else:
                    continue
            del self._pending[rid]
            if isinstance(params, BeamSearchParams):
                self._start_beam_search(req, params)
                continue
            try:
                req.out, req.seqs = self.llm._add_request(req.prompt, params)
            except Exception as e:  # noqa: BLE001 - e.g. a tokenizer failure: this request only
                self._fail(req, RequestError(f"cannot add request: {type(e).__name__}: {e}"))
                continue
            if all(s.is_finished for s in req.seqs):       # refused when added
                self._refuse(req, req.seqs[0].error)
                continue
            n = len(req.seqs)
            req.sent_tokens, req.sent_text = [0] * n, [0] * n
            self.metrics.prompt_tokens += len(req.out.prompt_token_ids)
            self._active[rid] = req

    def _refuse(self, req: _Request, error: str | None) -> None:
        err = error or "request refused"
        self._fail(req, (ConstraintError if err.startswith("cannot create matcher") else RequestError)(err))

    def _start_beam_search(self, req: _Request, params: BeamSearchParams) -> None:
        try:
            req.beams = self._beams.add(req.prompt, params)
        except Exception as e:  # noqa: BLE001 - e.g. a tokenizer failure: this request only
            return self._fail(req, RequestError(f"cannot add request: {type(e).__name__}: {e}"))
        if req.beams.out.error is not None:             # refused when added
            return self._refuse(req, req.beams.out.error)
        self.metrics.prompt_tokens += len(req.beams.out.prompt_token_ids)
        self._beam_active[req.stream.request_id] = req

    def _end_beam_search(self, beams) -> None:
        rid = next((rid for rid, req in self._beam_active.items() if req.beams is beams), None)
        if rid is None:
            return
        req = self._beam_active.pop(rid)
        out = beams.out
        self.metrics.generation_tokens += sum(len(s.token_ids) for s in out.sequences)
        self._record_end(req, time.monotonic(), "aborted" if out.error == "aborted"
                         else "error" if out.error else "completed")
        with self._cond:
            self._ids.discard(rid)
        req.stream._end(out)

    def _emit(self) -> None:
        """Push each active request's new tokens and text; end the finished ones."""
        now = time.monotonic()
        for rid, req in list(self._active.items()):
            hold = max((len(s) for s in req.params.stop), default=1) - 1
            for i, seq in enumerate(req.seqs):
                if req.sent_tokens[i] < 0:          # this sample's last delta is out
                    continue
                new_ids = seq.output_token_ids[req.sent_tokens[i]:]
                # Text that could begin a stop string is held back until known not to.
                end = len(seq.text) if seq.is_finished else max(req.sent_text[i], len(seq.text) - hold)
                text = seq.text[req.sent_text[i]:end]
                if not (new_ids or text or seq.is_finished):
                    continue
                lps = None
                if seq.logprobs is not None:
                    lps = seq.logprobs[req.sent_tokens[i]:req.sent_tokens[i] + len(new_ids)]
                if new_ids and req.first_token_at is None:
                    req.first_token_at = now
                    self.metrics.ttft.observe(now - req.arrival)
                self.metrics.generation_tokens += len(new_ids)
                delta = StreamDelta(i, new_ids, text, lps)
                req.sent_tokens[i] += len(new_ids)
                req.sent_text[i] = end
                if seq.is_finished:
                    delta.finish_reason, delta.stop_reason, delta.error = (
                        seq.finish_reason, seq.stop_reason, seq.error)
                    req.sent_tokens[i] = -1
                req.stream._push(delta)
            if all(s.is_finished for s in req.seqs):
                del self._active[rid]
                out = self.llm._output(req.out, req.seqs)
                self._record_end(req, now, "aborted" if any(s.finish_reason == "abort" for s in req.seqs)
                                 else "error" if any(s.finish_reason == "error" for s in req.seqs)
                                 else "completed")
                with self._cond:
                    self._ids.discard(rid)
                req.stream._end(out)

    def _record_end(self, req: _Request, now: float, outcome: str) -> None:
        self.metrics.requests[outcome] = self.metrics.requests.get(outcome, 0) + 1
        if req.seqs and req.first_token_at is not None:
            n = max(s.num_output_tokens for s in req.seqs)
            if n > 1:
                self.metrics.tpot.observe((now - req.first_token_at) / (n - 1))

    def _abort(self, rid: str) -> None:
        sched = self.llm.scheduler
        if rid in self._beam_active:
            beams = self._beam_active[rid].beams
            self._beams.abort(beams)
            self._end_beam_search(beams)
        elif rid in self._pending:
            req = self._pending.pop(rid)
            with self._cond:
                self._ids.discard(rid)
            self.metrics.requests["aborted"] = self.metrics.requests.get("aborted", 0) + 1
            req.stream._end(_failed_beam_output(req.prompt, "aborted") if isinstance(req.params, BeamSearchParams)
                            else _failed_output(req.prompt, req.params, None, "abort"))
        elif rid in self._active:
            for seq in self._active[rid].seqs:
                if not seq.is_finished:
                    seq.finish_reason = "abort"
                    if seq in sched.waiting:
                        sched.waiting.remove(seq)
                    sched.finish(seq)      # frees its blocks
                    if self.llm.speculator is not None:     # and its draft model's
                        self.llm.speculator.release(seq)
            self._emit()

    def _fail(self, req: _Request, error: BaseException) -> None:
        with self._cond:
            self._ids.discard(req.stream.request_id)
        self._record_end(req, time.monotonic(), "failed")
        req.stream._end(error=error)

    def _fail_all_active(self, e: Exception) -> None:
        msg = f"engine step failed: {type(e).__name__}: {e}"
        for req in self._active.values():
            for seq in req.seqs:
                if not seq.is_finished:
                    seq.finish_reason, seq.error = "error", msg
        # The step was interrupted: some published blocks may never have been written.
        self.llm.abort_all()


def _prompt_fields(prompt) -> tuple[str | None, list[int]]:
    """(text, token ids) of a prompt that never reached the LLM (ids only where given)."""
    return (prompt, []) if isinstance(prompt, str) else (None, [int(t) for t in prompt])


def _failed_beam_output(prompt, error: str) -> BeamSearchOutput:
    return BeamSearchOutput(-1, *_prompt_fields(prompt), error=error)


def _failed_output(prompt, params: SamplingParams, error: str | None, reason: str) -> RequestOutput:
    return RequestOutput(-1, *_prompt_fields(prompt), [CompletionOutput(i, "", [], reason, error=error)
                                                       for i in range(params.n)])
