"""Recursive schemas: the compiler's terms, which hold a marker where a recursive
schema occurs (_Compiler._marker), turned into something a DFA of derivatives can run.

- lazy terms (`lazy_recursion`, the default where it applies): each marker becomes a
  deferred term whose body is its rule's term, so the token automaton is that of any
  other schema and no grammar is built;
- BNF rules over regular terminals for fsm/grammar/ (_RecursiveRules), where a lazy term
  would not be exact or would not end (a marker under an intersection or complement, a
  rule that may begin with itself).
`_marker_index` finds the marker a term holds. Trade-offs: docs/json-schema.md, "Recursion".
"""
from __future__ import annotations

import itertools

from ..core.errors import ConstraintError, SchemaError, TimeBudgetError
from ..core.terms import ALT, AND, BYTES, CONCAT, EMPTY, LAZY, NOT, NOTHING, REPEAT, Term, TermBuilder, minus_empty
from .source import JsonTermSource


class _RecursiveRules:
    """Terms with recursion markers -> BNF rules over regular terminals (fsm/grammar/automaton.py).

    Each recursive schema's term (its rule body) and the root term contain markers
    where the recursive schema occurs. Structure that contains a marker becomes rules
    (concatenation: a sequence, alternation: alternatives, repeat: list rules); every
    maximal marker-free piece becomes one terminal (nullable pieces: an optional
    non-nullable terminal). A union's alternatives that start with the same part are
    merged (_factored); the rest of a union's ambiguity forks the parse (fsm/grammar/automaton.py).
    A marker under an intersection or complement (allOf, not, oneOf with overlapping
    branches, contains...) raises SchemaError; lenient mode takes one of its parts
    (_one_part)."""

    MAX_REPEAT_UNROLL = 64  # bounds up to this are alternatives of each length; above, a chain of rules
    MAX_REPEAT_RULES = 4096
    # nonterminals of the grammar: a large real-world schema of a thousand or more
    # definitions stays well below; unions of objects factored on their common keys can
    # grow without practical end, and are refused here
    MAX_RULES = 50_000

    def __init__(self, tb: TermBuilder, root: Term, bodies: dict[int, Term], marked: dict,
                 relaxed: list | None = None):
        """`relaxed`: lenient mode's notes (the compiler's), where an intersection that
        the compiler did not relax holds a marker: it is relaxed here to one of its
        parts (a superset); None: strict, SchemaError."""
        self.tb = tb
        self._relaxed = relaxed
        self.rules: dict[str, list] = {}
        self.terminals: dict[str, Term] = {}
        self._term_names: dict[int, str] = {}
        self._sym: dict[int, str] = {}
        self._tails: set[int] = set()  # ids of the tails _seq met (see there)
        self._rules_todo: list[Term] = []  # terms whose nonterminals' rules are still to make
        self._marked = marked  # term id -> _marker_index (the compiler's: terms are walked once)
        for k in bodies:
            self.rules[f"r{k}"] = []
        for k, body in bodies.items():
            self.rules[f"r{k}"] = self._alts(body)
        self.rules["start"] = self._alts(root)
        while self._rules_todo:  # (_nonterminal's)
            x = self._rules_todo.pop()
            self.rules[self._sym[x.id]] = self._alts(x)

    def grammar_source(self, max_states: int):
        from ..grammar.automaton import build_source
        pairs = [(lhs, tuple(alt)) for lhs, alts in self.rules.items() for alt in alts]
        names = list(self.terminals)
        try:
            return build_source(self.tb, pairs, names, [self.terminals[n] for n in names],
                          [False] * len(names), "start", max_states,
                          JsonTermSource(self.tb, max_states))
        except TimeBudgetError:  # (the budget ends the compile, no fallback)
            raise
        except ConstraintError as e:
            raise SchemaError(f"recursive schema does not fit the grammar path: {e}",
                              "$ref") from None

    # -- helpers -----------------------------------------------------------------------
    def _has_marker(self, t: Term) -> bool:
        return _marker_index(t, self._marked) is not None

    def _minus_empty(self, t: Term) -> Term:
        return minus_empty(self.tb, t, self._minus_other)

    def _minus_other(self, t: Term) -> Term:
        """_minus_empty of a term that is no alternative, concatenation or repeat."""
        tb = self.tb
        if t.kind == LAZY:  # (a universe, a deferred enum: what it stands for)
            return self._minus_empty(tb.body(t))
        if t.kind in (AND, NOT) and not self._has_marker(t):  # (a terminal: intersected with non-empty texts)
            return tb.intersect([t, tb.repeat(tb.any_byte, 1, None)])
        return self._minus_empty(self._one_part(t))

    def _terminal(self, t: Term) -> list:
        """Symbols for a marker-free term: [] / [T] / [opt_T]."""
        if t.kind == EMPTY:
            return []
        if t.kind == NOTHING:
            return ["NOTHING"]
        name = self._term_names.get(t.id)
        if name is None:
            body = self._minus_empty(t)
            name = f"T{len(self.terminals)}"
            self.terminals[name] = body
            if t.nullable:
                opt = f"o{name}"
                self.rules[opt] = [[], [name]]
                name = opt
            self._term_names[t.id] = name
        if name == "NOTHING" and "NOTHING" not in self.terminals:
            self.terminals["NOTHING"] = self.tb.nothing
        return [name]

    def _nonterminal(self, t: Term) -> str:
        """t's nonterminal, its rules made by __init__'s loop (made here, they would nest
        one call per level: a shared tail's rules name the next tail, one per slot; a
        head's its own heads, one per object around a recursive reference: large
        schemas' definitions would pass Python's stack)."""
        name = self._sym.get(t.id)
        if name is None:
            if len(self._sym) >= self.MAX_RULES:
                raise SchemaError(f"recursive schema: its grammar passes {self.MAX_RULES} nonterminals "
                                  "(_RecursiveRules.MAX_RULES; unions of objects around the recursive "
                                  "references split on each key they share)", "$ref")
            name = self._sym[t.id] = f"n{len(self._sym)}"
            self.rules[name] = []
            self._rules_todo.append(t)
        return name

    def _seq(self, t: Term) -> list:
        """Symbols for t as one sequence (t may contain markers)."""
        tb = self.tb

        out, pending = [], []
        x = t
        while x.kind != EMPTY:
            if x is not t and x.kind == CONCAT and self._has_marker(x):
                # a tail that another sequence has too is one nonterminal: an object's
                # alternatives (_Compiler._slot_chain: each starts at one slot and goes on to the
                # end) would otherwise repeat the later slots, quadratic in them
                if x.id in self._tails and not pending:
                    out.append(self._nonterminal(x))
                    break
                self._tails.add(x.id)
            _, parts, x = self._first_part(x)
            head = parts[0]
            if len(parts) == 3:  # a marker
                if pending:
                    out += self._terminal(tb.seq(pending))
                    pending = []
                out.append(f"r{(parts[1].args[0] << 8) | parts[2].args[0]}")
            elif not self._has_marker(head):
                pending.append(head)
            else:
                if pending:
                    out += self._terminal(tb.seq(pending))
                    pending = []
                out.append(self._nonterminal(head))
        if pending:
            out += self._terminal(tb.seq(pending))
        return out

    def _factored(self, alts: tuple) -> list:
        """A union's alternatives with those that start with the same part merged:
        `h (r1 | r2)` for `h r1 | h r2`, where a rest that starts with an alternation
        holding a marker is split into its branches (`(N minus the empty string) r | r`
        for another nullable part N), to be merged again one level down. Two objects of
        a recursive anyOf (or a lenient oneOf) both allow `{}`: as `{ N1 }` and `{ N2 }`
        their empty bodies are two empty rules the parser must choose between at `}`
        (a reduce/reduce conflict: the parse forks, at a cost per step); merged, `}` is
        one alternative, and so is a key that both declare, up to where their values
        differ."""
        tb = self.tb
        groups: dict = {}
        for c in alts:
            groups.setdefault(self._first_part(c)[0], []).append(c)
        out = []
        for members in groups.values():
            if len(members) == 1:
                out.append(members[0])
                continue
            rests = []
            for c in members:
                _, head, r = self._first_part(c)
                n, after = r.args if r.kind == CONCAT else (r, tb.empty)
                if n.kind == ALT and self._has_marker(n):  # its branches meet the others'
                    rests += [tb.concat(x, after) for x in n.args]
                elif n.nullable and self._has_marker(n):
                    rests += [tb.concat(self._minus_empty(n), after), after]
                else:
                    rests.append(r)
            out.append(tb.seq(head + [tb.alt(rests)]))
        return out

    def _first_part(self, t: Term) -> tuple:
        """(a key for t's first part, its terms, the rest): a marker is one part of
        three bytes (_marker_index's layout); a term that is no concatenation is its
        own first part, before the empty string."""
        head, rest = t.args if t.kind == CONCAT else (t, self.tb.empty)
        if head.kind == BYTES and head.args == (0xFF, 0xFF):
            k1, rest = rest.args
            k2, rest = rest.args if rest.kind == CONCAT else (rest, self.tb.empty)
            return (head.id, k1.id, k2.id), [head, k1, k2], rest
        return (head.id,), [head], rest

    def _alts(self, t: Term) -> list:
        k = t.kind
        if not self._has_marker(t):
            return [self._terminal(t)]
        if k == ALT:
            # the alternatives without a marker are one terminal, their union: one lexeme
            # reads them all (hundreds of objects beside recursive ones would be as many
            # lexemes going on at once, a lexer item each per byte)
            free, out = [], []
            for c in self._factored(t.args):
                if self._has_marker(c):
                    out += self._alts(c)
                else:
                    free.append(c)
            return ([self._terminal(self.tb.alt(free))] if free else []) + out
        if k == CONCAT:
            return [self._seq(t)]
        if k == REPEAT:
            x, lo, hi = t.args
            item = self._seq(x)
            if hi is None:
                lst = f"n{len(self._sym)}"
                self._sym[-len(self._sym) - 1] = lst
                self.rules[lst] = [[], [lst] + item]
                return [item * lo + [lst]]
            if hi <= self.MAX_REPEAT_UNROLL:
                return [item * n for n in range(lo, hi + 1)]
            if hi - lo > self.MAX_REPEAT_RULES:
                raise SchemaError(f"recursive schema: a bound of more than {self.MAX_REPEAT_RULES} items "
                                  "(maxItems - minItems...) around a recursive reference is not supported", "$ref")
            # at most hi - lo more: a chain of rules `m_j: | item m_(j-1)`, linear in the
            # bound (alternatives of every length are quadratic in it)
            more: list = []
            for _ in range(hi - lo):
                name = f"n{len(self._sym)}"
                self._sym[-len(self._sym) - 1] = name
                self.rules[name] = [[], item + more]
                more = [name]
            return [item * lo + more]
        return self._alts(self._one_part(t))

    def _one_part(self, t: Term) -> Term:
        """Lenient: an intersection holding a marker as one of its parts that is no
        complement (a superset), the first with a marker if any; else SchemaError."""
        parts = [c for c in t.args if c.kind != NOT] if t.kind == AND else []
        message = ("recursive schema: a recursive reference under an intersection or complement (allOf "
                   "with siblings, not, overlapping oneOf, contains, dependencies, if/then/else...) is not supported")
        if self._relaxed is None or not parts:
            raise SchemaError(message, "$ref")
        note = f"'$ref' at #: {message}; relaxed to one of its parts (output may violate the others)"
        if note not in self._relaxed:
            self._relaxed.append(note)
        return next((c for c in parts if self._has_marker(c)), parts[0])


class MarkerMemo(dict):
    """_marker_index's memo (term id -> the index, or None), and `floor`: the id of the
    markers' first byte term (_Compiler._marker); a term made before it (a smaller id:
    a term is made after its parts) holds no marker, and is not walked."""
    floor = 0


def _marker_index(t: Term, memo: dict) -> int | None:
    """The index of a recursion marker in t (_Compiler._marker: bytes 0xFF, then two
    bytes of the index), None if t holds none; memoized by term id (`memo`: a
    MarkerMemo, or a dict). A loop, not recursion: an object's slots nest as deep as it
    has slots (a schema with a few hundred overflowed Python's stack), and it stops at
    a part's first marker."""
    if t.id in memo:
        return memo[t.id]
    floor = getattr(memo, "floor", 0)
    stack = [[t, 0]]  # (term, index of the part to look at next)
    while stack:
        top = stack[-1]
        x = top[0]
        if x.id in memo:
            stack.pop()
            continue
        if x.id < floor:
            memo[x.id] = None
            stack.pop()
            continue
        k = x.kind
        if k == CONCAT and x.args[0].kind == BYTES and x.args[0].args == (0xFF, 0xFF):
            hi, lo = x.args[1].args  # (the marker's last byte may head the rest: CONCAT)
            memo[x.id] = (hi.args[0] << 8) | (lo.args[0] if lo.kind == BYTES else lo.args[0].args[0])
            stack.pop()
            continue
        parts = x.args if k in (CONCAT, ALT, AND) else x.args[:1] if k in (REPEAT, NOT) else ()
        v = None
        while top[1] < len(parts):
            c = parts[top[1]]
            if c.id not in memo:
                stack.append([c, 0])
                break
            v = memo[c.id]
            if v is not None:
                break
            top[1] += 1
        else:
            memo[x.id] = None
            stack.pop()
            continue
        if v is not None:
            memo[x.id] = v
            stack.pop()
    return memo[t.id]


_LAZY_RULES = itertools.count()  # (a deferred term's name identifies its language for the whole process)


def lazy_recursion(tb: TermBuilder, source: JsonTermSource, root: Term, bodies: dict[int, Term],
                   floor: int) -> Term | None:
    """`root` with each recursion marker replaced by a deferred term R_k whose body is
    rule k's (`bodies`, markers replaced alike), or None where that would not be exact
    or would not end, and the grammar path must take the schema:
    - a marker under an intersection, a complement or a lazy term (they derive as
      regular terms; the grammar path refuses these too, or relaxes them);
    - a rule whose body may begin with a rule that begins with it again, along
      markers at the head (left recursion: deriving R_k would derive R_k);
    - a nullable body (a JSON value is never empty; R_k is declared not nullable).
    A rule with no finite value (every way through it holds itself again) is nothing,
    as the grammar path drops it: a deferred term must not be empty. R_k is cyclic
    (TermBuilder.deferred): readers of structure leave it closed (no guess; shortest
    length at least 1, so clip_repeats clips less, which is exact too). `floor`: the
    compiler's MarkerMemo.floor (_plan)."""
    got = _plan(list(bodies.values()) + [root], floor)
    if got is None:
        return None
    plan, leaves = got
    e = tb.empty.id
    leaves[e] = tb.empty
    heads = dict.fromkeys(leaves, 0)  # the rules whose markers may begin a part, as bits
    for x, k, kids in plan:
        if k is not None:
            heads[x.id] = 1 << k
        elif x.kind == CONCAT:
            heads[x.id] = heads[kids[0].id] | (heads[kids[1].id] if kids[0].nullable else 0)
        else:
            bits = 0
            for c in kids:
                bits |= heads[c.id]
            heads[x.id] = bits
    if any(heads[b.id] for b in bodies.values()) and _cyclic(
            {k: [j for j in bodies if heads[b.id] >> j & 1] for k, b in bodies.items()}):
        return None
    # the rules with a finite value, round by round from none (a least fixed point)
    live = {i: not source.is_empty(c) for i, c in leaves.items()}
    productive: dict = dict.fromkeys(bodies, False)
    while True:
        for x, k, kids in plan:
            if k is not None:
                live[x.id] = productive[k] and live[kids[0].id if kids else e]
            elif x.kind == CONCAT:
                live[x.id] = live[kids[0].id] and live[kids[1].id]
            elif x.kind == ALT:
                live[x.id] = any(live[c.id] for c in kids)
            else:
                live[x.id] = x.args[1] == 0 or live[kids[0].id]
        now = {k: live[b.id] for k, b in bodies.items()}
        if now == productive or all(now.values()):  # (all: no round can add one)
            productive = now
            break
        productive = now
    serial = next(_LAZY_RULES)
    made: dict = {}
    rules = {k: tb.deferred(("json:rec", serial, k), lambda k=k: made[k], False, cyclic=True) if productive[k]
             else tb.nothing for k in bodies}
    out = dict(leaves)
    for x, k, kids in plan:
        if k is not None:
            out[x.id] = tb.concat(rules[k], out[kids[0].id] if kids else tb.empty)
        elif x.kind == CONCAT:
            out[x.id] = tb.concat(out[kids[0].id], out[kids[1].id])
        elif x.kind == ALT:
            out[x.id] = tb.alt([out[c.id] for c in kids])
        else:
            out[x.id] = tb.repeat(out[kids[0].id], x.args[1], x.args[2])
    for k, body in bodies.items():
        made[k] = out[body.id]
        if made[k].nullable:
            return None
    m = _marker_at(root)  # the root's rule opened: the first mask reads its literal head (`{"value":`)
    if m is None or not productive[m[0]]:
        return out[root.id]
    return tb.concat(made[m[0]], out[m[1].id] if m[1] is not None else tb.empty)


def _marker_at(t: Term) -> tuple | None:
    """(k, the rest) where t begins with the marker of rule k (_marker_index's layout)."""
    if t.kind != CONCAT or t.args[0].kind != BYTES or t.args[0].args != (0xFF, 0xFF):
        return None
    hi, lo = t.args[1].args
    if lo.kind == BYTES:
        return (hi.args[0] << 8) | lo.args[0], None
    return (hi.args[0] << 8) | lo.args[0].args[0], lo.args[1]


def _plan(terms: list, floor: int) -> tuple | None:
    """(plan, leaves): the parts of `terms` that hold markers, children first, as
    (part, k, kids): k is the rule whose marker begins the part (kids: the rest, if
    any), or None (kids: a concatenation's or alternation's parts, a repeat's item);
    and the parts without one that those and `terms` hold (id -> term). None where a
    marker lies under another kind of term. `floor`: MarkerMemo's, the id of the
    markers' first byte term: a part made before it holds no marker and is not walked.
    A loop, not recursion: an object's slots nest as deep as it has slots."""
    plan, holds, leaves = [], {}, {}
    stack = [t for t in terms if t.id >= floor]
    while stack:
        x = stack[-1]
        if x.id in holds:
            stack.pop()
            continue
        kind, k = x.kind, None
        if kind == CONCAT and x.args[0].id == floor:  # a marker: 0xFF, two bytes of k, the rest
            k, rest = _marker_at(x)
            kids = () if rest is None else (rest,)
        else:
            kids = x.args if kind in (CONCAT, ALT, AND) else x.args[:1] if kind in (REPEAT, NOT) else ()
        n = len(stack)
        for c in kids:
            if c.id >= floor and c.id not in holds:  # (one made before the floor holds none)
                stack.append(c)
        if len(stack) > n:
            continue
        stack.pop()
        held = [holds.get(c.id, False) for c in kids]
        if k is None and True not in held:
            holds[x.id] = False
            continue
        if k is None and kind not in (CONCAT, ALT, REPEAT):
            return None
        holds[x.id] = True
        plan.append((x, k, kids))
        for c, h in zip(kids, held):
            if not h:
                leaves[c.id] = c
    leaves.update((t.id, t) for t in terms if not holds.get(t.id, False))
    return plan, leaves


def _cyclic(heads: dict) -> bool:
    """Whether rule k reaches itself along `heads` (rule -> the rules that may begin it)."""
    state: dict = {}  # rule -> 1 while on the path, 2 when done
    for k0 in heads:
        if k0 in state:
            continue
        stack = [(k0, iter(heads[k0]))]
        state[k0] = 1
        while stack:
            k, it = stack[-1]
            for j in it:
                if state.get(j) == 1:
                    return True
                if j not in state:
                    state[j] = 1
                    stack.append((j, iter(heads.get(j, ()))))
                    break
            else:
                state[k] = 2
                stack.pop()
    return False
