"""Data-parallel replicas: N engines behind one front end (`structgen serve --data-parallel-size N`).

Each replica is a whole `AsyncEngine` over its own `LLM` (its own weights, KV cache,
scheduler and compile workers); on CUDA one per GPU (or per `tensor_parallel_size` GPUs),
on CPU all in this process, sharing its cores. `Replicas` routes each request to one of
them and otherwise stays out of the way: the request's stream, its abort and its errors
belong to that replica alone.

Routing (`Router`): the least-loaded replica, load being the sequences of its
unfinished requests (counted from the moment they are routed, so a burst spreads before
any replica has started them); ties go to the replica routed to least recently. A
request whose prompt has at least `affinity_blocks` full KV blocks goes where the last
request with the same first blocks went (whose prefix that replica's cache may hold),
unless that replica has more than `affinity_slack` sequences above the least loaded one.

    >>> reps = Replicas([AsyncEngine(LLM(device=f"cuda:{i}")) for i in range(2)])  # doctest: +SKIP
    >>> reps.add_request("Hi", SamplingParams(max_tokens=8)).result().text      # doctest: +SKIP
"""
from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass

from .async_engine import AsyncEngine, RequestError, RequestStream
from .sampling_params import BeamSearchParams, SamplingParams

CHARS_PER_TOKEN = 4     # English text with a BPE vocabulary, roughly


@dataclass(frozen=True)
class RouterOptions:
    """How `Router` picks a replica.

    >>> RouterOptions(affinity_blocks=2).affinity_slack
    4
    """
    affinity_blocks: int = 4      # full KV blocks hashed for prefix affinity; 0: no affinity
    affinity_slack: int = 4       # sequences the affine replica may have over the least loaded
    affinity_entries: int = 4096  # prefixes remembered (least recently used dropped first)

    def __post_init__(self):
        for name in ("affinity_blocks", "affinity_slack", "affinity_entries"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"RouterOptions.{name} must be an integer >= 0, not {v!r}")


class Router:
    """Which replica takes a request, from loads the caller keeps (thread-safe by the caller)."""

    def __init__(self, n: int, block_size: int, options: RouterOptions = RouterOptions()):
        self.n, self.block_size, self.options = n, block_size, options
        self.prefixes: OrderedDict = OrderedDict()   # prefix key -> replica
        self.last_routed = [-1] * n                  # the route number each replica last took
        self.routes = itertools.count()
        self.affinity_hits = 0

    def prefix_key(self, prompt):
        """A key for the prompt's first `affinity_blocks` blocks of token ids, None for a
        shorter prompt. A text prompt (the server always passes ids) is keyed by its first
        CHARS_PER_TOKEN characters per token, a rough stand-in: tokenizing here would
        share the tokenizer with the engines' threads."""
        need = self.options.affinity_blocks * self.block_size
        if isinstance(prompt, str):
            need *= CHARS_PER_TOKEN
        if need == 0 or len(prompt) < need:
            return None
        head = prompt[:need]
        return head if isinstance(head, str) else tuple(int(t) for t in head)

    def pick(self, prompt, loads: list[int], usable: list[bool]) -> int:
        candidates = [i for i in range(self.n) if usable[i]]
        if not candidates:
            raise RequestError("every replica is stopped")
        least = min(candidates, key=lambda i: (loads[i], self.last_routed[i]))
        key = self.prefix_key(prompt)
        choice = least
        if key is not None:
            home = self.prefixes.get(key)
            if (home is not None and usable[home]
                    and loads[home] <= loads[least] + self.options.affinity_slack):
                choice = home
                self.affinity_hits += 1
            self.prefixes[key] = choice
            self.prefixes.move_to_end(key)
            while len(self.prefixes) > self.options.affinity_entries:
                self.prefixes.popitem(last=False)
        self.last_routed[choice] = next(self.routes)
        return choice


def replica_devices(n: int, tensor_parallel_size: int = 1, device: str | None = None) -> list[str]:
    """Each replica's device: on CUDA replica i starts at GPU i * tensor_parallel_size
    (its ranks take the GPUs after it); on CPU all share the host.

    >>> replica_devices(2, device="cpu")
    ['cpu', 'cpu']
    """
    import torch
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    kind = torch.device(device).type
    if kind != "cuda":
        return [device] * n
    first = torch.device(device).index or 0
    need = first + n * tensor_parallel_size
    if torch.cuda.device_count() < need:
        raise ValueError(f"{n} replicas of {tensor_parallel_size} GPU(s) from cuda:{first} need {need} "
                         f"GPUs; {torch.cuda.device_count()} visible")
    return [f"cuda:{first + i * tensor_parallel_size}" for i in range(n)]


class Replicas:
    """Several `AsyncEngine`s behind the one `AsyncEngine` interface the server uses
    (`add_request`, `add_beam_search`, `abort`, `generate`, `close`, `llm`, `alive`); `replicas`
    lists them.
    The replicas must serve the same model with the same tokenizer and limits."""

    def __init__(self, engines: list[AsyncEngine], options: RouterOptions = RouterOptions()):
        if not engines:
            raise ValueError("Replicas needs at least one engine")
        first = engines[0].llm
        for i, e in enumerate(engines[1:], 1):
            if (e.llm.model_config.vocab_size, e.llm.max_model_len) != (first.model_config.vocab_size,
                                                                        first.max_model_len):
                raise ValueError(f"replica {i} differs from replica 0 in vocabulary or max_model_len")
        self.replicas = list(engines)
        self.llm = first                       # what the server reads: tokenizer, limits
        self.router = Router(len(engines), first.config.block_size, options)
        self._lock = threading.Lock()
        self._streams: dict[str, tuple[int, RequestStream]] = {}   # unfinished: id -> (replica, stream)
        self._counter = itertools.count()

    @property
    def alive(self) -> bool:
        return all(e.alive for e in self.replicas)

    def loads(self) -> list[int]:
        """Sequences of each replica's unfinished requests (under self._lock)."""
        loads = [0] * len(self.replicas)
        for rid, (i, s) in list(self._streams.items()):
            if s.finished:
                del self._streams[rid]
            else:
                loads[i] += s.n
        return loads

    def add_request(self, prompt, params: SamplingParams | None = None,
                    request_id: str | None = None) -> RequestStream:
        """Route a prompt to a replica; return that replica's stream."""
        params = params or SamplingParams()
        return self._route(prompt, request_id, lambda e, rid: e.add_request(prompt, params, rid))

    def add_beam_search(self, prompt, params: BeamSearchParams, request_id: str | None = None) -> RequestStream:
        """Route a beam search to a replica (`AsyncEngine.add_beam_search`)."""
        return self._route(prompt, request_id, lambda e, rid: e.add_beam_search(prompt, params, rid))

    beam_search = AsyncEngine.beam_search      # (awaits self.add_beam_search: routed)

    def _route(self, prompt, request_id: str | None, add) -> RequestStream:
        with self._lock:
            loads = self.loads()
            rid = request_id if request_id is not None else f"req-{next(self._counter)}"
            if rid in self._streams:
                raise ValueError(f"request id {rid!r} is already in use")
            i = self.router.pick(prompt, loads, [e.alive for e in self.replicas])
            stream = add(self.replicas[i], rid)
            self._streams[rid] = (i, stream)
        return stream

    def replica_of(self, request_id: str) -> int | None:
        """The replica running an unfinished request, or None (`stream.engine` is the
        replica of any stream)."""
        with self._lock:
            got = self._streams.get(request_id)
        return None if got is None or got[1].finished else got[0]

    def abort(self, request_id: str) -> None:
        """Abort on the request's own replica; a no-op for a finished or unknown id."""
        i = self.replica_of(request_id)
        if i is not None:
            self.replicas[i].abort(request_id)

    # Every prompt through add_request (so, routed), waiting for all of them.
    generate = AsyncEngine.generate

    def close(self) -> None:
        for e in self.replicas:
            e.close()
        for e in self.replicas:
            e.llm.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
