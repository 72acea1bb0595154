"""Constraint compiles in worker processes: a slow compile holds no lock that the engine's
step loop needs (the GIL), and a stuck one can be killed.

    >>> pool = CompilePool(vocab, workers=2, hard_limit_s=50)      # doctest: +SKIP
    >>> pool.submit(("json", schema)).result().matcher()            # doctest: +SKIP
    >>> pool.close()                                                 # doctest: +SKIP

Each worker is a fresh interpreter (`python -m structgen.engine.compile_pool`: never a
fork of a process with torch threads; it imports fsm, not torch) that rebuilds the
vocabulary once from its tokens, then compiles specs with `compile_fn(spec, vocab)` and
sends back the constraint (fsm/core/transport.py: the vocabulary by reference). Workers
start with the pool's first compile. One thread per worker here waits for its results
(without the GIL) and loads them. A compile past `hard_limit_s` kills its worker, which
is replaced for the next spec; a worker that dies fails only its own spec. Specs that
cannot be pickled (a Pydantic class defined in a function) compile in that thread, in
this process. docs/serving.md says why and what it costs.
"""
from __future__ import annotations

import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Connection

from ..fsm import ConstraintError, compile_budget
from ..fsm.core import transport
from .constraints import compile_spec

# Workers yield the CPU to the step loop where cores are short: a decode step waits on
# every request, a compile on one (and on a busy host it may then run past its budget).
WORKER_NICENESS = 19


class CompileKilledError(ConstraintError):
    """A compile ran past the pool's hard limit: its worker was killed."""


class CompilePool:
    """`workers` compile processes over `vocab` (an fsm.Vocabulary).

    `compile_fn(spec, vocab) -> Constraint` runs in the workers: a module-level function
    (pickled by name, imported there). `budget_s`: each compile's time budget
    (fsm.compile_budget: the compile stops itself with TimeBudgetError; None: fsm's
    own default). `hard_limit_s`: a compile running longer is killed with its worker
    (None: never)."""

    def __init__(self, vocab, workers: int = 2, hard_limit_s: float | None = 60.0, compile_fn=compile_spec,
                 budget_s: float | None = None):
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.vocab, self.workers, self.hard_limit_s, self.compile_fn = vocab, workers, hard_limit_s, compile_fn
        self.budget_s = budget_s
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._procs: set[_Worker] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.killed = 0        # workers killed over the hard limit

    def submit(self, spec) -> Future:
        """A Future of the compiled constraint (or of the ConstraintError)."""
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the compile pool is closed")
            if not self._threads:
                for i in range(self.workers):
                    t = threading.Thread(target=self._serve, name=f"structgen-compile-{i}", daemon=True)
                    t.start()
                    self._threads.append(t)
        self._jobs.put((spec, fut))
        return fut

    def close(self) -> None:
        """Kill the workers, cancel what is queued, wait for the threads."""
        with self._lock:
            self._closed = True
            procs = list(self._procs)
        for p in procs:
            p.terminate()
        for _ in self._threads:
            self._jobs.put(None)
        for t in self._threads:
            t.join(10)
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job[1].cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- one thread per worker ----------------------------------------------------------
    def _serve(self) -> None:
        try:                      # (booted now, not inside the first compile's budget)
            worker = self._start()
        except Exception:  # noqa: BLE001 - closed already, or no process: the first job tries again
            worker = None

        def run(data, spec):
            nonlocal worker
            if worker is None or not worker.alive():
                if worker is not None:
                    self._forget(worker)
                worker = self._start()
            return self._run(worker, data, spec)

        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                spec, fut = job
                if not fut.set_running_or_notify_cancel():
                    continue
                try:
                    data = pickle.dumps(spec, protocol=5)
                except Exception:  # noqa: BLE001 - not picklable (a local class): compiled here
                    _settle(fut, budgeted, self.compile_fn, spec, self.vocab, self.budget_s)
                    continue
                _settle(fut, run, data, spec)
        finally:
            if worker is not None:
                worker.stop()
                self._forget(worker)

    def _start(self):
        closed = ConstraintError("the engine closed before this constraint compiled")
        if self._closed:
            raise closed
        w = _Worker(self.vocab, self.compile_fn, self.budget_s)
        with self._lock:
            if not self._closed:
                self._procs.add(w)
                return w
        w.kill()
        raise closed

    def _forget(self, w) -> None:
        with self._lock:
            self._procs.discard(w)

    def _run(self, w, data: bytes, spec):
        try:
            w.send(data)
            if not w.wait(self.hard_limit_s):
                w.kill()
                self.killed += 1
                raise CompileKilledError(
                    f"compiling the {_kind(spec)} constraint ran past the hard limit of {self.hard_limit_s:g} s; "
                    "its compile worker was killed")
            ok, payload = w.recv()
        except (EOFError, OSError) as e:
            w.kill()
            if self._closed:
                raise ConstraintError("the engine closed while this constraint compiled") from e
            raise ConstraintError(f"the compile worker died while compiling the {_kind(spec)} constraint "
                                  f"(exit code {w.returncode()})") from e
        if ok is None:     # compiled there, but too deep to ship: compiled here instead
            return budgeted(self.compile_fn, spec, self.vocab, self.budget_s)
        if not ok:
            raise payload
        return transport.loads(payload, self.vocab)


def _settle(fut: Future, compute, *args) -> None:
    try:
        fut.set_result(compute(*args))
    except BaseException as e:  # noqa: BLE001 - handed to whoever waits on the future
        fut.set_exception(e if isinstance(e, ConstraintError)
                          else ConstraintError(f"cannot compile constraint: {type(e).__name__}: {e}"))


def budgeted(compile_fn, spec, vocab, budget_s: float | None):
    """compile_fn(spec, vocab) inside fsm.compile_budget(budget_s) (None: fsm's default)."""
    if budget_s is None:
        return compile_fn(spec, vocab)
    with compile_budget(budget_s, f"{_kind(spec)} constraint"):
        return compile_fn(spec, vocab)


def _kind(spec) -> str:
    return spec[0] if isinstance(spec, (tuple, list)) and spec and isinstance(spec[0], str) else "given"


class _Worker:
    """One compile process and the two pipes to it."""

    def __init__(self, vocab, compile_fn, budget_s: float | None = None):
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", __name__, str(to_r), str(from_w)],
                                         pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL, env=env)
        finally:
            os.close(to_r)
            os.close(from_w)
        self._out, self._in = Connection(to_w, readable=False), Connection(from_r, writable=False)
        self._out.send((compile_fn, budget_s, (vocab.token_bytes, tuple(vocab.eos_ids), vocab.size, vocab.name)))

    def send(self, data: bytes) -> None:
        self._out.send_bytes(data)

    def wait(self, timeout: float | None) -> bool:
        return self._in.poll(timeout)

    def recv(self):
        return self._in.recv()

    def alive(self) -> bool:
        return self.proc.poll() is None and not self._in.closed

    def returncode(self):
        return self.proc.poll()

    def terminate(self) -> None:
        """Kill the process (from any thread: its pipes stay with the thread that owns it)."""
        if self.proc.poll() is None:
            self.proc.kill()

    def kill(self) -> None:
        self.terminate()
        self.proc.wait()
        self._close_pipes()

    def stop(self) -> None:
        """Ask it to exit (end of input), kill it if it does not."""
        self._close_pipes()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()

    def _close_pipes(self) -> None:
        for c in (self._out, self._in):
            if not c.closed:
                c.close()


# -- the worker process -----------------------------------------------------------------------
def _worker_main(read_fd: int, write_fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # (Ctrl-C stops the server; the server stops us)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    os.nice(WORKER_NICENESS)
    from ..fsm import Vocabulary
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    compile_fn, budget_s, (token_bytes, eos_ids, size, name) = inbox.recv()
    vocab = Vocabulary(token_bytes, eos_ids, size, name).prepare()
    sys.setrecursionlimit(20_000)      # (pickling a deep term graph recurses)
    while True:
        try:
            spec = pickle.loads(inbox.recv_bytes())
        except EOFError:      # the server closed the pipe or went away
            return
        try:
            constraint = budgeted(compile_fn, spec, vocab, budget_s)
        except ConstraintError as e:
            outbox.send((False, e))
            continue
        except Exception as e:  # noqa: BLE001 - any failure belongs to this spec alone
            outbox.send((False, ConstraintError(f"cannot compile {_kind(spec)} constraint: {type(e).__name__}: {e}")))
            continue
        try:
            outbox.send((True, transport.dumps(constraint)))
        except RecursionError:
            outbox.send((None, None))

def _exit_with_parent(parent: int) -> None:
    """A server that dies (killed, crashed) leaves no worker behind, even one mid-compile."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]), int(sys.argv[2]))
