"""Byte-level regular expressions as hash-consed terms, with Brzozowski derivatives.

Every constraint compiles to a `Term` over bytes. A term's derivative by a byte is
again a term; the distinct derivatives reachable from a term are the states of its DFA,
built lazily (fsm/core/dfa.py). Terms are interned by a `TermBuilder`: equal terms are
the same object, so a term's identity is its `id` and derivative rows are memoised on
the term itself. Why derivatives: docs/automaton.md, "Terms and derivatives".

    >>> tb = TermBuilder()
    >>> t = tb.concat(tb.literal(b"ab"), tb.star(tb.byte_range(0x30, 0x39)))
    >>> [(s, e, tb.nullable(x)) for s, e, x in tb.row(t)]
    [(97, 98, False)]
"""
from __future__ import annotations

import atexit
import gc
import os
import threading
from collections.abc import Callable, Iterable, Sequence

from . import budget

NOTHING, EMPTY, BYTES, CONCAT, ALT, REPEAT, AND, NOT, STR, LAZY = range(10)

# LAZY terms' programs (see TermBuilder.lazy), by name: constant data, shared by builders
LAZY_PROGRAMS: dict[str, tuple] = {}
# and their rows, as (program, ((start, end, the target's entry), ...)): a builder takes
# the first derivatives of a LAZY term (a JSON string's character: ~100 rows deep)
# without loading it or deriving it again (None: not saved, a target is deferred)
_LAZY_ROWS: dict[str, tuple | None] = {}
# and the bytes their members may start with (256-bit masks, from the program: first()),
# so that a walk meeting one at a byte it cannot start with does not load it (the
# tokens `["`, `[[`... after an email's `@`: its address literal's row is dear to load)
_LAZY_FIRST: dict[str, int] = {}

ALL_BYTES = (1 << 256) - 1

# A derivative row: sorted, disjoint (start, end_exclusive, target) byte segments
# whose target is not NOTHING. Bytes not covered lead to NOTHING.
Row = tuple


def _nullable_spine(t: Term, todo) -> list:
    """The tails of t along its concatenations with nullable heads (an object's optional
    members: as many as it has), from t's down, while `todo(tail)`: a row or a
    derivative of t needs theirs, made first in a loop (in a recursion, 500 passed
    Python's stack)."""
    out = []
    while t.kind == CONCAT and t.args[0].nullable and todo(t.args[1]):
        t = t.args[1]
        out.append(t)
    return out


def row_target(row: Row, b: int):
    """The target of `row` at byte b (None where it has none)."""
    for s, e, x in row:
        if b < e:
            return x if b >= s else None
    return None


# Young objects above which a compilation collects them itself (`collect_young`).
YOUNG_COLLECT = 20_000


class _PausedGC:
    """Re-entrant, thread-safe pause of the cyclic collector (see `paused_gc`); a class,
    not a generator context manager, because it runs twice per decoding step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._was_enabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._users == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._users += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._was_enabled:
                gc.enable()

    def collect_young(self) -> None:
        """Inside a pause, at the end of a compilation: if it left more than
        YOUNG_COLLECT objects young, collect them now, once (generation 1: into the old
        generation), counted in the compilation, rather than at the first allocation
        after the pause (a decoding step) and in the rescans of generation 1 after
        that. Not where the collector was off before the pause. Not at the end of
        every pause: decoding steps leave a few hundred objects each, which add up
        across steps to this many and would make some step pay generation 1."""
        with self._lock:
            if self._users and self._was_enabled and gc.get_count()[0] > YOUNG_COLLECT:
                gc.collect(1)


_PAUSED_GC = _PausedGC()


def freeze_long_lived(collect: bool = False) -> bool:
    """Move every object the cyclic collector tracks now into its permanent generation
    (`gc.freeze()`; after a full collection where `collect`), unless
    STRUCTGEN_GC_FREEZE=0; True where it did. Vocabulary.prepare() calls it once a
    vocabulary is loaded, engine.LLM once its model is.

    Why: a full collection scans every object of the old generation, which after
    importing transformers and loading a tokenizer is some 300k objects (0.3-1.5 s here).
    Python runs one whenever the objects that reached the old generation since the last
    one exceed a quarter of it: the terms of a constraint's first masks (an e-mail
    format's program) cross that line, so one of a process's first masks would pay it.
    Frozen, those objects are never scanned again and full collections cost what our
    own objects do. The price: garbage cycles alive at that moment are never freed
    (gc.unfreeze() gives them back to the collector). They are given back at exit, so
    that native bindings see their objects finalized."""
    global _UNFREEZE_AT_EXIT
    if os.environ.get("STRUCTGEN_GC_FREEZE", "1").strip() == "0":
        return False
    if collect:
        gc.collect()
    if not _UNFREEZE_AT_EXIT:
        _UNFREEZE_AT_EXIT = True
        atexit.register(gc.unfreeze)
    gc.freeze()
    return True


_UNFREEZE_AT_EXIT = False


def paused_gc() -> _PausedGC:
    """Pause Python's cyclic garbage collector while terms and derivatives are built.

    They are many small acyclic objects (freed by reference counting), yet each batch
    of them counts towards a full collection, which in a process that has loaded
    transformers scans hundreds of thousands of objects. A compilation that leaves many
    objects young (a large schema) collects them at its end (`collect_young`).
    Re-entrant and thread-safe; a collector the user disabled stays disabled."""
    return _PAUSED_GC


class Term:
    __slots__ = ("kind", "args", "id", "nullable", "boolean", "row", "size")

    def __init__(self, kind: int, args: tuple, tid: int, nullable: bool, boolean: bool, size: int):
        self.kind, self.args, self.id = kind, args, tid
        self.nullable, self.boolean, self.size = nullable, boolean, size
        self.row: Row | None = None

    def __repr__(self) -> str:
        return f"Term#{self.id}({_NAMES[self.kind]})"


_NAMES = ["NOTHING", "EMPTY", "BYTES", "CONCAT", "ALT", "REPEAT", "AND", "NOT", "STR", "LAZY"]


def _first_bits(kind: int, args: tuple, first_of, nullable_of) -> int:
    """TermBuilder.first of a term of `kind` and `args`, from its parts' (`first_of(a)`,
    `nullable_of(a)` of an argument a: a Term, or an entry of an `export`ed program)."""
    if kind == BYTES:
        return (1 << (args[1] + 1)) - (1 << args[0])
    if kind == STR:
        return 1 << args[0][0]
    if kind == CONCAT:
        a, c = args
        return first_of(a) | (first_of(c) if nullable_of(a) else 0)
    if kind == ALT:
        f = 0
        for c in args:
            f |= first_of(c)
        return f
    if kind == REPEAT:
        return first_of(args[0])
    if kind == AND:
        f = ALL_BYTES
        for c in args:
            f &= first_of(c)
        return f
    if kind in (NOTHING, EMPTY):
        return 0
    if kind == LAZY and args[0] in LAZY_PROGRAMS:
        return _lazy_first(args[0])
    return ALL_BYTES  # NOT, a deferred LAZY


def _program_first(prog: tuple) -> int:
    """TermBuilder.first of an `export`ed program's term, read off the program (its
    entries come children first) without loading it."""
    firsts: list[int] = []
    nullable_of = lambda i: prog[i][2]  # noqa: E731
    for kind, args, _nullable, _boolean, _size in prog:
        firsts.append(_first_bits(kind, args, firsts.__getitem__, nullable_of))
    return firsts[-1]


def _lazy_first(name: str) -> int:
    """The first bytes of lazy program `name`'s term (_LAZY_FIRST), once per process."""
    f = _LAZY_FIRST.get(name)
    if f is None:
        f = _LAZY_FIRST[name] = _program_first(LAZY_PROGRAMS[name])
    return f


def _is_nullable(t: Term) -> bool:
    return t.nullable


def _children(t: Term) -> tuple:
    return t.args[:1] if t.kind == REPEAT else t.args if t.kind in (CONCAT, ALT, AND, NOT) else ()


def save_first_rows() -> None:
    """Save the first row of every lazy program that has none saved yet, each derived in a
    builder of its own (TermBuilder._lazy_row saves it on first use otherwise): what a
    preparer calls at load, so that a document's first step into a program (an email, an
    open object's free value) does not export its row."""
    tb = TermBuilder()
    for name, prog in list(LAZY_PROGRAMS.items()):
        if name not in _LAZY_ROWS:
            tb.row(tb.lazy(name, prog))


class TermBuilder:
    """Creates interned terms. One builder per compiled constraint (not thread-safe
    by itself: callers that share one hold their own lock)."""

    def __init__(self) -> None:
        self._interned: dict[tuple, Term] = {}
        self._ticks = budget.CHECK_EVERY
        self._terms: list[Term] = []
        self.nothing = self._make(NOTHING, (), False, False, 1)
        self.empty = self._make(EMPTY, (), True, False, 1)
        self.any_byte = self.byte_range(0, 255)
        self.anything = self.repeat(self.any_byte, 0, None)
        self._loaded: dict = {}  # LAZY name -> its term in this builder
        self._deferred: dict = {}  # LAZY name -> what builds it (TermBuilder.deferred)
        self._steps: dict = {}  # LAZY name -> its derivatives without the body (deferred)
        self.members: dict = {}  # deferred name -> a shortest member (None: none known), where the body is cyclic
        # term id -> (ends, A): the term is A's language minus the strings `ends` (a key
        # other than the object's own ones, part way: fsm/json/strings.py's not_in), and every
        # derivative leaves it for A once off the ends' paths (TokenAutomaton masks it
        # as A's mask minus the ends' continuations)
        self.cofinite: dict[int, tuple] = {}
        # ids of terms x whose members are whole characters of several bytes (a JSON
        # string's), where every A this builder intersects with x{lo,hi} is made of them
        # (dfa.char_bound)
        self.char_items: set[int] = set()
        # term id -> a key of a class term's code points (charset.to_term's ranges; a JSON
        # string's class, ("json", ranges)): its structure is a function of them, so what
        # masks read off it is kept by them across builders (automaton.char_class)
        self.char_ranges: dict[int, tuple] = {}
        self._first: dict[int, int] = {}  # term id -> first(term)
        self._derived: dict[tuple, Term] = {}  # (term id, byte) -> derive(term, byte)
        self._concats: dict[tuple, Term] = {}  # (CONCAT id, term id) -> concat of the two
        self._meets: dict[tuple, Term] = {}  # (term id, term id) -> their intersection (rows')

    def __len__(self) -> int:
        return len(self._terms)

    def release(self) -> None:
        """Break the reference cycles among this builder's objects, once nothing will use
        it again (TokenAutomaton.owns_source): rows memoised on terms lead back to them
        (x* -> x*), and deferred builders hold the compiler that holds the builder."""
        for t in self._terms:
            t.row = None
        self._deferred.clear()
        self._steps.clear()

    # -- construction -------------------------------------------------------------
    def _make(self, kind: int, args: tuple, nullable: bool, boolean: bool, size: int) -> Term:
        self._ticks -= 1
        if self._ticks < 0:  # (every construction passes here: the compile's time budget)
            self._ticks = budget.CHECK_EVERY
            budget.check()
        key = (kind, args)
        t = self._interned.get(key)
        if t is None:
            t = Term(kind, args, len(self._terms), nullable, boolean, size)
            self._interned[key] = t
            self._terms.append(t)
        return t

    def byte_range(self, lo: int, hi: int) -> Term:
        if lo > hi:
            return self.nothing
        return self._make(BYTES, (lo, hi), False, False, 1)

    def literal(self, data: bytes) -> Term:
        """Exactly `data`. Two bytes or more make one STR node (its derivative is the
        rest of the string), not a chain: word lists build and expand cheaply."""
        if not data:
            return self.empty
        if len(data) == 1:
            return self.byte_range(data[0], data[0])
        return self._make(STR, (bytes(data),), False, False, len(data))

    def concat(self, a: Term, b: Term) -> Term:
        if a.kind == NOTHING or b.kind == NOTHING:
            return self.nothing
        if a.kind == EMPTY:
            return b
        if b.kind == EMPTY:
            return a
        if a.kind == CONCAT:  # keep concatenations right-nested: derivatives touch the head only
            # (a row's targets share a's tail: re-nested once, not per byte; along a's spine
            # in a loop, as an object's 200 required members make it)
            spine, x = [], a
            while x.kind == CONCAT and (t := self._concats.get((x.id, b.id))) is None:
                spine.append(x)
                x = x.args[1]
            if x.kind != CONCAT:
                t = self.concat(x, b)
            for y in reversed(spine):
                t = self._concats[(y.id, b.id)] = self.concat(y.args[0], t)
            return t
        return self._make(CONCAT, (a, b), a.nullable and b.nullable, a.boolean or b.boolean,
                          a.size + b.size)

    def seq(self, items: Iterable[Term]) -> Term:
        out = self.empty
        for t in reversed(list(items)):
            out = self.concat(t, out)
        return out

    def alt(self, items: Iterable[Term]) -> Term:
        seen: dict[int, Term] = {}
        for t in items:
            if t.kind == ALT:
                for c in t.args:
                    seen[c.id] = c
            elif t.kind != NOTHING:
                seen[t.id] = t
        if not seen:
            return self.nothing
        if self.anything.id in seen:
            return self.anything
        if len(seen) == 1:
            return next(iter(seen.values()))
        kids = tuple(seen[k] for k in sorted(seen))
        return self._make(ALT, kids, any(c.nullable for c in kids), any(c.boolean for c in kids),
                          1 + sum(c.size for c in kids))

    def words(self, items: Iterable[bytes]) -> Term:
        """The alternation of byte strings, as a trie: words that share a prefix share
        one STR of it, so a derivative touches one branch (a flat alternation of 50
        enum values would rebuild all 50 per byte). Masks still see whole words
        (automaton.literal_heads reads through the trie). Building one costs about
        twice a flat alternation: JSON enums use it (a document walks on through
        them), regex word lists do not (their time to first mask would grow).

        >>> tb = TermBuilder()
        >>> tb.words([b"country-1", b"country-22"]) is tb.concat(
        ...     tb.literal(b"country-"), tb.alt([tb.literal(b"1"), tb.literal(b"22")]))
        True
        """
        ws = sorted(set(items))
        if ws and len(ws[-1]) > 256 and max(map(len, ws)) > 256:  # (recursion: one level per fork)
            return self.alt(self.literal(w) for w in ws)

        def build(lo: int, hi: int, depth: int) -> Term:  # ws[lo:hi] share ws[lo][:depth]
            branches, i = [], lo
            if len(ws[i]) == depth:
                branches.append(self.empty)
                i += 1
            while i < hi:
                j, b = i, ws[i][depth]
                while j < hi and ws[j][depth] == b:
                    j += 1
                if j == i + 1:  # a leaf: the rest of one word
                    branches.append(self.literal(ws[i][depth:]))
                    i = j
                    continue
                first, last = ws[i], ws[j - 1]  # sorted: their common prefix is the group's
                end = depth + 1
                while end < min(len(first), len(last)) and first[end] == last[end]:
                    end += 1
                branches.append(self.concat(self.literal(first[depth:end]), build(i, j, end)))
                i = j
            return self.alt(branches)

        return build(0, len(ws), 0) if ws else self.nothing

    def repeat(self, x: Term, lo: int, hi: int | None) -> Term:
        """x{lo,hi}; hi=None means unbounded."""
        if hi is not None and hi < lo:
            return self.nothing
        if hi == 0 or x.kind == EMPTY:
            return self.empty
        if x.kind == NOTHING:
            return self.empty if lo == 0 else self.nothing
        if x.nullable:  # x{m,n} == x{0,n} when x accepts the empty string
            lo = 0
        if lo == 1 and hi == 1:
            return x
        return self._make(REPEAT, (x, lo, hi), lo == 0 or x.nullable, x.boolean, x.size + 1)

    def star(self, x: Term) -> Term:
        return self.repeat(x, 0, None)

    def optional(self, x: Term) -> Term:
        return self.repeat(x, 0, 1)

    def intersect(self, items: Iterable[Term]) -> Term:
        seen: dict[int, Term] = {}
        for t in items:
            if t.kind == NOTHING:
                return self.nothing
            for c in (t.args if t.kind == AND else (t,)):
                if c is not self.anything:
                    seen[c.id] = c
        if not seen:
            return self.anything
        if len(seen) == 1:
            return next(iter(seen.values()))
        kids = tuple(seen[k] for k in sorted(seen))
        return self._make(AND, kids, all(c.nullable for c in kids), True,
                          1 + sum(c.size for c in kids))

    def complement(self, x: Term) -> Term:
        """All byte strings not in x (not only valid UTF-8: intersect as needed)."""
        if x.kind == NOT:
            return x.args[0]
        return self._make(NOT, (x,), not x.nullable, True, x.size + 1)

    # -- moving terms between builders --------------------------------------------------
    def export(self, t: Term) -> tuple:
        """t as a builder-independent program (children first) that `load` rebuilds in
        any builder: a constant term (a JSON format) is built once per process."""
        return self._export((t,))[0]

    def _export(self, roots) -> tuple:
        """(program, the roots' entries): one program for several terms, with the parts
        they share once."""
        index: dict[int, int] = {}
        prog: list = []
        stack = list(reversed(roots))
        while stack:
            x = stack[-1]
            if x.id in index:
                stack.pop()
                continue
            kids = [c for c in _children(x) if c.id not in index]
            if kids:
                stack.extend(kids)
                continue
            stack.pop()
            if x.kind == LAZY and x.args[0] not in LAZY_PROGRAMS:
                raise ValueError(f"a deferred term ({x.args[0]!r}) cannot be exported")
            args = tuple(index[a.id] if isinstance(a, Term) else a for a in x.args)
            index[x.id] = len(prog)
            prog.append((x.kind, args, x.nullable, x.boolean, x.size))
        return tuple(prog), [index[x.id] for x in roots]

    def lazy(self, name: str, prog: tuple) -> Term:
        """The term of an `export`ed program, loaded only when its first derivative is
        needed: a JSON format costs nothing until the output reaches it. `name` must
        identify `prog` for the whole process."""
        known = LAZY_PROGRAMS.setdefault(name, prog)
        if known is not prog and known != prog:
            raise ValueError(f"lazy term {name!r} already names another program")
        _, _, nullable, boolean, size = prog[-1]
        return self._make(LAZY, (name,), nullable, boolean, size)

    def deferred(self, name, build: Callable[[], Term], nullable: bool,
                 step: Callable[[int], Term | None] | None = None, *, cyclic: bool = False,
                 member: bytes | None = None) -> Term:
        """A LAZY term that `build()` makes when its first derivative is needed (in this
        builder: unlike `lazy`, it has no program, and cannot be exported). `name` must
        identify the language for the whole process; the term has no AND/NOT inside,
        is not empty, and is nullable as given. `step(b)`, where given, is the
        derivative by byte b where it is known without the body (None where not):
        derive() asks it first. `cyclic`: the body leads back to the term (a residue
        automaton's states, a recursive schema's rule): readers of structure
        (`deferred_body`) leave it closed and take `member`, one of the shortest members,
        where given (guesses, shortest lengths; a residue's `step` must then know every
        byte)."""
        if name not in self._loaded:
            self._deferred.setdefault(name, build)
        if step is not None:
            self._steps.setdefault(name, step)
        if cyclic:
            self.members[name] = member
        return self._make(LAZY, (name,), nullable, False, 1)

    def matches(self, t: Term, data: bytes) -> bool:
        """Whether `data` is a member of t: its derivatives along data, an intersection's
        parts, a complement's operand and the branches of an alternation with AND/NOT
        parts apart (no intersection of derivatives is built: a oneOf's exclusive
        branches, `B1 & ~B2 | B2 & ~B1`, are checked as their plain parts). Only t's own
        structure is split so; what its derivatives become is derived on, jointly.

        >>> tb = TermBuilder()
        >>> tb.matches(tb.intersect([tb.literal(b"ab"), tb.complement(tb.literal(b"a"))]), b"ab")
        True
        """
        if t.kind == AND:
            return all(self.matches(c, data) for c in t.args)
        if t.kind == NOT:
            return not self.matches(t.args[0], data)
        if t.kind == ALT and t.boolean:
            return any(self.matches(c, data) for c in t.args)
        for b in data:
            t = self.derive(t, b)
            if t.kind == NOTHING:
                return False
        return t.nullable

    def deferred_body(self, t: Term) -> Term | None:
        """The term a deferred LAZY term (`deferred`) stands for, built now; None for
        any other term (a `lazy` program's term is not loaded) and for a cyclic one
        (one with a `member`)."""
        if t.kind != LAZY or t.args[0] in LAZY_PROGRAMS or t.args[0] in self.members:
            return None
        return self.body(t)

    def body(self, t: Term) -> Term:
        """The term a LAZY term stands for, loaded (or built) into this builder once."""
        name = t.args[0]
        x = self._loaded.get(name)
        if x is None:
            build = self._deferred.pop(name, None)
            if build is None and name not in LAZY_PROGRAMS:  # (a deferred term, its builder dropped)
                raise RuntimeError(f"lazy term {name!r} cannot be built: its term builder was released with "
                                   "the automaton that owned it (TokenAutomaton.owns_source); keep the "
                                   "automaton alive while using what it made")
            x = self._loaded[name] = build() if build is not None else self.load(LAZY_PROGRAMS[name])
            if x.nullable != t.nullable:  # (a deferred term's is declared: derivatives trusted it)
                raise ValueError(f"lazy term {name!r} was declared {'' if t.nullable else 'not '}nullable")
        return x

    def lazy_of(self, t: Term) -> Term | None:
        """The LAZY term of the program whose body, loaded here, t is (None for any other
        term): the same language under the name every builder gives it."""
        for name, x in self._loaded.items():
            if x is t and name in LAZY_PROGRAMS:
                return self.lazy(name, LAZY_PROGRAMS[name])
        return None

    def load(self, prog: tuple) -> Term:
        """The term of an `export`ed program, in this builder (interned as usual)."""
        return self._load(prog)[-1]

    def _load(self, prog: tuple) -> list[Term]:
        built: list[Term] = []
        make = self._make
        for kind, args, nullable, boolean, size in prog:
            if kind in (ALT, AND):  # canonical kid order is by id, and ids are this builder's
                args = tuple(sorted((built[i] for i in args), key=lambda c: c.id))
            elif kind == CONCAT:
                args = (built[args[0]], built[args[1]])
            elif kind in (NOT, REPEAT):
                args = (built[args[0]],) + args[1:]
            built.append(make(kind, args, nullable, boolean, size))
        return built

    # -- derivatives -----------------------------------------------------------------
    def nullable(self, t: Term) -> bool:
        return t.nullable

    def row(self, t: Term) -> Row:
        """The derivative of t by every byte, as segments (memoised on t)."""
        r = t.row
        if r is None:
            if t.kind == CONCAT and t.args[0].nullable:  # (its tails' rows first)
                for x in reversed(_nullable_spine(t, lambda x: x.row is None)):
                    x.row = self._compute_row(x)
            r = t.row = self._compute_row(t)
        return r

    def _compute_row(self, t: Term) -> Row:
        k = t.kind
        if k == BYTES:
            return ((t.args[0], t.args[1] + 1, self.empty),)
        if k == STR:
            data = t.args[0]
            return ((data[0], data[0] + 1, self.literal(data[1:])),)
        if k == CONCAT:
            a, b = t.args
            head = tuple((s, e, self.concat(x, b)) for s, e, x in self.row(a))
            return self._union((head, self.row(b))) if a.nullable else head
        if k == ALT:
            return self._union([self.row(c) for c in t.args])
        if k == REPEAT:
            x, lo, hi = t.args
            rest = self.repeat(x, max(lo - 1, 0), None if hi is None else hi - 1)
            return tuple((s, e, self.concat(d, rest)) for s, e, d in self.row(x))
        if k == AND:
            return self._intersect_rows([self.row(c) for c in t.args])
        if k == NOT:
            return self._complement_row(self.row(t.args[0]))
        if k == LAZY:
            return self._lazy_row(t)
        return ()  # NOTHING, EMPTY

    def _lazy_row(self, t: Term) -> Row:
        name = t.args[0]
        # a body already loaded here (a mask read its structure) derives cheaper than
        # the saved row's program loads (an email's first row: ~200 entries)
        saved = _LAZY_ROWS.get(name) if name not in self._loaded else None
        if saved is not None:
            built = self._load(saved[0])
            return tuple((s, e, built[k]) for s, e, k in saved[1])
        r = self.row(self.body(t))
        if name in LAZY_PROGRAMS and name not in _LAZY_ROWS:  # (a deferred term's row is its builder's own)
            # the targets in one program: they share most of their parts (date-time's
            # ten targets: 11.5k entries exported one by one, 1.2k together)
            try:
                out = self._export([x for _, _, x in r])
            except ValueError:  # a target holds a deferred term: not saved
                out = None
            _LAZY_ROWS[name] = None if out is None else (
                out[0], tuple((s, e, k) for (s, e, _), k in zip(r, out[1])))
        return r

    def derive(self, t: Term, b: int) -> Term:
        """t's derivative by the byte b alone (the row's target at b, when the row is
        known): what a walk needs, without building the targets of every other byte
        (a JSON string's row has ~10)."""
        if t.row is not None:
            x = row_target(t.row, b)
            return self.nothing if x is None else x
        k = t.kind
        if k == BYTES:
            return self.empty if t.args[0] <= b <= t.args[1] else self.nothing
        if k == STR:
            data = t.args[0]
            return self.literal(data[1:]) if data[0] == b else self.nothing
        key = (t.id, b)  # (emptiness guesses and walks derive the same big terms again)
        x = self._derived.get(key)
        if x is None:
            if t.kind == CONCAT and t.args[0].nullable:  # (its tails' first: each then goes no deeper)
                for y in reversed(_nullable_spine(t, lambda y: y.row is None and (y.id, b) not in self._derived)):
                    self.derive(y, b)
            x = self._derived[key] = self._derive(t, b)
        return x

    def _derive(self, t: Term, b: int) -> Term:
        k = t.kind
        if k == CONCAT:
            a, c = t.args
            head = self.concat(self.derive(a, b), c)
            return self.alt((head, self.derive(c, b))) if a.nullable else head
        if k == ALT:  # (branches that cannot start with b are not derived: a class of 34 escapes)
            bit = 1 << b
            return self.alt([self.derive(x, b) for x in t.args if self.first(x) & bit])
        if k == REPEAT:
            x, lo, hi = t.args
            return self.concat(self.derive(x, b), self.repeat(x, max(lo - 1, 0), None if hi is None else hi - 1))
        if k == AND:
            return self.intersect([self.derive(x, b) for x in t.args])
        if k == NOT:
            d = self.derive(t.args[0], b)
            return self.anything if d.kind == NOTHING else self.complement(d)
        if k == LAZY:
            if not self.first(t) >> b & 1:  # (without loading it)
                return self.nothing
            step = self._steps.get(t.args[0])
            if step is not None and (x := step(b)) is not None:
                return x
            if _LAZY_ROWS.get(t.args[0]) is not None:
                x = row_target(self.row(t), b)
                return self.nothing if x is None else x
            return self.derive(self.body(t), b)
        return self.nothing  # NOTHING, EMPTY

    def first(self, t: Term) -> int:
        """The bytes some member of t may start with, as a 256-bit mask (a superset: every
        byte for complements and lazy terms), memoized by term id."""
        f = self._first.get(t.id)
        if f is None:
            f = self._first[t.id] = _first_bits(t.kind, t.args, self.first, _is_nullable)
        return f

    def _union(self, rows: Sequence[Row]) -> Row:
        rows = [r for r in rows if r]
        if len(rows) <= 1:
            return rows[0] if rows else ()
        merged = sorted((seg for r in rows for seg in r), key=lambda seg: seg[0])
        if all(merged[i][1] <= merged[i + 1][0] for i in range(len(merged) - 1)):
            return tuple(merged)  # disjoint segments (a byte trie, e.g. word lists)
        events: list[tuple[int, int, Term]] = []
        for r in rows:
            for s, e, x in r:
                events.append((s, 1, x))
                events.append((e, 0, x))
        events.sort(key=lambda ev: ev[0])
        active: dict[int, list] = {}  # term id -> [term, count]
        out: list = []
        i, n = 0, len(events)
        while i < n:
            pos = events[i][0]
            while i < n and events[i][0] == pos:
                _, start, x = events[i]
                slot = active.get(x.id)
                if start:
                    if slot is None:
                        active[x.id] = [x, 1]
                    else:
                        slot[1] += 1
                elif slot[1] == 1:
                    del active[x.id]
                else:
                    slot[1] -= 1
                i += 1
            if active and i < n:
                nxt = events[i][0]
                target = self.alt(v[0] for v in active.values())
                if out and out[-1][1] == pos and out[-1][2] is target:
                    out[-1] = (out[-1][0], nxt, target)
                else:
                    out.append((pos, nxt, target))
        return tuple(out)

    def _intersect_rows(self, rows: Sequence[Row]) -> Row:
        """The row of an intersection. Most segments of a row share their target (a
        string's characters, the bytes an excluded key does not start with), so most
        pairs of segments meet the same two targets: each pair is intersected once per
        builder (`_meets`), and neighbouring segments with one target are one segment."""
        out, meets = rows[0], self._meets
        for r in rows[1:]:
            merged: list = []
            i = j = 0
            while i < len(out) and j < len(r):
                s = max(out[i][0], r[j][0])
                e = min(out[i][1], r[j][1])
                if s < e:
                    a, b = out[i][2], r[j][2]
                    x = meets.get((a.id, b.id))
                    if x is None:
                        x = meets[(a.id, b.id)] = self.intersect((a, b))
                    if x.kind != NOTHING:
                        if merged and merged[-1][1] == s and merged[-1][2] is x:
                            merged[-1] = (merged[-1][0], e, x)
                        else:
                            merged.append((s, e, x))
                if out[i][1] < r[j][1]:
                    i += 1
                else:
                    j += 1
            out = tuple(merged)
        return out

    def _complement_row(self, r: Row) -> Row:
        out, pos = [], 0
        for s, e, x in r:
            if pos < s:
                out.append((pos, s, self.anything))
            out.append((s, e, self.complement(x)))
            pos = e
        if pos < 256:
            out.append((pos, 256, self.anything))
        return tuple(out)


def minus_empty(tb: TermBuilder, t: Term, other: Callable[[Term], Term] | None = None) -> Term:
    """t's texts but the empty one, through alternatives, concatenations and repeats, so
    that a term with no other text comes out as nothing (not as an intersection that only
    a search finds empty). Another nullable term goes to `other` (by default it is
    intersected with the non-empty texts)."""
    if not t.nullable:
        return t
    k = t.kind
    if k == EMPTY:
        return tb.nothing
    if k == ALT:
        return tb.alt(minus_empty(tb, c, other) for c in t.args)
    if k == REPEAT:
        x, _lo, hi = t.args
        return tb.concat(minus_empty(tb, x, other), tb.repeat(x, 0, None if hi is None else hi - 1))
    if k == CONCAT:  # (a b ... z: (a-e) b...z | (b-e) c...z | ... | z-e, along the spine in
        # a loop: an object's optional slots chain as many as it has)
        out, x = [], t
        while x.kind == CONCAT:
            a, b = x.args
            out.append(tb.concat(minus_empty(tb, a, other), b))
            x = b
        return tb.alt(out + [minus_empty(tb, x, other)])
    return other(t) if other is not None else tb.intersect([t, tb.repeat(tb.any_byte, 1, None)])
