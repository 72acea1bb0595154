"""Compile time budgets: one deadline per compile, which the long loops check.

A compile function opens a scope (`scope`) for its own call; the loops that can run
long (term construction, which every derivative, intersection and emptiness search goes
through; grammar tables) call `check()` every so often, which reads the clock and raises
TimeBudgetError once the deadline has passed. `compile_budget(seconds)` gives
everything inside it (compiles, and the masks computed there) one shared deadline: the
server's per-request budget. Where no scope is open, `check()` costs a context-variable
read. docs/json-schema.md, "Compile budgets", says what the budget covers.
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import TimeBudgetError

DEFAULT_TIME_BUDGET_S = 2.0
# The checks fire at this fraction of the budget: the rest is for unwinding (freeing the
# terms a stopped compile built costs up to about a fifth of the time it ran).
STOP_AT = 0.85
# Term constructions between two clock reads (TermBuilder._make). One is ~1 µs, but the
# work between two of them varies a thousandfold (an intersection's row merges many rows
# its parts had memoised): a clock read (~0.1 µs) every 64 keeps the gaps to milliseconds.
CHECK_EVERY = 64


class Deadline:
    """The budget of one compile scope: `end` (time.monotonic), what it compiles, and the
    stage it has reached (named in the error)."""

    __slots__ = ("budget_s", "start", "end", "what", "stage")

    def __init__(self, budget_s: float, what: str, end: float | None = None):
        self.budget_s, self.what, self.stage = budget_s, what, "compiling"
        self.start = time.monotonic()
        self.end = self.start + STOP_AT * budget_s if end is None else end

    def expire(self, now: float) -> None:
        raise TimeBudgetError(self.budget_s, now - self.start, self.what, self.stage)


_current: ContextVar[Deadline | None] = ContextVar("structgen_compile_deadline", default=None)


def check() -> None:
    """Raise TimeBudgetError if the open scope's deadline has passed (no scope: no-op)."""
    d = _current.get()
    if d is not None:
        now = time.monotonic()
        if now > d.end:
            d.expire(now)


class Ticker:
    """check() every CHECK_EVERY calls of tick(): for loops that build no terms (a
    search over memoised rows), one per loop that may run long."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = CHECK_EVERY

    def tick(self) -> None:
        self.left -= 1
        if self.left < 0:
            self.left = CHECK_EVERY
            check()


def current() -> Deadline | None:
    """The open scope's deadline, if any."""
    return _current.get()


def stage(name: str) -> None:
    """Name what the open scope is doing now (the error says it)."""
    d = _current.get()
    if d is not None:
        d.stage = name


def _validate(seconds) -> None:
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not seconds > 0):
        raise ValueError(f"a time budget must be a positive number of seconds or None, not {seconds!r}")


@contextmanager
def scope(budget_s: float | None, what: str):
    """A compile's own scope. Inside an open one it keeps the enclosing deadline, or takes
    `budget_s` from now where that ends first; outside any, `budget_s` (None: the
    default, DEFAULT_TIME_BUDGET_S)."""
    _validate(budget_s)
    outer = _current.get()
    if outer is not None and (budget_s is None or outer.end <= time.monotonic() + budget_s):
        yield outer
        return
    d = Deadline(DEFAULT_TIME_BUDGET_S if budget_s is None else budget_s, what)
    token = _current.set(d)
    try:
        yield d
    finally:
        _current.reset(token)


@contextmanager
def freed_on_timeout(tb):
    """On TimeBudgetError, break term builder `tb`'s reference cycles (TermBuilder.release)
    and drop the frames that hold its terms, so that reference counting frees them while
    the collector is still paused (enter this inside `paused_gc`): otherwise the error
    reaches the caller only after a collection has traversed everything the compile
    built, which for a compile stopped at its budget takes a tenth of the budget or more.
    The error keeps its stage and pointer, not the traceback inside the compile."""
    try:
        yield
    except TimeBudgetError as e:
        tb.release()
        raise e.with_traceback(None) from None


@contextmanager
def compile_budget(seconds: float | None, what: str = "constraint"):
    """Everything done inside the block shares one deadline, `seconds` from now: compiles
    (whose own `time_budget_s`, where set, may end sooner) and the masks computed there
    (`require_output`'s first mask). Past it, TimeBudgetError (a TooLargeError).
    None: no deadline inside the block (compiles take their own `time_budget_s`, or none
    where that is None too). Wrap compiles, not generation: a mask that builds states
    after the deadline raises too.

        >>> with fsm.compile_budget(5.0):                                  # doctest: +SKIP
        ...     c = fsm.compile_json_schema(schema, vocab).require_output()
    """
    _validate(seconds)
    token = _current.set(Deadline(math.inf if seconds is None else seconds, what))
    try:
        yield _current.get()
    finally:
        _current.reset(token)
