"""A schema whose whole instance is an anyOf that uniqueItems sets apart, compiled as
one automaton per branch, run side by side.

Where a unique array is free in some branches of the root anyOf, the uniqueItems tracker
cannot check it (whether it must be unique is not known until the object ends), but each
branch on its own is exact. UnionAutomaton keeps the branches' automata and its matcher
masks with the union of the masks of the branches still alive; same Matcher contract as
a TokenAutomaton. At most MAX_BRANCHES branches; oneOf is not split. See
docs/json-schema.md, "Unions split at the root".

>>> cs = schema_to_term({"anyOf": [{"properties": {"a": U}}, {"properties": {"b": U}}]})  # doctest: +SKIP
>>> cs.accepts('{"a":[1,1]}'), cs.accepts('{"a":[1,1],"b":[2,2]}')                        # doctest: +SKIP
(True, False)
"""
from __future__ import annotations

import functools
import os

import numpy as np

from ..core.automaton import no_output_message
from ..core.constraint import Constraint
from ..core.dfa import DEFAULT_MAX_STATES
from ..core.errors import ConstraintError, TimeBudgetError
from ..core.matcher import TokenMatcher
from .unique import _edited, _subschemas

MAX_BRANCHES = 8


def root_unions(comp) -> list[dict]:
    """The anyOf schemas (of 2 to MAX_BRANCHES branches) that apply to the whole
    instance of the schema `comp` compiles, and nowhere else: reached from its entry
    through $ref and allOf (the chain), in that order, and from no other keyword of the
    chain's schemas."""
    out, chain, todo = [], {}, [comp.entry]
    while todo:
        s = todo.pop(0)
        if not isinstance(s, dict) or id(s) in chain:
            continue
        chain[id(s)] = s
        branches = s.get("anyOf")
        if isinstance(branches, list) and 2 <= len(branches) <= MAX_BRANCHES:
            out.append(s)
        if "$ref" in s:
            todo.append(comp._peek(s))
        if isinstance(s.get("allOf"), list):
            todo.extend(s["allOf"])
    rest = [{k: v for k, v in s.items() if k not in ("$ref", "allOf")} for s in chain.values()]
    elsewhere = schemas_below(comp, rest)
    return [u for u in out if id(u) not in elsewhere]


def schemas_below(comp, schemas: list) -> set[int]:
    """The ids of `schemas` and of the schemas they apply somewhere, and so on
    (unique._subschemas: $ref targets as _Compiler._peek reads them)."""
    seen, todo = set(), list(schemas)
    while todo:
        x = todo.pop()
        if isinstance(x, dict) and id(x) not in seen:
            seen.add(id(x))
            todo.extend(_subschemas(x, comp._peek))
    return seen


def branch_schemas(root, documents: dict | None, union: dict) -> list[tuple]:
    """(root, documents) copies, one per branch of the anyOf `union`, whose anyOf is
    that branch, as an allOf branch (an allOf of objects merges into one object; an
    anyOf of one branch beside it did not, and its objects were intersections, whose
    masks at every key are dear)."""
    def cut(node: dict, i: int) -> None:
        kept = node.get("allOf")
        node["allOf"] = [*(kept if isinstance(kept, list) else ()), node.pop("anyOf")[i]]
    return [_edited(root, documents, [(id(union), functools.partial(cut, i=i))])[:2]
            for i in range(len(union["anyOf"]))]


class UnionSchema:
    """The compiled branches (schema.CompiledSchema each) of a split anyOf: the
    CompiledSchema contract (accepts, dfa, canonical, key_order, relaxed)."""

    rules = unique = keys = None

    def __init__(self, branches: list, key_order: list[str], options: dict):
        self.branches, self.key_order, self.options = branches, key_order, options
        self.relaxed = list(dict.fromkeys(n for b in branches for n in b.relaxed))

    def dfa(self, max_states: int = DEFAULT_MAX_STATES) -> list:
        """The branches' byte-level DFAs (CompiledSchema.dfa), for `accepts`."""
        return [b.dfa(max_states) for b in self.branches]

    def accepts(self, text, dfa: list | None = None) -> bool:
        return any(b.accepts(text, d) for b, d in zip(self.branches, dfa or [None] * len(self.branches)))

    def canonical(self, instance, indent: int | None = None) -> str:
        """The canonical text of the first branch that accepts the instance's (the first
        branch's where none does: an invalid instance)."""
        for b in self.branches:
            if b.accepts(b.canonical(instance)):
                return b.canonical(instance, indent)
        return self.branches[0].canonical(instance, indent)


class UnionAutomaton(Constraint):
    """One automaton per branch (schema._automaton's); `matcher()` runs them side by
    side. Immutable, shared by requests as a TokenAutomaton is. `info`: the JsonInfo of
    the whole schema."""

    def __init__(self, automata: list, info):
        self.automata = automata
        self.vocab = automata[0].vocab
        self.description = f"json schema (a union of {len(automata)})"
        self.info = info

    def __repr__(self) -> str:
        return f"UnionAutomaton({self.automata!r})"

    def matcher(self) -> UnionMatcher:
        return UnionMatcher(self)

    def require_output(self) -> UnionAutomaton:
        """self, or ConstraintError where no branch can begin an output."""
        for a in self.automata:
            try:
                a.require_output()
                return self
            except TimeBudgetError:  # (the budget ends the compile, no fallback)
                raise
            except ConstraintError:
                pass
        raise ConstraintError(no_output_message(self.description, self.info))


class UnionMatcher:
    """The Matcher contract over a UnionAutomaton: a matcher per branch, the live ones
    stepped together."""

    __slots__ = ("automaton", "matchers", "live", "_history", "_row")

    def __init__(self, automaton: UnionAutomaton):
        self.automaton = automaton
        self.matchers = [a.matcher() for a in automaton.automata]
        self.live = tuple(range(len(self.matchers)))
        self._history: list[tuple] = []  # per token: (live before, the branches it advanced)
        self._row = np.zeros(automaton.vocab.num_words, dtype=np.int32)

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token. Returns False (and changes nothing) if no live branch
        allows it."""
        took = tuple(i for i in self.live if self.matchers[i].accept_token(token_id))
        if not took:
            return False
        self._history.append((self.live, took))
        self.live = took
        return True

    def accept_tokens(self, token_ids) -> bool:
        return TokenMatcher.accept_tokens(self, token_ids)

    def rollback(self, n: int) -> None:
        if n < 0 or n > len(self._history):
            raise ValueError(f"cannot roll back {n} tokens: {len(self._history)} accepted")
        for _ in range(n):
            self.live, took = self._history.pop()
            for i in took:
                self.matchers[i].rollback(1)

    def fill_next_token_bitmask(self, row) -> None:
        out = row if type(row) is np.ndarray else np.asarray(row)
        first, *rest = self.live
        self.matchers[first].fill_next_token_bitmask(out)
        for i in rest:
            self.matchers[i].fill_next_token_bitmask(self._row)
            out |= self._row

    def next_token_mask(self) -> np.ndarray:
        out = np.zeros(self.automaton.vocab.num_words, dtype=np.int32)
        self.fill_next_token_bitmask(out)
        return out

    def is_terminated(self) -> bool:
        return self.matchers[self.live[0]].is_terminated()

    def is_accepting(self) -> bool:
        return any(self.matchers[i].is_accepting() for i in self.live)

    def forced_bytes(self, limit: int = 4096) -> bytes:
        """The bytes every live branch's completions start with."""
        return os.path.commonprefix([self.matchers[i].forced_bytes(limit) for i in self.live])

    def forced_tokens(self, limit: int = 256) -> list[int]:
        """Tokens that are the only way forward (as Matcher.forced_tokens)."""
        m, out = self.copy(), []
        while len(out) < limit and not m.is_terminated() and not m.is_accepting():
            ids = np.flatnonzero(np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little"))
            if len(ids) != 1 or not m.accept_token(int(ids[0])):
                break
            out.append(int(ids[0]))
        return out

    def copy(self) -> UnionMatcher:
        m = UnionMatcher.__new__(UnionMatcher)
        m.automaton, m.matchers, m.live = self.automaton, [x.copy() for x in self.matchers], self.live
        m._history, m._row = list(self._history), np.zeros_like(self._row)
        return m
