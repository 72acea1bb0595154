"""Context-free constraints: Lark grammars (and plain BNF with regular terminals).

Masks are exact: a token is allowed iff the output plus it is a prefix of a sentence,
under any split into lexemes (as Lark's Earley parser with lexer="dynamic_complete").
DFA states are sets of (LR stack, terminal, lexeme); LALR(1) conflicts fork the parse.
`compile_cfg`, used by recursive JSON Schemas, takes BNF rules over terminals given as
terms of `tb`, which the automaton keeps using (one builder per constraint).
Design: docs/grammars.md.

    >>> from structgen.fsm.core.terms import TermBuilder
    >>> from structgen.fsm.regex.syntax import regex_to_term
    >>> tb = TermBuilder()
    >>> rules = {"value": [["NUM"], ["LB", "items", "RB"], ["LB", "RB"]],
    ...          "items": [["value"], ["items", "COMMA", "value"]]}
    >>> terms = {"NUM": regex_to_term(tb, r"[0-9]+"), "LB": tb.literal(b"["),
    ...          "RB": tb.literal(b"]"), "COMMA": tb.literal(b","),
    ...          "WS": regex_to_term(tb, r"[ \\n]+")}
    >>> auto = compile_cfg(rules, terms, "value", vocab, tb, ignore=("WS",))  # doctest: +SKIP
"""
from __future__ import annotations

import os
import re
import threading
import warnings
from dataclasses import dataclass

import numpy as np

from ..core import budget
from ..core.automaton import TokenAutomaton
from ..core.dfa import DEAD, DEFAULT_MAX_STATES, TermSource
from ..core.errors import GrammarError, RegexError, TimeBudgetError
from ..core.options import documented, lists_options, option, resolve, time_budget_option
from ..core.terms import Term, TermBuilder, row_target
from ..core.vocabulary import Vocabulary
from ..regex.syntax import caseless_literal, regex_to_term, terminal_terms
from .follow import Families, copy_columns, expand
from .masks import GrammarMasks
from .rows import merge, stacks, subtract

try:  # Python >= 3.11
    import re._constants as _C
    import re._parser as _P
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _C  # type: ignore
    import sre_parse as _P  # type: ignore

__all__ = ["GrammarOptions", "compile_grammar", "compile_cfg", "GrammarSource", "GrammarAutomaton"]


# lark's common.ESCAPED_STRING (lookbehind) and the regular language it denotes
_LARK_ESCAPED_STRING = r'".*?(?<!\\)(\\\\)*?"'
_ESCAPED_STRING_RE = r'"(?:[^"\\\n]|\\[^\n])*"'
_LARK_FLAGS = {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE, "x": re.VERBOSE,
               "u": 0, "l": 0}


# ---------------------------------------------------------------------------------
# LR tables
# ---------------------------------------------------------------------------------
# Where a conflict forks the parse, at most this many LR stacks are explored for one
# terminal (or the end of input): past it, GrammarError (ambiguity that grows at a point)
MAX_FORKS = 4096


class _Stack:
    """An interned persistent LR stack node: equal stacks are the same object."""
    __slots__ = ("state", "parent", "height", "feed", "starts", "end", "kids")

    def __init__(self, state: int, parent: _Stack | None):
        self.state, self.parent = state, parent
        self.kids: dict = {}      # state -> the node pushed on this one (interned)
        self.height = 0 if parent is None else parent.height + 1
        self.feed: dict = {}      # terminal index -> (resulting stack or None, low)
        self.starts = None        # merged start row (GrammarSource._start_row)
        self.end = None           # accepts $END here?


class _Tables:
    """LALR(1) tables in plain dicts: action[state][terminal index] is
    (True, next_state) for a shift, (False, (lhs, length)) for a reduction, or
    (None, (action, action, ...)) where the grammar has a conflict there (the parser
    forks: GrammarSource.feed_low); end_action[state] the reduction on end of input
    (or such a fork); goto[state][lhs] the next state; end_state the state after the
    start symbol (the input is a sentence there); `conflicts` how many (state,
    terminal) cells fork."""

    def __init__(self, action: dict, end_action: dict, goto: dict, start_state: int,
                 end_state: int, conflicts: int = 0):
        self.action, self.end_action, self.goto = action, end_action, goto
        self.start_state, self.end_state = start_state, end_state
        self.conflicts = conflicts


def _fork(old: tuple, new: tuple) -> tuple:
    """A table cell holding both `old` (an action or a fork) and the action `new`."""
    return (None, old[1] + (new,)) if old[0] is None else (None, (old, new))


def _lalr_tables(rules, start: str, term_index: dict[str, int]) -> _Tables:
    """The LALR(1) tables of `rules` ((left side, right side's symbols) pairs of names:
    the terminals those `term_index` numbers, see _rule_pairs); a conflict is a cell holding
    every action (a fork). Lark's analysis, with its items and symbols as Python
    objects, was a large part of a grammar's compile; this is the same algorithm (LR(0) states,
    then DeRemer and Pennello's lookaheads, as lark computes them) over integers and
    bit sets."""
    nts = {"$root_" + start: 0}
    for lhs, _ in rules:
        nts.setdefault(lhs, len(nts))
    nnt = len(nts)
    end = nnt + len(term_index)  # the end-of-input terminal
    prods = [(0, (nts[start],))]  # (lhs, rhs): symbols < nnt are nonterminals
    for lhs, syms in rules:
        prods.append((nts[lhs], tuple(nts[x] if x in nts else nnt + term_index[x] for x in syms)))
    by_lhs: list = [[] for _ in range(nnt)]
    for k, (a, _) in enumerate(prods):
        by_lhs[a].append(k)
    # nullable nonterminals, by a worklist: a rule counts the symbols of its right side
    # not yet known nullable (a JSON object's rules are many and long: passes over all
    # of them until nothing changes were dear for large recursive schemas)
    nullable = [False] * nnt
    left = [len(rhs) for _a, rhs in prods]
    uses: list = [[] for _ in range(nnt)]
    for k, (_a, rhs) in enumerate(prods):
        for x in rhs:
            if x < nnt:
                uses[x].append(k)
    todo = [a for a, rhs in prods if not rhs]
    while todo:
        a = todo.pop()
        if nullable[a]:
            continue
        nullable[a] = True
        for k in uses[a]:
            left[k] -= 1
            if not left[k]:
                todo.append(prods[k][0])
    # items (rule, dot) that closing over a nonterminal adds: its rules', and so on
    # through the nonterminals those begin with
    adds = []
    for a in range(nnt):
        seen, todo = {a}, [a]
        while todo:
            for k in by_lhs[todo.pop()]:
                rhs = prods[k][1]
                if rhs and rhs[0] < nnt and rhs[0] not in seen:
                    seen.add(rhs[0])
                    todo.append(rhs[0])
        adds.append([(k, 0) for b in seen for k in by_lhs[b]])

    kernels = [frozenset([(0, 0)])]
    index = {kernels[0]: 0}
    trans: list = []   # state -> {symbol: state}
    done: list = []    # state -> rules complete there
    s = 0
    while s < len(kernels):
        budget.check()  # (one LR(0) state: a large grammar's tables are a long loop)
        items = set(kernels[s])
        for k, d in kernels[s]:
            rhs = prods[k][1]
            if d < len(rhs) and rhs[d] < nnt:
                items.update(adds[rhs[d]])
        nxt: dict = {}
        fin = []
        for k, d in items:
            rhs = prods[k][1]
            if d < len(rhs):
                nxt.setdefault(rhs[d], []).append((k, d + 1))
            else:
                fin.append(k)
        t = {}
        for x, adv in nxt.items():
            kern = frozenset(adv)
            j = index.get(kern)
            if j is None:
                j = index[kern] = len(kernels)
                kernels.append(kern)
            t[x] = j
        trans.append(t)
        done.append(fin)
        s += 1

    # lookaheads: nonterminal transitions (state, A) and their relations
    reads_from: dict = {}   # direct reads: terminal bits
    reads: dict = {}
    includes: dict = {}
    lookback: dict = {}     # (state, rule) -> nonterminal transitions
    for p, t in enumerate(trans):
        budget.check()
        for a, q in t.items():
            if a >= nnt:
                continue
            bits = 0
            rel = []
            for x in trans[q]:
                if x >= nnt:
                    bits |= 1 << (x - nnt)
                elif nullable[x]:
                    rel.append((q, x))
            if p == 0 and a == prods[0][1][0]:
                bits |= 1 << (end - nnt)
            reads_from[(p, a)], reads[(p, a)] = bits, rel
    tail = []  # per rule: where its nullable tail starts (a JSON object's rule is long)
    for _, rhs in prods:
        i = len(rhs)
        while i and rhs[i - 1] < nnt and nullable[rhs[i - 1]]:
            i -= 1
        tail.append(i)
    for (p, b) in reads_from:
        for k in by_lhs[b]:
            rhs, q, t0 = prods[k][1], p, tail[k]
            for i, x in enumerate(rhs):
                if x < nnt and i + 1 >= t0:
                    includes.setdefault((q, x), []).append((p, b))
                q = trans[q][x]
            lookback.setdefault((q, k), []).append((p, b))

    def closure_of(init: dict, rel: dict) -> dict:
        """F(x) = init(x) | F(y) for each y that x relates to: DeRemer and Pennello's
        digraph (Tarjan's strongly connected components, one visit per relation)."""
        out, depth, stack = dict(init), {}, []
        inf = len(init) + 1
        for root in init:
            if root in depth:
                continue
            budget.check()
            stack.append(root)
            depth[root] = len(stack)
            work = [(root, len(stack), iter(rel.get(root, ())))]
            while work:
                x, d, it = work[-1]
                for y in it:
                    if y not in depth:
                        stack.append(y)
                        depth[y] = len(stack)
                        work.append((y, len(stack), iter(rel.get(y, ()))))
                        break
                    depth[x] = min(depth[x], depth[y])
                    out[x] |= out[y]
                else:
                    work.pop()
                    if depth[x] == d:  # x heads a component: all of it gets x's set
                        while True:
                            z = stack.pop()
                            depth[z], out[z] = inf, out[x]
                            if z == x:
                                break
                    if work:
                        p = work[-1][0]
                        depth[p] = min(depth[p], depth[x])
                        out[p] |= out[x]
        return out
    follow = closure_of(closure_of(reads_from, reads), includes)

    nt_names = list(nts)
    action, end_action, goto = {}, {}, {}
    end_bit = 1 << (end - nnt)
    bit_lists: dict = {}  # lookahead set -> its terminals (JSON's: hundreds of keys, shared)
    conflicts = 0
    for p, t in enumerate(trans):
        budget.check()
        a = {x - nnt: (True, q) for x, q in t.items() if x >= nnt}
        g = {nt_names[x]: q for x, q in t.items() if x < nnt}
        taken = 0  # terminals with an action here
        for j in a:
            taken |= 1 << j
        for k in done[p]:
            la = 0
            for x in lookback.get((p, k), ()):
                la |= follow[x]
            lhs, rhs = prods[k]
            red = (False, (nt_names[lhs], len(rhs)))
            at_end, la = la & end_bit, la & ~end_bit
            if at_end:
                if p in end_action:
                    conflicts += 1
                    end_action[p] = _fork(end_action[p], red)
                else:
                    end_action[p] = red
            both, la = la & taken, la & ~taken
            while both:  # conflicts: the cell forks
                low = both & -both
                both ^= low
                j = low.bit_length() - 1
                a[j] = _fork(a[j], red)
                conflicts += 1
            taken |= la
            js = bit_lists.get(la)
            if js is None:
                js, rest = [], la
                while rest:
                    low = rest & -rest
                    rest ^= low
                    js.append(low.bit_length() - 1)
                bit_lists[la] = js
            a.update(dict.fromkeys(js, red))
        action[p], goto[p] = a, g
    return _Tables(action, end_action, goto, 0, trans[0][prods[0][1][0]], conflicts)


# ---------------------------------------------------------------------------------
# The state source
# ---------------------------------------------------------------------------------
class GrammarSource:
    """A `StateSource` (fsm/core/dfa.py) for a grammar over regular terminals, parsed by its
    LALR(1) tables (forking at their conflicts).

    `terms[i]` is terminal i's term, `ignored[i]` whether it is %ignore'd, `names[i]`
    its name. Keys are frozensets of (stack, terminal, lexeme) elements; terminal -1 is
    the "boundary" pseudo-element: nothing being lexed, the next lexeme starts here.
    `families` (fsm/grammar/follow.py) says which terminals start after which, where
    some read the character after them."""

    def __init__(self, tb: TermBuilder, tables: _Tables, names, terms, ignored,
                 max_states: int = DEFAULT_MAX_STATES, lexemes: TermSource | None = None,
                 families: Families | None = None):
        self.tb, self.t = tb, tables
        self.names, self.terms, self.ignored = list(names), list(terms), list(ignored)
        self.fam = families or Families(len(self.terms))
        self.dead = frozenset()
        # the bottom nodes by state; a node's own kids hold the nodes pushed on it (no
        # (state, parent) tuple per node, which the collector would track)
        self._roots: dict[int, _Stack] = {}
        self._errors: dict[int, tuple] = {}  # low -> (None, low), shared by feed_low
        self._terms = lexemes or TermSource(tb, max_states)  # lexeme emptiness
        self._ignored_idx = [i for i, ig in enumerate(self.ignored) if ig]
        self._live: dict[int, tuple] = {}
        self._templates: dict = {}  # terminal set -> merged start row (GrammarSource.template)
        self._all = self.fam.members[0]
        self._ignored_of = [[i for i in self._ignored_idx if i in m] for m in self.fam.members]
        self._starting: dict[int, tuple] = {}  # family * 256 + byte -> ((terminal, lexeme), ...) starting with it
        self._fam_starts: dict = {}  # (stack, family > 0) -> merged start row
        self.root = self._push(tables.start_state, None)
        self.start_key = frozenset({(self.root, -1, tb.empty)})

    def release(self) -> None:
        """Break the reference cycles of the stacks (a node's kids, feeds and start row
        lead back to it) and of the term builder (TermBuilder.release): nothing will use them
        again (TokenAutomaton.owns_source)."""
        todo = list(self._roots.values())
        while todo:
            s = todo.pop()
            todo += s.kids.values()
            s.kids, s.feed, s.starts = {}, {}, None
        self._fam_starts.clear()
        self.tb.release()

    # -- LR stacks ------------------------------------------------------------------
    def _push(self, state: int, parent) -> _Stack:
        kids = self._roots if parent is None else parent.kids
        s = kids.get(state)
        if s is None:
            s = kids[state] = _Stack(state, parent)
        return s

    def _reduce(self, stack: _Stack, lhs: str, n: int) -> _Stack:
        for _ in range(n):
            stack = stack.parent
        return self._push(self.t.goto[stack.state][lhs], stack)

    def feed(self, stack: _Stack, term: int):
        """The stack after shifting terminal `term` (reductions first); None on error;
        a tuple of stacks where a conflict forks the parse and more than one way
        shifts (`stacks` reads all three as a tuple)."""
        hit = stack.feed.get(term)
        return (hit if hit is not None else self.feed_low(stack, term))[0]

    def feed_low(self, stack: _Stack, term: int) -> tuple:
        """(feed(stack, term), low): `low` is the height of the deepest node of `stack`
        whose state the step read (reductions pop below the top), so the outcome is
        the same for every stack with the same states from the top down to `low`."""
        hit = stack.feed.get(term)
        if hit is None:
            action, goto, s, low = self.t.action, self.t.goto, stack, stack.height
            while True:
                act = action[s.state].get(term)
                if act is None:
                    out = None
                    break
                if act[0]:
                    out = self._push(act[1], s)
                    break
                if act[0] is None:  # a conflict: every way on
                    out, low = self._forked(s, term, low)
                    break
                lhs, n = act[1]
                for _ in range(n):
                    s = s.parent
                if s.height < low:
                    low = s.height
                s = self._push(goto[s.state][lhs], s)
            if out is None:  # (shared: a step leaves fewer young objects to collect)
                hit = self._errors.get(low) or self._errors.setdefault(low, (None, low))
            else:
                hit = (out, low)
            stack.feed[term] = hit
        return hit

    def _forked(self, stack: _Stack, term: int, low: int) -> tuple:
        """feed_low from `stack`, whose cell for `term` forks: every way of reducing
        and shifting, each a stack of its own (interned: ways that meet again are one
        stack, as two readings of one value are once their union is reduced)."""
        action, goto = self.t.action, self.t.goto
        outs: dict = {}
        seen, todo = {stack}, [stack]
        while todo:
            s = todo.pop()
            act = action[s.state].get(term)
            if act is None:
                continue
            for a in act[1] if act[0] is None else (act,):
                if a[0]:
                    outs[self._push(a[1], s)] = None
                    continue
                lhs, n = a[1]
                x = s
                for _ in range(n):
                    x = x.parent
                if x.height < low:
                    low = x.height
                y = self._push(goto[x.state][lhs], x)
                if y not in seen:
                    self._check_forks(seen, self.names[term])
                    seen.add(y)
                    todo.append(y)
        out = tuple(outs)
        return (None if not out else out[0] if len(out) == 1 else out), low

    def _check_forks(self, seen: set, where: str) -> None:
        if len(seen) >= MAX_FORKS:
            raise GrammarError(
                f"the parse forks into more than {MAX_FORKS} LR stacks at {where} (an ambiguous "
                "grammar whose readings grow without bound, such as a right-recursive rule over "
                "a nullable one, `a: b a |` with `b: |`): make the grammar less ambiguous")

    def accepts_end(self, stack: _Stack) -> bool:
        if stack.end is None:
            end_action, end_state = self.t.end_action, self.t.end_state
            ok, seen, todo = False, {stack}, [stack]
            while todo and not ok:
                s = todo.pop()
                act = end_action.get(s.state)
                if act is None:
                    continue
                for a in act[1] if act[0] is None else (act,):
                    y = self._reduce(s, *a[1])
                    if y.state == end_state:
                        ok = True
                        break
                    if y not in seen:
                        self._check_forks(seen, "the end of input")
                        seen.add(y)
                        todo.append(y)
            stack.end = ok
        return stack.end

    # -- rows -------------------------------------------------------------------------
    def _start_row(self, stack: _Stack, fam: int = 0) -> tuple:
        """The merged row of every terminal of family `fam` that can start at `stack`."""
        r = stack.starts if fam == 0 else self._fam_starts.get((stack, fam))
        if r is None:
            feed, members = self.feed, None if self.fam.plain else self.fam.members[fam]
            can = frozenset([i for i in self.t.action[stack.state] if (members is None or i in members)
                             and feed(stack, i) is not None] + self._ignored_of[fam])
            r = tuple((a, b, frozenset([(stack, j, y) for j, y in items])) for a, b, items in self.template(can))
            if fam == 0:
                stack.starts = r
            else:
                self._fam_starts[(stack, fam)] = r
        return r

    def template(self, allowed: frozenset) -> tuple:
        """The merged rows of the terminals `allowed`, targets {(terminal, lexeme)}."""
        r = self._templates.get(allowed)
        if r is None:
            parts = []
            for j in sorted(allowed):
                seg = self._live_row(self.terms[j])
                if seg:
                    parts.append(tuple((a, b, frozenset(((j, y),))) for a, b, y in seg))
            r = self._templates[allowed] = merge(parts)
        return r

    def _lift(self, seg, stack, i) -> tuple:
        return tuple((a, b, frozenset(((stack, i, x),))) for a, b, x in seg)

    def _live_row(self, x: Term) -> tuple:
        """x's derivative row without targets whose language is empty (only AND/NOT
        terms can be empty without being NOTHING)."""
        if not x.boolean:
            return self.tb.row(x)
        r = self._live.get(x.id)
        if r is None:
            r = self._live[x.id] = tuple(seg for seg in self.tb.row(x)
                                         if not self._terms.is_empty(seg[2]))
        return r

    def row(self, key) -> tuple:
        parts = []
        live_row = self._live_row
        for el in key:
            stack, i, x = el
            seg = live_row(x)
            if seg:
                parts.append(self._lift(seg, stack, i))
            if x.nullable:
                if i < 0:
                    rows = [self._start_row(stack)]
                elif self.ignored[i]:  # longest match: no lexeme starts where it goes on
                    r = self._start_row(stack)
                    rows = [subtract(r, seg) if seg and r else r]
                else:
                    rows = [self._start_row(nxt, self.fam.after[i]) for nxt in stacks(self.feed(stack, i))]
                parts += [r for r in rows if r]
        return merge(parts)

    def step(self, key, c: int) -> frozenset:
        """The target of `row(key)` at byte c, without building the whole row (a token
        step needs one byte of each key on its path)."""
        out: set = set()
        live_row, ignored, feed, after = self._live_row, self.ignored, self.feed, self.fam.after
        for stack, i, x in key:
            y = row_target(live_row(x), c)
            if y is not None:
                out.add((stack, i, y))
            if x.nullable:
                fam = 0
                if i < 0:
                    nxt = stack
                elif ignored[i]:
                    if y is not None:  # longest match: no lexeme starts where it goes on
                        continue
                    nxt = stack
                else:
                    nxt, fam = feed(stack, i), after[i]
                # (terminal, lexeme) of every terminal of the family that starts with c
                starting = self._starting.get(fam * 256 + c)
                if starting is None:
                    starting = self._starting[fam * 256 + c] = \
                        row_target(self.template(self.fam.members[fam]), c) or ()
                for stack_ in stacks(nxt):
                    for j, z in starting:  # as _start_row(stack_) at c, without the whole row
                        if ignored[j] or feed(stack_, j) is not None:
                            out.add((stack_, j, z))
        return frozenset(out)

    def accepting(self, key) -> bool:
        for stack, i, x in key:
            if x.nullable and (i < 0 or self.fam.may_end[i]):
                nxt = stack if i < 0 or self.ignored[i] else self.feed(stack, i)
                if any(self.accepts_end(n) for n in stacks(nxt)):
                    return True
        return False

    def is_empty(self, key) -> bool:
        # Elements are only created live: the terminal was acceptable when started
        # (so the stack is a viable prefix of a productive grammar: completable) and
        # lexemes with an empty language are dropped in `_lift`.
        return not key


class GrammarAutomaton(TokenAutomaton):
    """TokenAutomaton over a GrammarSource whose masks come from fsm/grammar/masks.py:
    a context-free lexer pass per lexer position, cached, plus a few parser steps per
    configuration. The byte DFA itself (token steps, EOS, forced bytes) is the
    GrammarSource's."""

    def __init__(self, source: GrammarSource, vocab: Vocabulary, description: str = "",
                 max_states: int | None = None, ahead: bool = True, **constraint):
        super().__init__(source, source.start_key, vocab, description, max_states, **constraint)
        self.source = source
        # `ahead` (Lark grammars): loop positions walked now, keyword positions on from
        # the boundary of all terminals (GrammarMasks). Recursive JSON Schemas walk each
        # position as met: their time to first mask counts, and a key is a terminal.
        self.masks = GrammarMasks(source, vocab, self.dfa, max_states or DEFAULT_MAX_STATES, ahead)
        if ahead:
            self.masks.walk_loops()
        self._loops: dict = {}  # lexeme id -> _loop_bytes

    @property
    def stats(self) -> dict:
        return self.masks.stats

    def next_state(self, s: int, token_id: int) -> int:
        """As TokenAutomaton.next_state, stepping the configuration one byte at a time
        (GrammarSource.step) and registering only the state the token ends in: rows of
        the states in between (every byte of them) are not built."""
        nxt = self._next.get((s, token_id))
        if nxt is None:
            data = self.vocab.token_bytes
            if not 0 <= token_id < len(data) or not data[token_id]:
                return DEAD
            # (no pause of the collector: a step makes a few dozen objects, a pause costs
            # more than that, and the collections it would put off come at the next
            # allocation anyway)
            with self._lock:
                key, step, b = self.dfa.keys[s], self.source.step, data[token_id]
                if len(key) == 1:  # one lexeme going on (a string's content): its bytes
                    (stack, i, x), = key  # need no parser and no element sets
                    if not x.nullable and not b.translate(None, self._loop_bytes(x)):
                        nxt = self._next[(s, token_id)] = s  # every byte keeps x where it is
                        return nxt
                    live_row, k = self.source._live_row, 0
                    while k < len(b) and not x.nullable:
                        x = row_target(live_row(x), b[k])
                        if x is None:
                            break
                        k += 1
                    key = frozenset() if x is None else frozenset(((stack, i, x),))
                    b = b[k:]
                for c in b:
                    if not key:
                        break
                    key = step(key, c)
                nxt = self._next[(s, token_id)] = self.dfa.state_of(key)
        return nxt

    def _loop_bytes(self, x: Term) -> bytes:
        """The bytes that lead lexeme x to itself (a string's content characters)."""
        r = self._loops.get(x.id)
        if r is None:
            r = self._loops[x.id] = bytes(c for a, b, y in self.source._live_row(x) if y is x
                                          for c in range(a, b))
        return r

    def _compute_mask(self, s: int) -> np.ndarray:
        key = self.dfa.keys[s]
        if s == DEAD or not key:
            return super()._compute_mask(s)
        words = None
        for e in key:
            w = self.masks.element_bits(e)
            words = w if words is None else (words | w)
        if self.dfa.accepting[s]:
            words = words | self._eos_words
        mask = words.view("<i4")
        mask.setflags(write=False)
        self._masks[s] = mask
        return mask


# ---------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------
def _productive(rules, terminals: set) -> set:
    """Nonterminals (left sides of `rules`, name pairs) that derive some string of
    `terminals`: a worklist, each rule counting the nonterminals on its right not yet
    known productive (a rule with another symbol never fires). Passes over every rule
    until nothing changed were dear for large recursive schemas."""
    nts = {lhs for lhs, _ in rules}
    left, uses, todo = [], {}, []
    for k, (lhs, syms) in enumerate(rules):
        n = 0
        for x in syms:
            if x in nts:
                n += 1
                uses.setdefault(x, []).append(k)
            elif x not in terminals:
                n = -1 - len(syms)  # below zero for good
                break
        left.append(n)
        if not n:
            todo.append(lhs)
    prod: set = set()
    while todo:
        o = todo.pop()
        if o in prod:
            continue
        prod.add(o)
        for k in uses.get(o, ()):
            left[k] -= 1
            if not left[k]:
                todo.append(rules[k][0])
    return prod


def _prune(rules, start: str, live_terminals: set):
    """Drop rules using unproductive symbols (they derive no sentence: keeping them
    would leave LR prefixes that cannot be completed)."""
    prod = _productive(rules, live_terminals)
    if start not in prod:
        raise GrammarError(f"start rule {start!r} derives no finite string of terminals")
    return [(lhs, syms) for lhs, syms in rules if lhs in prod and
            all(x in prod or x in live_terminals for x in syms)]


def _rule_pairs(rules) -> list[tuple]:
    """Lark's Rule objects as the (left side, right side's symbols) name pairs that
    build_source reads."""
    return [(r.origin.name, tuple(x.name for x in r.expansion)) for r in rules]


def _has_lazy(pattern: str, flags: int) -> bool:
    try:
        parsed = _P.parse(pattern, flags)
    except re.error:
        return False

    def walk(items) -> bool:
        for op, av in items:
            if op == _C.MIN_REPEAT:
                return True
            if op == _C.MAX_REPEAT and walk(av[2]):
                return True
            if op == _C.SUBPATTERN and walk(av[3]):
                return True
            if op == _C.BRANCH and any(walk(b) for b in av[1]):
                return True
        return False
    return walk(parsed)


def _top_branches(p: str) -> list[str]:
    """Split a pattern at its top-level `|` (looking inside one enclosing `(?:...)`)."""
    def split(p):
        parts, depth, start, i, n = [], 0, 0, 0, len(p)
        while i < n:
            c = p[i]
            if c == "\\":
                i += 2
                continue
            if c == "[":
                j = i + 1
                if j < n and p[j] == "^":
                    j += 1
                if j < n and p[j] == "]":
                    j += 1
                while j < n and p[j] != "]":
                    j += 2 if p[j] == "\\" else 1
                i = j + 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0 and i == n - 1 and parts == [] and start == 0 and p.startswith("(?:"):
                    return split(p[3:-1]) if _balanced(p[3:-1]) else [p]
            elif c == "|" and depth == 0:
                parts.append(p[start:i])
                start = i + 1
            i += 1
        parts.append(p[start:])
        return parts
    return split(p)


def _balanced(p: str) -> bool:
    try:
        re.compile(p)
        return True
    except re.error:
        return False


def _regex_terms(tb: TermBuilder, pattern: str, flags: int) -> list:
    """A terminal regex: its lexemes, and what the text after them must begin as
    (regex.syntax.terminal_terms), except that a top-level alternative with a lazy
    quantifier keeps only its shortest matches (what Python's `re.match` returns)."""
    if not _has_lazy(pattern, flags):
        return terminal_terms(tb, pattern, flags)
    branches = _top_branches(pattern)
    split = len(branches) > 1 and all(_balanced(b) for b in branches)
    got = [x for b in branches for x in _regex_terms(tb, b, flags)] if split else terminal_terms(tb, pattern, flags)
    if any(need is not None for _, need in got):
        raise RegexError("a lazy quantifier in a terminal whose assertions read the text after it "
                         "is not supported in constraints", pattern, None)
    t = tb.alt(t for t, _ in got)
    if not split:  # no proper prefix of a lexeme is one
        t = tb.intersect((t, tb.complement(tb.concat(t, tb.concat(tb.any_byte, tb.anything)))))
    return [(t, None)]


def _terminal_label(tdef, rules) -> str:
    """A terminal as the user knows it: its name, or for one written inline in a rule
    (lark names it __ANON_n), its pattern as written and the rules that use it."""
    if not tdef.name.startswith("__"):
        return tdef.name
    p = tdef.pattern
    text = getattr(p, "raw", None) or (f"/{p.value}/" if p.type == "re" else f'"{p.value}"')
    users = sorted({r.origin.name for r in rules if any(s.name == tdef.name for s in r.expansion)})
    named = [u for u in users if not u.startswith("_")] or users
    return f"{text} (in rule {', '.join(named)})" if named else text


def _terminal_terms(tb: TermBuilder, tdef, rules=()) -> list:
    """A terminal's lexemes, as [(lexemes, None or what the text after them must begin
    as)]: one pair, or one per class of the next character where its assertions read
    it (fsm/grammar/follow.py)."""
    from lark.lexer import PatternStr
    p = tdef.pattern
    flags = 0
    for f in p.flags:
        flags |= _LARK_FLAGS.get(f, 0)
    value = p.value
    try:
        if isinstance(p, PatternStr):
            if flags & re.IGNORECASE:
                return [(caseless_literal(tb, value), None)]
            return [(tb.literal(value.encode("utf-8")), None)]
        if value == _LARK_ESCAPED_STRING:
            return [(regex_to_term(tb, _ESCAPED_STRING_RE, flags), None)]
        return _regex_terms(tb, value, flags)
    except RegexError as e:
        raise GrammarError(f"terminal {_terminal_label(tdef, rules)}: {e}") from None


def build_source(tb, rules, term_names: list, terms: list, ignored: list, start: str,
           max_states: int, lexemes: TermSource | None = None, label=str, variants=None) -> GrammarSource:
    """The GrammarSource of `rules` ((left side, symbols) name pairs: _rule_pairs;
    a symbol that no rule defines is a terminal); `lexemes` decides the emptiness of
    terminals and their derivatives (recursive JSON Schemas pass their own: structural,
    where a plain TermSource guesses members of big intersections); `label(name)` names
    a terminal in errors; `variants` {terminal index: [(lexemes, what follows)]} the
    terminals that read the character after them (fsm/grammar/follow.py; terms[i] is the
    union of terminal i's)."""
    live = set()
    source = lexemes or TermSource(tb, max_states)  # one emptiness cache for all lexemes
    for name, t in zip(term_names, terms):
        if t.nullable:
            raise GrammarError(f"terminal {label(name)} matches the empty string (zero-width "
                               "terminals are not supported: make it match at least one "
                               "character, and its use optional where it may be absent, "
                               "`x?` or `[x]`)")
        if not source.is_empty(t):
            live.add(name)
    rules = _prune(rules, start, live)
    index = {n: i for i, n in enumerate(term_names)}
    tables = _lalr_tables(rules, start, index)
    ign = [ig and n in live for n, ig in zip(term_names, ignored)]
    families = None
    if variants:
        term_names, terms, ign, column, families = expand(tb, term_names, terms, ign, variants)
        copy_columns(tables.action, column)
    return GrammarSource(tb, tables, term_names, terms, ign, max_states, source, families)


_META_LOCK = threading.Lock()


def _warm_lark() -> None:
    """Build lark's own grammar-of-grammars parser once per process, skipping the
    regex-collision check (interegular) that lark runs on its meta-grammar: it is slow,
    and its answer is fixed. Lark caches the parser in `_get_parser.cache`."""
    from lark import load_grammar as lg
    if getattr(lg._get_parser, "cache", None) is not None:
        return
    with _META_LOCK:
        if getattr(lg._get_parser, "cache", None) is not None:
            return
        import lark.lexer as lx
        saved = lx.has_interegular
        lx.has_interegular = False
        try:
            lg._get_parser()
        finally:
            lx.has_interegular = saved


_IMPORTS: dict = {}  # (dotted path, aliases) -> pristine definitions (see _builder)


def _builder():
    """Lark's GrammarBuilder, remembering what each `%import` of lark's own library
    (`common.NUMBER`, ...) defines: lark re-parses and re-mangles the whole imported
    file on every load. The library files ship with lark and do
    not change while the process runs; relative imports read the file system and are
    not remembered."""
    import os
    from copy import deepcopy

    from lark.exceptions import GrammarError as LarkGrammarError
    from lark.load_grammar import EXT, GrammarBuilder

    class Builder(GrammarBuilder):
        def do_import(self, dotted_path, base_path, aliases, base_mangle=None):
            if base_path is not None or base_mangle is not None or self.import_paths:
                return super().do_import(dotted_path, base_path, aliases, base_mangle)
            k = (dotted_path, tuple(sorted(aliases.items())), self.global_keep_all_tokens)
            defs = _IMPORTS.get(k)
            if defs is None:
                gb = GrammarBuilder(self.global_keep_all_tokens, [])
                gb.do_import(dotted_path, None, aliases)
                defs = _IMPORTS[k] = deepcopy(gb._definitions)
            for name in defs:
                if name in self._definitions:
                    raise LarkGrammarError(f"Cannot import '{name}' from "
                                           f"'{os.path.join(*dotted_path) + EXT}': Symbol already defined.")
            self._definitions.update(deepcopy(defs))  # the grammar's build may edit its trees

    return Builder(False, [])


def _hoist_tails(defs: dict) -> None:
    """Give each rule alternative with 3 or more optional parts (`[x]`, `x?`, `x*`) the
    parts after its first optional one as a fresh rule (whose alternative gets the same
    treatment). Lark expands optionals in place: SQL's select_stmt became
    64 alternatives of 551 symbols, a third of lark's compile. Same language, and the
    fresh rule is reduced only where its alternative ends, so the parser decides
    nothing earlier than before; grammar_source compiles the grammar as written where
    the hoisted one has a conflict all the same."""
    from lark.grammar import NonTerminal
    from lark.load_grammar import Definition
    from lark.tree import Tree

    def optional(c) -> bool:
        return isinstance(c, Tree) and (c.data == "maybe" or c.data == "expr" and c.children[1] in ("?", "*"))
    todo = [(n, d) for n, d in defs.items() if not d.is_term and not d.params and d.tree]
    while todo:
        name, d = todo.pop()  # name: the rule written in the grammar
        for alt in d.tree.children:
            exp = alt.children[0] if alt.data == "alias" else alt
            opts = [i for i, c in enumerate(exp.children) if optional(c)]
            if exp.data != "expansion" or len(opts) < 3:
                continue
            k = 0
            while f"__{name}_tail{k}" in defs:
                k += 1
            fresh = f"__{name}_tail{k}"
            defs[fresh] = Definition(False, Tree("expansions", [Tree("expansion", exp.children[opts[0] + 1:])]),
                                     (), d.options)
            exp.children[opts[0] + 1:] = [Tree("value", [NonTerminal(fresh)])]
            todo.append((name, defs[fresh]))


def load_lark(grammar: str, start: str = "start", hoist: bool = False):
    """Lark text -> (rules, terminal defs, ignore names), exactly as lark's own loader
    gives them; `hoist`: with long alternatives' optional tails made rules
    (`_hoist_tails`). Our front end (fsm/grammar/lark_text.py, much cheaper) reads the
    common part of Lark's language; the rest, and every grammar with an error, goes
    through lark's loader (`_load_with_lark`), so its errors and messages stay lark's."""
    if not isinstance(grammar, str):
        raise GrammarError("grammar must be Lark grammar text (a str)")
    from lark.exceptions import LarkError

    from .lark_text import Unsupported, load
    try:
        return load(grammar, start, hoist)
    except (Unsupported, LarkError):  # outside the front end, or an error lark's helpers found
        pass
    except TimeBudgetError:
        raise
    except Exception as e:  # noqa: BLE001 - a bug of ours: say so, but still compile
        warnings.warn(f"fsm.grammar.lark_text failed ({type(e).__name__}: {e}); using lark's loader "
                      "(please report this grammar)", RuntimeWarning, stacklevel=2)
    return _load_with_lark(grammar, start, hoist)


def _load_with_lark(grammar: str, start: str = "start", hoist: bool = False):
    """load_lark through lark's GrammarBuilder (the fallback, and the tests' oracle)."""
    from lark.exceptions import LarkError
    _warm_lark()
    try:
        b = _builder()
        b.load_grammar(grammar, "<grammar>")
        if hoist:
            _hoist_tails(b._definitions)
        terminals, rules, ignore = b.build().compile([start], set())
    except LarkError as e:
        raise GrammarError(f"invalid grammar: {e}".rstrip()) from None
    except OSError as e:  # lark opens %import's file: one it does not have
        raise GrammarError(f"invalid grammar: %import: no grammar file {os.path.basename(e.filename or '?')!r} "
                           "(lark's own library: common, lark, python, unicode)") from None
    return rules, terminals, ignore


def grammar_source(grammar: str, start: str = "start", tb: TermBuilder | None = None,
                   max_states: int = DEFAULT_MAX_STATES) -> GrammarSource:
    """The StateSource of a Lark grammar (start key: `source.start_key`)."""
    tb = tb or TermBuilder()
    try:
        return _source(tb, *load_lark(grammar, start, hoist=True), start, max_states)
    except GrammarError:  # errors name the rules as written
        return _source(tb, *load_lark(grammar, start), start, max_states)


def _source(tb, rules, terminals, ignore, start, max_states) -> GrammarSource:
    names, terms, variants = [], [], {}
    for td in terminals:
        if td.pattern is None:  # pragma: no cover - lark keeps declared terminals aside
            raise GrammarError(f"terminal {td.name} has no pattern (%declare'd terminals "
                               "cannot be generated)")
        got = _terminal_terms(tb, td, rules)
        if len(got) > 1 or got[0][1] is not None:
            variants[len(names)] = got
        names.append(td.name)
        terms.append(tb.alt(t for t, _ in got))
    used = {s.name for r in rules for s in r.expansion if s.is_term}
    missing = sorted(used - set(names))
    if missing:
        raise GrammarError(f"terminals {', '.join(missing)} are declared but not defined "
                           "(%declare'd terminals cannot be generated)")
    ignored = [n in ignore for n in names]
    defs = dict(zip(names, terminals))
    return build_source(tb, _rule_pairs(rules), names, terms, ignored, start, max_states,
                        label=lambda name: _terminal_label(defs[name], rules), variants=variants)


@documented
@dataclass(frozen=True)
class GrammarOptions:
    """Options of compile_grammar (also accepted as its keywords)."""

    start: str = option("start", "the start rule")
    max_states: int | None = option(None, "cap on DFA states, each a parser-stack-and-lexer configuration reached "
                                    "(None: 200,000); beyond it TooLargeError")
    time_budget_s: float | None = time_budget_option()


@lists_options(GrammarOptions)
def compile_grammar(grammar: str, vocab: Vocabulary, options: GrammarOptions | None = None,
                    **keywords) -> TokenAutomaton:
    """Compile a Lark grammar: the outputs are its sentences, exactly (docs/grammars.md
    says what is supported). Cached per vocabulary by the grammar text and the options.
    Options: a GrammarOptions, or its fields as keywords."""
    options = resolve(GrammarOptions, options, keywords, "compile_grammar")
    start, max_states = options.start, options.max_states

    def build():
        with budget.scope(options.time_budget_s, "grammar"):
            ms = max_states or DEFAULT_MAX_STATES
            src = grammar_source(grammar, start, TermBuilder(), ms)
            return GrammarAutomaton(src, vocab, f"grammar (start={start!r})", ms).owns_source()
    return vocab.cached(("grammar", grammar, options), build)


def compile_cfg(rules: dict, terminals: dict, start: str, vocab: Vocabulary, tb: TermBuilder,
                ignore=(), max_states: int | None = None) -> TokenAutomaton:
    """BNF rules over regular terminals (terms of `tb`) -> TokenAutomaton.

    `rules`: {nonterminal: [alternative, ...]}, an alternative a list of symbol names
    ([] is empty); `terminals`: {name: Term} (non-nullable); `ignore`: names of terminals
    allowed anywhere between (and around) lexemes. Same language and exactness as
    `compile_grammar` (conflicts fork the parse). Not cached (terms are not
    hashable across builders): cache the result yourself."""
    ms = max_states or DEFAULT_MAX_STATES
    if start not in rules:
        raise GrammarError(f"start symbol {start!r} has no rules")
    for name in ignore:
        if name not in terminals:
            raise GrammarError(f"ignored terminal {name!r} is not defined")
    pairs = []
    for lhs, alts in rules.items():
        if lhs in terminals:
            raise GrammarError(f"{lhs!r} is both a rule and a terminal")
        for alt in alts:
            for x in alt:
                if x not in rules and x not in terminals:
                    raise GrammarError(f"rule {lhs!r} uses undefined symbol {x!r}")
            pairs.append((lhs, tuple(alt)))
    return _cfg_automaton(tb, pairs, list(terminals), terminals, ignore, start, vocab, ms)


def _cfg_automaton(tb, rules, names, terminals, ignore, start, vocab, ms):
    ign = set(ignore)
    src = build_source(tb, rules, names, [terminals[n] for n in names],
                 [n in ign for n in names], start, ms)
    return GrammarAutomaton(src, vocab, f"cfg (start={start!r})", ms)
