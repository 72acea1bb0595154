"""Tensor parallel across processes: rank 0 (the `LLM`'s own process) drives, ranks 1..N-1
follow (nano-vllm's shape).

Ranks are started with torch.multiprocessing ("spawn") and joined in a torch.distributed
process group: NCCL on CUDA (rank r on cuda:r), gloo on CPU, over a FileStore in a
temporary folder. The group is made directly, not as the process's default group
(`init_process_group`), so that an engine leaves the caller's own torch.distributed setup
alone and several tensor-parallel engines can live in one process. Each rank holds its slices of the
weights (parallel.py) and its own paged KV cache, for its KV heads. The scheduler, block
manager, constraints and sampling exist on rank 0 only: every step it sends the other
ranks the step's host inputs (`StepInputs`: token ids, positions, slots, block tables,
the rows to compute logits at) through a pipe, then all ranks run the same forward, whose
all-reduces and all-gather are the torch.distributed collectives. Rank 0 alone samples,
so constraint masks are computed once.

Why a pipe for the step inputs and not a broadcast: a follower waits for the next step
for as long as the engine is idle (a server between requests), which a collective's
timeout would turn into a failure. Collectives do time out (`distributed_timeout_s`),
so a rank that hangs fails the engine instead of hanging it; a rank that dies is noticed
by its exit code before each step and when a collective breaks. Either way the engine
raises `RankFailure` naming the rank, and every later step raises it again: the ranks'
caches are no longer in step, so a new `LLM` is needed.
"""
from __future__ import annotations

import shutil
import signal
import tempfile
import time
import traceback
import weakref
from dataclasses import dataclass
from datetime import timedelta

import torch

from .parallel import Shard

# Starting a rank (spawn, imports, loading its slices) may take long for a large model;
# a rank that has not started by then fails the engine.
STARTUP_S = 600.0


class RankFailure(RuntimeError):
    """A tensor-parallel rank died, failed or did not answer in time."""


@dataclass
class WorkerSpec:
    rank: int
    size: int
    init_method: str
    backend: str
    timeout_s: float
    device: str
    dtype: torch.dtype
    folder: str
    model_config: object
    weights: list | None
    threads: int


class RankGroup:
    """Rank 0's handle on the other ranks: starts them, sends each step, notices failures,
    shuts them down (close(), garbage collection or interpreter exit, whichever first)."""

    def __init__(self, size: int, folder, model_config, weights, dtype, device: torch.device,
                 timeout_s: float):
        if device.type == "cuda":
            first = device.index or 0
            if torch.cuda.device_count() < first + size:
                raise ValueError(f"tensor_parallel_size={size} needs {size} GPUs from cuda:{first}; "
                                 f"{torch.cuda.device_count()} visible")
            devices = [f"cuda:{first + r}" for r in range(size)]
        else:
            devices = [str(device)] * size
        self.size, self.timeout_s = size, timeout_s
        self.failure: str | None = None
        self._tmp = tempfile.mkdtemp(prefix="structgen-tp-")
        backend = "nccl" if device.type == "cuda" else "gloo"
        init = f"{self._tmp}/rendezvous"
        ctx = torch.multiprocessing.get_context("spawn")
        self.procs, self.conns = [], []
        self._finalizer = weakref.finalize(self, _shutdown, self.procs, self.conns, self._tmp)
        for rank in range(1, size):
            ours, theirs = ctx.Pipe()
            spec = WorkerSpec(rank, size, init, backend, timeout_s, devices[rank], dtype, str(folder),
                              model_config, weights, torch.get_num_threads())
            p = ctx.Process(target=worker_main, args=(spec, theirs), name=f"structgen-tp-rank{rank}",
                            daemon=True)
            p.start()
            theirs.close()
            self.procs.append(p)
            self.conns.append(ours)
        # The group is formed once every rank has started, so its timeout covers no start-up.
        for rank, c in enumerate(self.conns, 1):
            self._receive(c, rank, "start", "joining")
        group = self._wait("join the process group", lambda: make_group(backend, init, 0, size, timeout_s))
        self.shard = Shard(0, size, group)

    def _wait(self, what: str, fn):
        """Run fn (a blocking call the other ranks take part in) in a thread while watching
        them, so that a rank that dies first is reported at once."""
        import threading
        box = {}

        def call():
            try:
                box["ok"] = fn()
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box["error"] = e
        t = threading.Thread(target=call, daemon=True, name="structgen-tp-wait")
        t.start()
        deadline = time.monotonic() + self.timeout_s
        while t.is_alive():
            t.join(0.2)
            dead = self._dead()
            if dead or time.monotonic() > deadline:
                raise self._fail(f"while waiting for the ranks to {what}", dead)
        if "error" in box:
            raise self._fail(f"while waiting for the ranks to {what}: {box['error']}", self._dead())
        return box["ok"]

    def start_runners(self, **runner_kwargs) -> None:
        """Each rank makes its ModelRunner (its own KV cache) with these arguments."""
        for c in self.conns:
            c.send(("runner", runner_kwargs))
        for rank, c in enumerate(self.conns, 1):
            self._receive(c, rank, "load the model", "ready")

    def _receive(self, conn, rank: int, what: str, expected: str) -> None:
        """Wait (up to STARTUP_S) for rank's `expected` message, watching the ranks."""
        deadline = time.monotonic() + max(self.timeout_s, STARTUP_S)
        while not conn.poll(0.2):
            dead = self._dead()
            if dead or time.monotonic() > deadline:
                raise self._fail(f"while waiting for the ranks to {what}", dead)
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            raise self._fail(f"while waiting for the ranks to {what}", self._dead()) from None
        if msg[0] != expected:
            raise self._fail(f"while waiting for the ranks to {what}: rank {rank} raised:\n{msg[1]}", [])

    def run(self, inp, forward):
        """Send every rank this step's inputs, then run rank 0's part: `forward(inp)`."""
        if self.failure is not None:
            raise RankFailure(self.failure)
        dead = self._dead()
        if dead:
            raise self._fail("before a step", dead)
        try:
            for c in self.conns:
                c.send(("step", inp))
            return forward(inp)
        except (RuntimeError, OSError, EOFError) as e:     # a collective broke or timed out
            time.sleep(0.5)                                 # let a dying rank's exit code settle
            raise self._fail(f"during a step ({type(e).__name__}: {e})", self._dead()) from e

    def _dead(self) -> list[tuple[int, int]]:
        return [(r, p.exitcode) for r, p in enumerate(self.procs, 1) if p.exitcode is not None]

    def _fail(self, when: str, dead) -> RankFailure:
        reports = []
        for rank, c in enumerate(self.conns, 1):
            try:
                while c.poll(0):
                    msg = c.recv()
                    if msg[0] == "error":
                        reports.append(f"rank {rank} raised:\n{msg[1]}")
            except (EOFError, OSError):
                pass
        if dead:
            what = "; ".join(f"rank {r} exited with code {code}"
                             + (f" ({signal.Signals(-code).name})" if code < 0 else "")
                             for r, code in dead)
        else:
            what = (f"no rank exited, so one did not answer within distributed_timeout_s="
                    f"{self.timeout_s:g}s, or rank 0 itself failed")
        self.failure = (f"tensor-parallel engine failed {when}: {what}. The ranks' KV caches are no "
                        "longer in step: close() this LLM and create a new one."
                        + "".join("\n" + r for r in reports))
        self.close()
        return RankFailure(self.failure)

    def close(self) -> None:
        """Stop the other ranks (waiting for them to exit) and leave the process group."""
        self._finalizer()


def _shutdown(procs, conns, tmp) -> None:
    for c in conns:
        try:
            c.send(("stop",))
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + 5
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.exitcode is None:
            p.kill()
            p.join(5)
    for c in conns:
        c.close()
    shutil.rmtree(tmp, ignore_errors=True)


def make_group(backend: str, path: str, rank: int, size: int, timeout_s: float):
    """A process group of `size` ranks meeting in the file at `path` (blocks until all
    have joined); its collectives fail after timeout_s."""
    import torch.distributed as dist
    store = dist.FileStore(path, size)
    timeout = timedelta(seconds=timeout_s)
    if backend == "nccl":
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, size, opts)
    return dist.ProcessGroupGloo(store, rank, size, timeout)


def worker_main(spec: WorkerSpec, conn) -> None:
    """A follower rank: load its slices, make its runner, then run each step rank 0 sends
    until told to stop or rank 0 goes away."""
    from .model import load_model
    from .model_runner import ModelRunner
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is rank 0's to handle
    try:
        torch.set_num_threads(spec.threads)
        if spec.device.startswith("cuda"):
            torch.cuda.set_device(spec.device)
        conn.send(("joining",))
        group = make_group(spec.backend, spec.init_method, spec.rank, spec.size, spec.timeout_s)
        model = load_model(spec.folder, spec.dtype, spec.device, spec.model_config, spec.weights,
                           Shard(spec.rank, spec.size, group))
        spec.weights = None
        msg = conn.recv()
        if msg[0] != "runner":
            return
        runner = ModelRunner(model, device=spec.device, dtype=spec.dtype, cuda_graphs=False, **msg[1])
        conn.send(("ready",))
        while True:
            msg = conn.recv()
            if msg[0] != "step":
                return
            runner.run(msg[1])
    except EOFError:            # rank 0 has gone
        return
    except BaseException:
        try:
            conn.send(("error", traceback.format_exc()))
        except (OSError, ValueError):
            pass
        raise SystemExit(1) from None
