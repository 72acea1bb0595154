"""A byte DFA lifted to the tokens of one vocabulary: the compiled constraint.

A state's token mask is computed on its first visit, the cheapest of four exact ways
that applies (literal branches, runs of a character class, chains of a wide byte class,
the trie walk), then cached; states no token can tell apart share one mask. A
TokenAutomaton is logically immutable: its lazy caches are filled under a lock, so one
instance is shared by any number of requests and threads. The mask methods:
docs/automaton.md, "Token masks".
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import numpy as np

from . import budget, walks
from .constraint import Constraint
from .dfa import (
    CHAR_START,
    DEAD,
    DEFAULT_MAX_STATES,
    LazyDFA,
    StateSource,
    TermSource,
    char_bound,
    char_step,
    length_bound,
)
from .errors import ConstraintError
from .matcher import Matcher, TokenMatcher
from .terms import (
    ALT,
    AND,
    BYTES,
    CONCAT,
    EMPTY,
    LAZY,
    LAZY_PROGRAMS,
    NOTHING,
    REPEAT,
    STR,
    Term,
    TermBuilder,
    paused_gc,
)
from .vocabulary import TokenColumns, Vocabulary
from .walks import TrieWalker, walk_columns, walk_from

# A state whose byte class chain has at least this many bytes gets its mask token by token
# (TokenAutomaton._chain_words) instead of by a trie walk.
CHAIN_MIN_BYTES = 16
# A chain's state whose term is at most this big (Term.size) has its alphabet read, to
# skip walking the tokens with a byte outside it (_chain_words): the rest of a JSON
# document is bigger, and has lazy parts, whose alphabet is not known anyway.
ALPHABET_MAX_SIZE = 256
# A lazy program of at most this many entries is loaded to mask the state it heads
# (_loaded_head).
LOADED_HEAD_MAX = 256
# A length bound (TokenAutomaton._bounded_words) is taken where at most this many
# tokens that can reach it need a check of their own.
BOUNDED_MAX_CHECKED = 256
# A run of a character class (TokenAutomaton._run_words) is taken when at most this
# many tokens have bytes that its class does not settle.
RUN_MAX_WALKED = 4096
# made_of tests only the tokens that start with a byte of the class, or reads those
# with a byte outside it off the lists by byte, where they are at most 1/MADE_OF_FEW of
# the vocabulary (a gather per token costs about as much as a whole pass's share).
MADE_OF_FEW = 32
# made_of derives a class's tokens from one of this many classes it met last, where they
# differ by bytes few tokens have (_near_made_of).
MADE_OF_RECENT = 8


def no_output_message(description: str, info) -> str:
    """require_output's refusal; where the front end found keywords that contradict
    (`info.why_empty`: a JSON Schema's), it names them and their pointers."""
    why = getattr(info, "why_empty", ())
    cause = ("; keywords that contradict: " + "; ".join(why)) if why else (
        " (a schema whose keywords contradict each other, `false`, a regex that matches nothing or only what "
        "the vocabulary cannot spell...)")
    return (f"the constraint ({description}) accepts no output at all: no token begins a text that "
            f"satisfies it{cause}")


class TokenAutomaton(Constraint):
    """A compiled constraint: a byte DFA over the tokens of one vocabulary. Create
    per-request matchers with `.matcher()`. `make_matcher(automaton)`, where given,
    makes them instead of TokenMatcher (a front end's checks beside the automaton);
    `info` is the front end's typed metadata (Constraint).

    >>> m = compile_regex(r"[0-9]+", vocab).matcher()     # doctest: +SKIP
    >>> m.accept_token(vocab_id_of("12"))                 # doctest: +SKIP
    True
    """

    def __init__(self, source: StateSource, start_key, vocab: Vocabulary, description: str = "",
                 max_states: int | None = None, *, make_matcher: Callable[[TokenAutomaton], Matcher] | None = None,
                 info: object = None):
        self.vocab, self.description = vocab, description
        self.make_matcher, self.info = make_matcher, info
        self.dfa = LazyDFA(source, start_key, max_states or DEFAULT_MAX_STATES)
        self._eos = np.array(vocab.eos_ids, dtype=np.int64)
        self._eos_set = frozenset(vocab.eos_ids)
        self._eos_words = pack_ids(self._eos, vocab.num_words)
        self._eos_words.setflags(write=False)
        self._masks: dict[int, np.ndarray] = {}
        self._counts: dict[int, int] = {}
        self._next: dict[tuple[int, int], int] = {}  # (state, token) -> state, as met
        self._chains: dict[bytes, dict] = {}  # byte class -> {state: _chain(state)}
        self._char_classes: dict[int, tuple] = {}  # term id -> _char_class_entry(term)
        self._endings: dict[int, int] = {}  # term id -> _class_successor's bytes that end it
        self._rest_lives: dict[tuple, np.ndarray] = {}  # (R's state, split key) -> _split_walk's verdicts
        self._needs: dict[tuple, dict] = {}  # (A id, R id) -> {token: _need(A, R, token)}
        # what this automaton's matchers share across requests, by table name (the front
        # ends' matchers keep theirs here: a table per name, made on first use)
        self.matcher_memo: dict[str, dict] = {}
        self.walker = TrieWalker(self.dfa, vocab.trie, remember=False)
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"TokenAutomaton({self.description!r}, states={self.dfa.num_states})"

    @property
    def start(self) -> int:
        return self.dfa.start

    @classmethod
    def from_term(cls, tb: TermBuilder, root: Term, vocab: Vocabulary, description: str = "",
                  max_states: int | None = None) -> TokenAutomaton:
        """The automaton of a byte-level regular term (see fsm/core/terms.py)."""
        max_states = max_states or DEFAULT_MAX_STATES
        return cls(TermSource(tb, max_states), root, vocab, description, max_states)

    def owns_source(self) -> TokenAutomaton:
        """Declare the state source (its term builder, a grammar's parser stacks) this
        automaton's alone: when the automaton is freed, the source's reference cycles
        are broken (TermBuilder.release), so that reference counting frees it at once.
        Otherwise a dropped automaton waits for a full collection of the cyclic
        collector, which traverses all of it (hundreds of thousands of objects for a
        large schema) inside whatever step it falls in. Returns self."""
        weakref.finalize(self, self.dfa.source.release).atexit = False
        self._owns_source = True
        return self

    _owns_source = False

    def __setstate__(self, state: dict) -> None:
        """(fsm/core/transport.py: a constraint that arrives from another process owns
        its source there too.)"""
        self.__dict__.update(state)
        if self._owns_source:
            weakref.finalize(self, self.dfa.source.release).atexit = False

    def matcher(self) -> Matcher:
        """A new per-request matcher (the front end's, where it checks more than the
        automaton: JSON's unique items and distinct keys)."""
        return TokenMatcher(self) if self.make_matcher is None else self.make_matcher(self)

    def require_output(self) -> TokenAutomaton:
        """self, or ConstraintError if no output can begin: the first mask (needed anyway)
        is empty (a schema whose keywords contradict each other, `false`, a regex that
        matches nothing or only what the vocabulary cannot spell). Generating from it
        would end at the first step; guided, the logits processor and the engine refuse
        it up front. (An automaton is still a fine acceptor of token sequences.)

            >>> fsm.compile_json_schema(False, vocab).require_output()  # doctest: +SKIP
            ConstraintError: the constraint (json schema) accepts no output at all: ...
        """
        budget.stage("computing the first mask")
        if not self.mask(self.start).any():
            raise ConstraintError(no_output_message(self.description or "compiled", self.info))
        return self

    # -- queries used by Matcher ---------------------------------------------------
    def is_accepting(self, s: int) -> bool:
        return bool(self.dfa.accepting[s])

    def next_state(self, s: int, token_id: int) -> int:
        """State after `token_id` (an ordinary token) from `s`; 0 when not allowed."""
        nxt = self._next.get((s, token_id))
        if nxt is None:
            if not 0 <= token_id < len(self.vocab.token_bytes) or not self.vocab.token_bytes[token_id]:
                return DEAD
            with self._lock, paused_gc():
                nxt = self._next[(s, token_id)] = self.dfa.walk(s, self.vocab.token_bytes[token_id])
        return nxt

    def forced_bytes(self, s: int, limit: int = 4096) -> bytes:
        """The bytes every completion from state s starts with."""
        dfa, out = self.dfa, bytearray()
        with self._lock:
            while len(out) < limit and not dfa.accepting[s]:
                live = dfa.live_bytes(s)
                if len(live) != 1:
                    break
                out.append(live[0])
                s = dfa.step(s, live[0])
        return bytes(out)

    def mask(self, s: int) -> np.ndarray:
        """The int32 bitmask row of tokens allowed in state s (EOS where accepting)."""
        m = self._masks.get(s)
        if m is None:
            with self._lock:
                m = self._masks.get(s)
                if m is None:
                    m = self._compute_mask(s)
        return m

    def allowed_count(self, s: int) -> int:
        """How many tokens state s allows (counted on first demand: forced runs)."""
        mask = self.mask(s)
        n = self._counts.get(s)
        if n is None:
            n = self._counts[s] = int(np.bitwise_count(mask.view(np.uint32)).sum())
        return n

    def allowed_tokens(self, s: int) -> np.ndarray:
        bits = np.unpackbits(self.mask(s).view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.vocab.size])

    def _compute_mask(self, s: int) -> np.ndarray:
        # (a new state's derivatives and walks: many small objects; GrammarAutomaton
        # pauses the collector only where it walks the vocabulary)
        with paused_gc():
            vocab, dfa = self.vocab, self.dfa
            key = dfa.keys[s]
            words = None
            if isinstance(key, Term):  # share the mask of a state that no token tells apart from s
                twin = clip_repeats(_loaded_head(key, dfa.source.tb), dfa.source, len(vocab.columns.count))
                if twin is not key and (t := dfa.state_of(twin)) != s:
                    mask = self._masks[s] = self.mask(t)
                    return mask
                words = self._bounded_words(key)
                if words is None:
                    words = self._branch_words(key)
            if words is None:
                live = s != DEAD and vocab.trie.num_nodes
                words = self._live_words(s) if live else np.zeros(vocab.num_words, dtype=np.uint32)
            if dfa.accepting[s]:
                words |= self._eos_words
            mask = words.view("<i4")
            mask.setflags(write=False)
            self._masks[s] = mask
            return mask

    def _live_words(self, s: int) -> np.ndarray:
        """The tokens whose bytes keep state s alive, as a fresh packed bitmask."""
        key, n = self.dfa.keys[s], self.vocab.num_words
        if isinstance(key, Term):
            trie = self.vocab.trie
            heads, rest = literal_heads(key, self.dfa.source.tb, lambda w: len(trie.path(w)) == len(w))
            if heads:
                nodes = self._walk_literals(heads)
                if not rest:
                    return pack_ids(self.vocab.trie.tokens_at(nodes), n)
                r = self.dfa.state_of(self.dfa.source.tb.alt(rest))  # the other branches
                words = self._cofinite_words(self.dfa.keys[r])
                if words is None:
                    words = self._walk_words(r)
                return words | pack_ids(self.vocab.trie.tokens_at(nodes), n)
            run = self._run_words(s, key)
            if run is not None:
                return run
            words = self._cofinite_words(key)
            if words is not None:
                return words
        chained = None if walks.native is not None else self._chain_words(s)
        if chained is not None:
            return chained
        return self._walk_words(s)

    def _walk_words(self, s: int) -> np.ndarray:
        """The live tokens of state s (a packed bitmask) by the trie walk."""
        words = self.walker.walk_words(s, self.vocab.num_words)
        if words is None:
            words = pack_ids(self.vocab.trie.tokens_at(self.walker.walk(s)[0]), self.vocab.num_words)
        return words

    def _bounded_words(self, key: Term) -> np.ndarray | None:
        """The live tokens (a packed bitmask, without EOS) of a state `(A AND x{0,hi}) R`
        whose bound the longest tokens reach (`length_bound`, or `char_bound`: x a JSON
        character of up to 6 bytes; clip_repeats shares the mask of A R where no token
        reaches it); None for other states.

        A token of at most hi - r bytes (r: A's radius) is alive iff it is alive from
        A R, whose mask every count shares (it takes at most as many characters as
        bytes); the longer ones alive there are checked one by one, by the bound they
        need (`_need`, kept per A and R), but where they are many, those made of bytes
        that keep A where it is (an email's local part) by one test of their length.
        Along a pattern within maxLength each character is a new count, which would
        otherwise cost a walk over the vocabulary each."""
        dfa, src = self.dfa, self.dfa.source
        if key.kind != CONCAT or key.args[0].kind != AND:
            return None
        head, rest = key.args
        bound = length_bound(head, src)
        chars = bound is None  # a bound in JSON characters of several bytes (char_bound)
        if chars and (bound := char_bound(head, src)) is None:
            return None
        a, hi = bound
        r = src.radius(a)
        if r is None or (not chars and src.alphabet(a) is None):
            return None  # (no alphabet: AND inside, whose shortest completions minlen cannot tell)
        short, cols, n = max(hi - r, 0), self.vocab.columns, self.vocab.num_words
        relaxed = self.mask(dfa.state_of(src.tb.concat(a, rest))).view(np.uint32)
        ids = cols.order[: cols.count[short]] if short < len(cols.count) else cols.order[:0]
        # the longer tokens alive from A R, by their TokenColumns positions
        pos = np.flatnonzero((relaxed.take(ids >> 5) >> (ids & 31).astype(np.uint32)) & 1)
        ids, looped = ids.take(pos), None
        if len(ids) > BOUNDED_MAX_CHECKED:  # tokens that keep A where it is: one test
            # (where A may end, R may take them sooner: not for a nullable A)
            loop = None if a.nullable else self._loop_class(a, chars)
            m = None if loop is None else src.min_chars(a) if chars else src.minlen(a)
            if m is None:
                return None
            inside = made_of(cols, loop).take(pos)
            looped = ids[inside & (cols.chars.take(pos) + m <= hi)]
            ids = ids[~inside]
            if len(ids) > BOUNDED_MAX_CHECKED:
                return None
        shorter = cols.memo(("shorter", short, n), lambda: pack_ids(cols.order[cols.count[short]:], n))
        words = relaxed & shorter
        needs = self._needs.setdefault((a.id, rest.id), {})
        fits = []
        for u in ids.tolist():
            need = needs.get(u)
            if need is None:
                need = needs[u] = self._need(a, rest, self.vocab.token_bytes[u], chars)
            if need < 0:  # (min_chars gave up)
                return None
            if need <= hi:
                fits.append(u)
        fits = np.array(fits, dtype=np.intp)
        if looped is not None:
            fits = np.concatenate([fits, looped])
        if len(fits):
            words |= pack_ids(fits, n)
        return words

    def _loop_class(self, a: Term, chars: bool) -> np.ndarray | None:
        """The ASCII bytes that lead a to itself, each a whole item of a length bound
        (with `chars`, a JSON character: not a backslash), as a bool[256];
        None where there are none. A token made of them stays at a: it needs its
        length plus a's shortest completion."""
        cls = np.zeros(256, dtype=bool)
        for s, e, y in self.dfa.source.tb.row(a):
            if y is a:
                cls[s:e] = True
        cls[0x80:] = False  # (ASCII: a token's characters are its bytes)
        if chars:
            cls[0x5C] = False
        return cls if cls.any() else None

    def _branch_words(self, key: Term) -> np.ndarray | None:
        """The live tokens of a state `(B1 | B2 | ...) R` where some branch starts with a
        length bound (an email's domain: a hostname or an address literal), as the
        union of the branches' masks (`B1 R`...), each of which clip_repeats and
        _bounded_words may share; None for other states."""
        src = self.dfa.source
        head, rest = key.args if key.kind == CONCAT else (key, src.tb.empty)
        if head.kind != ALT or not any((h := b.args[0] if b.kind == CONCAT else b).kind == AND
                                       and char_bound(h, src) for b in head.args):
            return None
        words = None
        for b in head.args:
            w = self.mask(self.dfa.state_of(src.tb.concat(b, rest))).view(np.uint32)
            words = w.copy() if words is None else words | w
        return words

    def _need(self, a: Term, rest: Term, data: bytes, chars: bool = False) -> float:
        """The least bound hi for which bytes `data` are alive from `(A AND x{0,hi}) R`:
        where they leave A (A may end there) for a prefix of R, the items in A; else,
        staying in A, theirs and the shortest completion's (infinite where they die).
        Items are bytes (x single bytes along A, and A without AND/NOT/LAZY parts, so
        its shortest completions are exact: minlen) or, with `chars`, JSON characters
        (counted by their first bytes; min_chars, -1 where it gave up). It does not
        depend on hi: a string's later counts reuse it."""
        dfa, src = self.dfa, self.dfa.source
        x, r, n, st = a, dfa.state_of(rest), 0, CHAR_START
        for k, b in enumerate(data):
            if x.nullable and dfa.walk(r, data[k:]) != DEAD:
                return n
            if not chars or st == CHAR_START:
                n += 1
            if chars:
                st = char_step(st, b)
            x = src.tb.derive(x, b)
            if x.kind == NOTHING:
                return float("inf")
        if not chars:
            return n + src.minlen(x)
        m = src.min_chars(x, st)
        return -1 if m is None else n + m

    def _cofinite_words(self, key: Term) -> np.ndarray | None:
        """The live tokens of a state N R where N is A minus a few strings (an object's
        key other than its own keys, part way: TermBuilder.cofinite) and R cannot start
        with a byte A starts with (the key's closing quote); None for other states.

        A token walks from N as from A R except where its bytes complete one of the
        excluded strings and then go on into R: N cannot end there. So the mask is
        A R's (one state for every position of the key, and a run of string content:
        `_run_words`) minus the tokens that start with an excluded rest and one of R's
        first bytes. A walk of N R would meet most of the vocabulary at every key
        position of an open object."""
        tb = self.dfa.source.tb
        if key.kind != CONCAT or key.args[0].id not in tb.cofinite:
            return None
        n, after = key.args
        ends, a = tb.cofinite[n.id]
        follow = first_bytes(tb, after)
        if not follow.any() or (follow & first_bytes(tb, a)).any() or after.nullable:
            return None
        t = self.dfa.state_of(tb.concat(a, after))
        words = self.mask(t).view(np.uint32).copy()  # (t is not accepting: after is not nullable)
        gone = [self.vocab.trie.tokens_under(e + bytes((c,))) for e in ends
                for c in np.flatnonzero(follow).tolist()]
        if gone:
            words &= ~pack_ids(np.concatenate(gone), self.vocab.num_words)
        return words

    def _run_words(self, s: int, key: Term) -> np.ndarray | None:
        """The live tokens (a packed bitmask) of a state x{lo,hi} R (or x R) whose item x
        is a character class (a JSON string's content, `[a-z]{0,50}`, `[^"\\n]*`) that R
        cannot start with; None for other states.

        A token of x's characters (whole UTF-8 ones, the last maybe cut short; checked one
        by one where x takes some non-ASCII characters but not all) is alive iff it has
        at most hi characters;
        one that also has bytes neither x nor R can start with dies at the first of
        them. Only tokens with other bytes (a JSON string's quote and escapes) are
        walked, or split (`_split_walk`). The token lists are built once per vocabulary
        and (class, dead bytes),
        and so is the packed bitmask of the run's tokens per bound hi (a JSON string's
        content allows most of the vocabulary: setting their bits costs far more than
        an OR of the kept bitmask)."""
        tb, cols = self.dfa.source.tb, self.vocab.columns
        head, after = key.args if key.kind == CONCAT else (key, tb.empty)
        if head.kind == REPEAT:
            item, _, hi = head.args
        elif head.kind in (BYTES, ALT, LAZY):  # one character of a class (a uuid's last hex digit)
            item, hi = head, 1
        else:
            return None
        entry = self._char_classes.get(item.id)
        if entry is None:
            entry = self._char_classes[item.id] = _char_class_entry(tb, item)
        chars, item_key = entry
        if chars is None:
            return None
        cls, other, some = chars
        follow = first_bytes(tb, after)
        if (follow & cls).any() or (some and item_key is None):
            return None
        dead = ~(cls | other | follow)
        runs_key = np.packbits(cls).tobytes() + np.packbits(dead).tobytes()
        if some:  # which characters, too
            runs_key = (runs_key, item_key)
        checked = (item, some) if some else None
        entry = cols.memo(("run", runs_key), lambda: self._run_lists(cls, other | follow, checked, item_key))
        if entry is None:
            return None
        ids, counts, pos, packed = entry
        k = len(ids) if hi is None else int(np.searchsorted(counts, hi, side="right"))
        base = prefix_words(ids, k, packed, self.vocab.num_words)
        walked = None
        if other.any() and not (follow & other).any() and item_key is not None:  # a JSON string
            lo = head.args[1] if head.kind == REPEAT else 1
            walked = self._split_walk(item, lo, hi, after, follow, pos, (runs_key, item_key))
        if walked is None:
            walked = cols.order.take(self._walk_positions(s, pos))
        return base | pack_ids(walked, self.vocab.num_words)

    def _split_walk(self, item: Term, lo: int, hi: int | None, after: Term, follow: np.ndarray,
                    pos: np.ndarray, lists_key) -> np.ndarray | None:
        """_run_words' other tokens (a quote, an escape: TokenColumns positions `pos`) for
        a state x{lo,hi} R, without walking the run's states: each token is x's members
        (escapes whole), the last maybe cut short, then at a member's end maybe a byte R
        starts with and the rest (`_split_lists`, once per vocabulary and class). It lives
        iff its members fit (at most hi; at least lo where R follows) and its rest lives
        from R, walked once per R for all such rests. None where a token splits two
        ways. A string's counts walked their own states: dozens of new ones (UTF-8 and
        escape states of that count) at each new count of a string with maxLength."""
        cols, dfa = self.vocab.columns, self.dfa
        key = ("split", lists_key, np.packbits(follow).tobytes())
        lists = cols.memo(key, lambda: self._split_lists(item, follow, pos))
        if lists is None:
            return None
        only, only_counts, split, split_counts, split_rest, rests, rest_cols = lists
        a = dfa.state_of(after)
        lives = self._rest_lives.get((a, key))
        if lives is None:
            lives = np.zeros(len(rests), dtype=bool)
            walked = self._walk_positions(a, np.arange(len(rest_cols.order)), rest_cols, rests)
            lives[rest_cols.order.take(walked)] = True
            self._rest_lives[(a, key)] = lives
        k = len(only) if hi is None else int(np.searchsorted(only_counts, hi, side="right"))
        fits = split_counts >= lo if hi is None else (split_counts >= lo) & (split_counts <= hi)
        return np.concatenate([only[:k], split[fits & lives.take(split_rest)]])

    def _split_lists(self, item: Term, follow: np.ndarray, pos: np.ndarray) -> tuple | None:
        """_split_walk's lists: the tokens that are members only (ids, member counts,
        ascending) and those that go on into R (ids, member counts, index of their rest),
        the distinct rests and their TokenColumns; None where a token splits two ways."""
        tb, data, order = self.dfa.source.tb, self.vocab.token_bytes, self.vocab.columns.order
        only, split, rests = [], [], {}
        for p in pos.tolist():
            u = int(order[p])
            parsed = _split_members(tb, item, data[u], follow)
            if parsed is False:
                return None
            if parsed is None:
                continue  # dies in the run
            n, i = parsed
            if i == len(data[u]):
                only.append((n, u))
            else:
                split.append((n, u, rests.setdefault(data[u][i:], len(rests))))
        only.sort()
        rest_list = list(rests)
        ids = lambda xs: np.array([x[1] for x in xs], dtype=np.int32)  # noqa: E731
        counts = lambda xs: np.array([x[0] for x in xs], dtype=np.intp)  # noqa: E731
        return (ids(only), counts(only), ids(split), counts(split),
                np.array([r for _, _, r in split], dtype=np.intp), rest_list, TokenColumns.build(rest_list))

    def _walk_positions(self, s: int, pos: np.ndarray, cols=None, data=None) -> np.ndarray:
        """The positions among `pos` (ascending) of TokenColumns `cols` (the vocabulary's;
        `data` their bytes) whose tokens live from state s."""
        cols = self.vocab.columns if cols is None else cols
        return walk_from(self.dfa, s, cols, self.vocab.token_bytes if data is None else data, pos)

    def _run_lists(self, cls: np.ndarray, stops: np.ndarray, item: tuple | None, item_key) -> tuple | None:
        """_run_words' lists: the ids of the tokens of the class's characters with their
        character counts, ascending (`_class_tokens`), and the positions of the tokens to
        walk, those with a byte of `stops` (the bytes that start R or a longer member of
        x: any other byte outside the class is dead); None when too many are to walk (a
        narrow class, `\\+?`, before a wide follow: the trie walk is cheaper). `item`:
        (the class, char_class's `some`), when its non-ASCII members are checked one by
        one (`item_key`: the key of its members, _char_class_entry)."""
        cols = self.vocab.columns
        rest = cols.with_bytes(stops, _NO_BYTES, 4 * RUN_MAX_WALKED)  # (from the lists of tokens by byte)
        if rest is None or len(rest) > RUN_MAX_WALKED:
            return None
        key = ("class tokens", np.packbits(cls).tobytes(), item_key)
        ids, counts, packed = cols.memo(key, lambda: self._class_tokens(cls, item))
        return ids, counts, rest.astype(np.int32), packed

    def _class_tokens(self, cls: np.ndarray, item: tuple | None) -> tuple:
        """(ids, character counts, {}) of the tokens made of the class's characters, by
        count ascending, and a dict for _run_words' packed bitmasks of the first k ids.
        Once per vocabulary and class, whatever follows the run. `item`: (the class,
        char_class's `some`), when it takes some non-ASCII characters but not all: the
        tokens with such bytes are checked by `_high_members`."""
        cols = self.vocab.columns
        inside = made_of(cols, cls) & cols.utf8
        if item is not None:
            pos = np.flatnonzero(inside & (cols.high != 0))
            inside[pos] = self._high_members(*item, pos)
        pos = cols.by_chars.compress(inside.take(cols.by_chars))  # by character count
        return cols.order.take(pos).astype(np.int32), cols.chars.take(pos), {}

    def _high_members(self, item: Term, some: tuple, pos: np.ndarray) -> np.ndarray:
        """Whether each token at TokenColumns positions `pos` (ascending, each with a byte
        past ASCII) has only non-ASCII characters of class `item` (`some`: those
        characters, char_class), the last maybe cut short, whatever its ASCII bytes
        (made_of tests those). The tokens walk (item | ASCII)* byte column by byte column
        (most die at their first character); the verdicts are kept per vocabulary and
        `some`, so classes with the same non-ASCII members (`\\w`, `[\\w.]`, `[\\w-]`)
        walk each token once between them. (Each verdict goes from unknown to final in one
        store: a concurrent reader walks an unknown token itself.)"""
        cols = self.vocab.columns
        known = cols.memo(("high members", some), lambda: np.zeros(len(cols.order), dtype=np.int8))
        todo = pos.compress(known.take(pos) == 0)
        if len(todo):
            tb = self.dfa.source.tb
            chars = tb.star(tb.alt((item, tb.byte_range(0, 0x7F))))
            alive = walk_from(LazyDFA(TermSource(tb), chars), None, cols, self.vocab.token_bytes, todo)
            verdict = np.full(len(todo), -1, dtype=np.int8)
            verdict[np.searchsorted(todo, alive)] = 1
            known[todo] = verdict
        return known.take(pos) == 1

    def _chain_words(self, s: int) -> np.ndarray | None:
        """The live tokens (a packed bitmask) of a state that a wide byte class L moves
        along a chain of states (`[a-z]+` loops on one; a JSON string with maxLength
        counts down), None for other states.

        If every byte of L leads from s to t1, from t1 to t2, and so on, a token made
        of L's bytes is alive iff the chain is still alive after as many steps as the
        token has bytes: one test of each token's byte set and its length settles
        them all (the chain is built once and shared by the states along it; their
        bitmask is kept per vocabulary, class and length, as packing tens of thousands
        of ids is not free). Only the other tokens are walked, byte column by byte column (most die at
        their first byte). A trie walk would visit every node of the tokens made of L,
        and expand a state per byte of them."""
        dfa, cols = self.dfa, self.vocab.columns
        dfa.expand(s)
        row = dfa.table[s]
        counts = np.bincount(row)
        counts[DEAD] = 0
        t = int(np.argmax(counts))
        if counts[t] < CHAIN_MIN_BYTES:
            return None
        cls = row == t
        longest = len(cols.count)
        first = row.take(cols.first)  # the state after each token's first byte
        inside = made_of(cols, cls)
        k = int(np.argmax(inside))  # the longest token made of the class: the chain needs no more
        steps, settled = self._chain(t, cls, sum(1 for n in cols.count if n > k) if inside[k] else 0)
        depth = min(longest, 1 + steps)
        short = cols.count[depth] if depth < longest else 0  # positions of tokens <= depth bytes
        n = self.vocab.num_words
        packed = cols.memo(("chain", np.packbits(cls).tobytes(), n), dict)  # tokens past position -> bits
        words = packed.get(short)
        if words is None:
            words = packed[short] = pack_ids(cols.order.take(short + np.flatnonzero(inside[short:])), n)
            words.setflags(write=False)
        rest = ~inside
        if not settled:
            rest[:short] = True
        rest &= first != DEAD
        pos = np.flatnonzero(rest)  # positions, ascending: tokens that end early come last
        key = dfa.keys[s]
        alphabet = dfa.source.alphabet(key) if isinstance(key, Term) and key.size <= ALPHABET_MAX_SIZE else None
        if alphabet is not None:  # a byte no member has: dead (an email's domain, after a letter)
            pos = pos.compress(_inside(cols, _bits(alphabet), pos))
        walked = walk_columns(self.dfa, cols, self.vocab.token_bytes, pos, first.take(pos))[0]
        return words | pack_ids(cols.order.take(walked), n)

    def _chain(self, t: int, cls: np.ndarray, cap: int) -> tuple[int, bool]:
        """How many more bytes of class `cls` keep state t alive, each moving every
        state of the chain to one next state (at most `cap`), and whether longer
        runs are settled (dead, or alive for ever on a loop) rather than split.

        Rows are read from the source: expanding each chain state would also make a
        DFA state of every other byte's target (a JSON string's escapes and UTF-8
        lead bytes). Exact results are kept per class, so a state whose chain ended
        (dead, split or loop) within `cap` steps costs a lookup; a longer chain
        (maxLength: 10000) is read `cap` rows deep on each of its first masks."""
        memo = self._chains.setdefault(np.packbits(cls).tobytes(), {})
        if t in memo:
            return memo[t]
        dfa = self.dfa
        edges = np.flatnonzero(np.diff(np.concatenate([[False], cls, [False]]).astype(np.int8)))
        runs = list(zip(edges[::2].tolist(), edges[1::2].tolist()))
        bits = int.from_bytes(np.packbits(cls, bitorder="little").tobytes(), "little")
        path, cur = [], t
        while cur not in memo:
            if len(path) == cap:  # alive longer than any token; the end is unknown: keep nothing
                return cap, True
            key = dfa.keys[cur]  # (an alternation's rows cost: read its structure)
            nxt = _class_successor(dfa.source.tb, key, bits, self._endings) \
                if isinstance(key, Term) and key.kind == ALT else None
            if nxt is None:
                nxt = _one_target(dfa.source.row(key), runs)
            if nxt is None:  # the class splits: longer runs are walked
                memo[cur] = (0, False)
            elif nxt is False or (nxt := dfa.state_of(nxt)) == DEAD:  # longer runs are dead
                memo[cur] = (0, True)
            elif nxt == cur:  # a loop: every length is alive
                memo[cur] = (cap, True)
            else:
                path.append(cur)
                cur = nxt
        steps, settled = memo[cur]
        for x in reversed(path):
            steps = min(cap, steps + 1)
            memo[x] = (steps, settled)
        return memo[t]

    def _walk_literals(self, heads: list) -> np.ndarray:
        """The walk of alternatives that start with literal bytes: each literal
        descends the trie directly (a DFA state per trie node would be dear: a long word
        list has hundreds of nodes), and only a branch's continuation past its whole
        literal is walked."""
        trie, dfa, tb = self.vocab.trie, self.dfa, self.dfa.source.tb
        _, cstart, cend = trie.lists
        offset = trie.offset
        found: list = []
        tails: dict[int, tuple[list, list]] = {}  # level -> (nodes, states) to walk on from
        for word, tail in heads:
            st = dfa.state_of(tail) if tail is not tb.empty else -1
            if st == DEAD:
                continue
            path = trie.path(word)
            found += [offset[i] + c for i, c in enumerate(path)]
            i = len(word) - 1
            if len(path) == len(word) and st > 0 and cstart[i][path[-1]] < cend[i][path[-1]]:
                nodes, states = tails.setdefault(i, ([], []))  # tokens that run past the literal
                nodes.append(path[-1])
                states.append(st)
        out, sts = [np.array(found, dtype=np.intp)], []
        for level, (nodes, states) in tails.items():
            self.walker.descend(level, np.array(nodes, dtype=np.intp), np.array(states, dtype=np.int32),
                                out, sts)
        return np.concatenate(out)


def _loaded_head(t: Term, tb: TermBuilder) -> Term:
    """t with its head loaded where it is a small lazy program other than a character
    class (a format's first character): the same language, whose structure the masks'
    fast paths read (a uuid's hex run). A JSON string's character stays lazy: its class
    is known by name (char_class); so does a big program (a date-time's 1.2k entries),
    whose first row is loaded saved (terms._LAZY_ROWS) by the step that enters it."""
    head, rest = t.args if t.kind == CONCAT else (t, tb.empty)
    prog = LAZY_PROGRAMS.get(head.args[0]) if head.kind == LAZY else None
    if prog is None or len(prog) > LOADED_HEAD_MAX or char_class(tb, head) is not None:
        return t
    return tb.concat(tb.body(head), rest)


def clip_repeats(t: Term, source, longest: int) -> Term:
    """A term with the same prefixes up to `longest` bytes as t, so the same token mask,
    in which bounded repeats no token can exhaust are unbounded: along a string with
    maxLength 10000, or an array with maxItems 1000, every state clips to one term,
    whose mask is computed once. Only the first three parts of t's concatenation are
    looked at (clipping less is exact too, and this runs on every state's first mask).

    A token of at most `longest` bytes, after parts that take at least m bytes, spans
    at most B = longest - m bytes of a repeat x{lo,hi} (x non-empty): it can neither
    tell hi > B from unbounded nor lo > B+1 from B+1 (so both clip together: hi >= lo).
    A length bound `A AND x{0,hi}` (`char_bound`: x bytes or characters) drops where
    hi >= B + A's radius. Returns t itself if nothing clips."""
    tb = source.tb
    x, heads = t, []
    while len(heads) < 3:
        heads.append(x.args[0] if x.kind == CONCAT else x)
        if x.kind != CONCAT:
            break
        x = x.args[1]
    if not any((h.kind == REPEAT and (h.args[2] is not None or h.args[1] > 1))
               or (h.kind == AND and char_bound(h, source)) for h in heads):
        return t  # nothing bounded to clip (most states: spare the lengths below)
    parts, x, budget, changed = [], t, longest, False
    while True:
        part = head = x.args[0] if x.kind == CONCAT else x
        if head.kind == REPEAT and not head.args[0].nullable:
            item, lo, hi = head.args
            if (hi is not None and hi > budget) or lo > budget + 1:
                head, changed = tb.repeat(item, min(lo, budget + 1), None), True
        elif head.kind == AND and (bound := char_bound(head, source)):
            rest, hi = bound
            radius = source.radius(rest)
            if radius is not None and hi >= budget + radius:
                head, changed = rest, True
        parts.append(head)
        budget -= source.minlen(part)
        x = x.args[1] if x.kind == CONCAT else tb.empty
        if budget < 0 or x is tb.empty or len(parts) == 3:  # deeper repeats: rare, and the walk costs
            break
    if not changed:
        return t
    out = x
    for p in reversed(parts):
        out = tb.concat(p, out)
    return out


def literal_heads(t: Term, tb: TermBuilder, reach=None) -> tuple[list, list]:
    """t's branches as (literal bytes, the rest) where a branch starts with literal bytes;
    the other branches (but the empty string) in a list beside. A literal followed by
    an alternation of literal-headed words (a trie: TermBuilder.words) yields each
    whole word, so masks look words up whole; where `reach(literal)` is false (no token
    starts with it) the alternation is left whole in the rest: no token reaches its
    words (nested objects' key paths, `{"a":{"b":{"c":`, multiply to thousands)."""
    heads: list = []
    rest: list = []
    for k in (t.args if t.kind == ALT else (t,)):
        _literal_words(k, tb, b"", None, heads, rest, reach)
    return heads, rest


def _literal_words(k: Term, tb: TermBuilder, prefix: bytes, after: Term | None,
                   heads: list, rest: list, reach) -> None:
    """literal_heads' work for one branch k, which follows `prefix` and precedes `after`."""
    parts, x = [prefix], k
    while True:
        h = x.args[0] if x.kind == CONCAT else x
        if h.kind == STR:
            parts.append(h.args[0])
        elif h.kind == BYTES and h.args[0] == h.args[1]:
            parts.append(bytes((h.args[0],)))
        elif h.kind == LAZY and h.id not in tb.cofinite and (body := tb.deferred_body(h)) is not None:
            x = tb.concat(body, x.args[1]) if x.kind == CONCAT else body  # (an enum, built now)
            continue
        elif h.kind == ALT and h.id not in tb.cofinite and all(_starts_literal(c) or _cofinite(c, tb)
                                                                for c in h.args):
            word = b"".join(parts)
            if reach is not None and word and not reach(word):
                break
            tail = x.args[1] if x.kind == CONCAT else tb.empty
            tail = tail if after is None else tb.concat(tail, after)
            for c in h.args:
                _literal_words(c, tb, word, tail, heads, rest, reach)
            return
        else:
            break
        if x.kind != CONCAT:
            x = tb.empty
            break
        x = x.args[1]
    if after is not None:
        x = tb.concat(x, after)
    word = b"".join(parts)
    if word:
        heads.append((word, x))
    elif x.kind != EMPTY:
        rest.append(x)


def first_bytes(tb: TermBuilder, t: Term) -> np.ndarray:
    """bool[256]: the bytes t's members can start with."""
    out = np.zeros(256, dtype=bool)
    for a, b, _ in tb.row(t):
        out[a:b] = True
    return out


def _cofinite(t: Term, tb: TermBuilder) -> bool:
    """t starts with a TermBuilder.cofinite term (another key of an open object): as
    a branch beside literal ones, it is masked on its own (_cofinite_words)."""
    return t.kind == CONCAT and t.args[0].id in tb.cofinite


def _starts_literal(t: Term) -> bool:
    """t is the empty string or starts with literal bytes."""
    h = t.args[0] if t.kind == CONCAT else t
    return h.kind in (STR, EMPTY) or (h.kind == BYTES and h.args[0] == h.args[1])


_ALL = (1 << 64) - 1

# Well-formed UTF-8 (Unicode table 3-7): lead bytes, then each continuation byte's range
_UTF8_SEQUENCES = (
    ((0xC2, 0xDF), ((0x80, 0xBF),)),
    ((0xE0, 0xE0), ((0xA0, 0xBF), (0x80, 0xBF))),
    ((0xE1, 0xEC), ((0x80, 0xBF), (0x80, 0xBF))),
    ((0xED, 0xED), ((0x80, 0x9F), (0x80, 0xBF))),
    ((0xEE, 0xEF), ((0x80, 0xBF), (0x80, 0xBF))),
    ((0xF0, 0xF0), ((0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF))),
    ((0xF1, 0xF3), ((0x80, 0xBF),) * 3),
    ((0xF4, 0xF4), ((0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF))),
)


def _char_class_entry(tb: TermBuilder, x: Term) -> tuple:
    """(char_class(x), a key of x's members where the run lists depend on them (some
    non-ASCII ones, or escapes), else None: those lists are shared by every constraint
    on the vocabulary. The key is the non-ASCII members as char_class spells them out
    (an export of a Unicode class such as `\\d`, hundreds of terms, would cost more than
    its first mask), or, with escapes, x's export; None where x cannot be exported (a
    deferred term)."""
    chars = char_class(tb, x)
    if chars is None or not (chars[2] or chars[1].any()):
        return chars, None
    if not chars[1].any():
        return chars, chars[2]
    try:  # (a lazy program's body, loaded: the key of its LAZY term, a single entry)
        return chars, tb.export(tb.lazy_of(x) or x)
    except ValueError:
        return chars, None


def char_class(tb: TermBuilder, x: Term) -> tuple | None:
    """(cls, other, some) when x is a character class: cls (bool[256]) holds the
    bytes of its members (all bytes >= 0x80 when x takes every non-ASCII UTF-8
    character); other holds the ASCII bytes that start longer members (an escape);
    `some`, where x takes some non-ASCII characters but not all (tokens with such
    bytes are then checked one by one), spells those out: a tuple of (lead byte, its
    continuations as nested (start, end, rest) segments), else False. None when a non-ASCII member is not one
    well-formed character, or no member is one byte. A LAZY class (a JSON string's
    character) is read once per process: its UTF-8 check walks about a hundred rows; so is
    a class whose builder recorded its code points (TermBuilder.char_ranges), which each
    compile builds anew."""
    if x.kind == LAZY and x.args[0] not in tb.members:  # (a cyclic one may be one compile's: a
        # recursive schema's rule, fsm/json/recursive.py's lazy_recursion)
        key = x.args[0]
    elif (key := tb.char_ranges.get(x.id)) is None:
        return _read_char_class(tb, x)
    r = _CHAR_CLASSES.get(key, False)
    if r is False:
        r = _read_char_class(tb, x)
        if len(_CHAR_CLASSES) < CHAR_CLASSES_MAX:
            _CHAR_CLASSES[key] = r
    return r


# char_class by a LAZY class's name or a class's recorded code points (read-only arrays): as
# many as a process's patterns hold, up to a bound (a server compiling users' regexes)
_CHAR_CLASSES: dict[str | tuple, tuple | None] = {}
CHAR_CLASSES_MAX = 4096


def _read_char_class(tb: TermBuilder, x: Term) -> tuple | None:
    cls, other = np.zeros(256, dtype=bool), np.zeros(256, dtype=bool)
    row = tb.row(x)
    for a, b, y in row:  # (segments, sorted: a big alternation's row has few)
        if a >= 0x80:
            break
        (cls if y is tb.empty else other)[a:min(b, 0x80)] = True
    if not cls[:0x80].any():
        return None
    some = False
    if row[-1][1] > 0x80:
        targets = _targets(row)
        if _whole_utf8(tb, targets):
            cls[0x80:] = True
        elif any(targets[0x80:0xC2]) or any(targets[0xF5:]):
            return None
        else:  # some characters: each lead's paths must be its continuation bytes, then the end
            some = []
            for (a, b), conts in _UTF8_SEQUENCES:
                for lead in range(a, b + 1):
                    if targets[lead] is not None:
                        paths = _ends_after(tb, targets[lead], conts, cls)
                        if paths is None:
                            return None
                        cls[lead] = True
                        some.append((lead, paths))
            some = tuple(some)
    cls.setflags(write=False)
    other.setflags(write=False)
    return cls, other, some


def _ends_after(tb: TermBuilder, x: Term, conts: tuple, used: np.ndarray) -> tuple | None:
    """Where every path from x takes one byte of each range in conts, then x ends
    (EMPTY): those paths, as nested (start, end, rest) segments (() at the end), and
    the bytes taken marked in `used`; else None."""
    if not conts:
        return () if x is tb.empty else None
    lo, hi = conts[0]
    out = []
    for a, b, y in tb.row(x):
        rest = None if a < lo or b > hi + 1 else _ends_after(tb, y, conts[1:], used)
        if rest is None:
            return None
        used[a:b] = True
        out.append((a, b, rest))
    return None if x.nullable else tuple(out)


_NO_BYTES = np.zeros(256, dtype=bool)


def _split_members(tb: TermBuilder, x: Term, data: bytes, follow: np.ndarray):
    """(n, i): data is n members of the character class x, the last maybe cut short,
    then at i (a member's end; len(data) if none) a byte of `follow` and the rest.
    None where it is not (it dies in the run); False where a member could end or go on
    (its count is not known: not for a class char_class accepts, whose members end
    in EMPTY)."""
    y, n = x, 0
    for i, b in enumerate(data):
        if y is x:
            if follow[b]:
                return n, i
            n += 1
        y = tb.derive(y, b)
        if y.kind == NOTHING:
            return None
        if y.boolean or (y.nullable and y is not tb.empty):
            return False
        if y is tb.empty:
            y = x
    return n, len(data)


def _whole_utf8(tb: TermBuilder, targets: list) -> bool:
    """The non-ASCII bytes of a row (as `_targets`) start exactly the well-formed UTF-8
    characters, each of which ends the term."""
    if any(targets[0x80:0xC2]) or any(targets[0xF5:]):
        return False
    for (a, b), conts in _UTF8_SEQUENCES:
        x = targets[a]
        if x is None or any(y is not x for y in targets[a:b + 1]):
            return False
        for lo, hi in conts:
            row = tb.row(x)
            if len(row) != 1 or row[0][:2] != (lo, hi + 1):
                return False
            x = row[0][2]
        if x is not tb.empty:
            return False
    return True


def _targets(row: tuple) -> list:
    """A derivative row as its target term per byte (None where dead)."""
    out: list = [None] * 256
    for a, b, x in row:
        out[a:b] = [x] * (b - a)
    return out


def pack_ids(ids: np.ndarray, num_words: int) -> np.ndarray:
    """Token ids -> a fresh packed bitmask of num_words uint32 words (bit j of word i:
    token 32*i+j)."""
    bits = np.zeros(num_words * 32, dtype=bool)
    bits[ids] = True
    return np.packbits(bits, bitorder="little").view("<u4")


def prefix_words(ids: np.ndarray, k: int, packed: dict, num_words: int) -> np.ndarray:
    """The packed bitmask (read-only) of ids[:k], kept in `packed` by k. Made from the
    nearest k kept, where fewer ids lie between the two than it would pack: a string's
    counts down from maxLength each take a bound one lower, which a few tokens reach."""
    got = packed.get(k)
    if got is None:
        # (a copy of its keys: automata on other threads share `packed`, the vocabulary's)
        near = min(list(packed), key=lambda j: abs(j - k), default=None)
        if near is not None and 4 * abs(near - k) < k:
            got = packed[near].copy()
            between = ids[min(k, near):max(k, near)].astype(np.intp)
            bits = np.left_shift(np.uint32(1), (between & 31).astype(np.uint32))
            if k > near:
                np.bitwise_or.at(got, between >> 5, bits)
            else:
                np.bitwise_and.at(got, between >> 5, ~bits)
        else:
            got = pack_ids(ids[:k], num_words)
        got.setflags(write=False)
        packed[k] = got
    return got


def made_of(cols, cls: np.ndarray) -> np.ndarray:
    """By token position (TokenColumns order): the token's bytes all lie in the byte
    class `cls`. Remembered per vocabulary and class (read-only): a JSON string's or a
    pattern's run, a grammar's string or comment, are the same classes in every
    constraint on the vocabulary. Where few tokens start with a byte of the class
    (digits), only theirs are tested; where few have a byte outside it (a string's
    characters), those are read off the lists of tokens by byte; where a class kept
    differs from it by bytes few tokens have (an email's local part, then its domain:
    `_near_made_of`), only those tokens are tested; else every token's byte set is."""
    def make():
        n, few = len(cols.order), len(cols.order) // MADE_OF_FEW
        starts = cols.first_start
        if int(np.diff(starts)[cls].sum()) <= few:
            pos = np.concatenate([cols.with_first[starts[b]:starts[b + 1]] for b in np.flatnonzero(cls).tolist()]
                                 or [np.zeros(0, np.intp)])
            out = np.zeros(n, dtype=bool)
            out[pos.compress(_inside(cols, cls, pos))] = True
        elif (others := cols.with_bytes(~cls, _NO_BYTES, few)) is not None:
            out = np.ones(n, dtype=bool)
            out[others] = False
        elif (out := _near_made_of(cols, cls, few)) is None:
            out = _inside(cols, cls, None)
        out.setflags(write=False)
        return out
    key = cls.tobytes()
    out = cols.memo(("made_of", key), make)
    recent = cols.memo(("made_of recent",), list)  # (its classes, latest last: _near_made_of)
    if key not in recent[-MADE_OF_RECENT:]:
        recent.append(key)
        del recent[:-MADE_OF_RECENT]
    return out


def _near_made_of(cols, cls: np.ndarray, most: int) -> np.ndarray | None:
    """made_of(cols, cls) from that of a class kept (one of the MADE_OF_RECENT latest):
    a token without any byte where the two classes differ is made of one iff made of
    the other, so only the tokens with such a byte (at most `most`, read off the lists
    of tokens by byte) are tested; None where no kept class is that near. Along an
    email, `[a-zA-Z0-9._%+-]+@[a-zA-Z0-9-]+(\\.[a-zA-Z0-9-]+)*` has three classes, one
    pass over the vocabulary for the first and a few hundred tokens for the others."""
    best = None
    for key in cols.memo(("made_of recent",), list)[::-1]:
        got = cols.walks.get(("made_of", key))  # (a peek: still kept?)
        if got is None:
            continue
        differ = np.frombuffer(key, dtype=bool) != cls
        pos = cols.with_bytes(differ, _NO_BYTES, most)
        if pos is not None and (best is None or len(pos) < len(best[1])):
            best = got[0], pos
    if best is None:
        return None
    base, pos = best
    out = base.copy()
    out[pos] = _inside(cols, cls, pos)
    return out


def _bits(mask: int) -> np.ndarray:
    """A 256-bit mask (bit b: byte b) as bool[256]."""
    return np.unpackbits(np.frombuffer(mask.to_bytes(32, "little"), dtype=np.uint8), bitorder="little").view(bool)


def _inside(cols, cls: np.ndarray, pos: np.ndarray | None) -> np.ndarray:
    """Whether each token's bytes lie in `cls`, from their byte sets, for the tokens
    at positions `pos` (None: all)."""
    outside = (~np.packbits(cls, bitorder="little").view("<u8")).tolist()
    sets = lambda w: cols.byte_sets[w] if pos is None else cols.byte_sets[w].take(pos)  # noqa: E731
    words, parts = range(4), []
    if outside[2] == outside[3] == _ALL:  # an ASCII class: one test for all high bytes
        parts, words = [cols.high if pos is None else cols.high.take(pos)], range(2)
    for w in words:
        if outside[w] == _ALL:
            parts.append(sets(w))
        elif outside[w]:
            parts.append(sets(w) & np.uint64(outside[w]))
    if not parts:
        return np.ones(len(cols.order) if pos is None else len(pos), dtype=bool)
    acc = parts[0] if len(parts) == 1 else np.bitwise_or(parts[0], parts[1])
    for p in parts[2:]:
        np.bitwise_or(acc, p, out=acc)
    return acc == 0


def _class_successor(tb: TermBuilder, t: Term, bits: int, endings: dict) -> Term | None:
    """The one term that every byte of the class `bits` (a 256-bit mask) leads the
    alternation t to, read off its structure: each branch is a run `x{lo,hi} R` whose
    item x each byte of the class ends (and, where lo is 0, R starts with none of
    them) or one that no byte of the class starts (a oneOf's variants at a string with
    maxLength); None where another branch is there, and the row decides (_one_target).
    Along a string's counts the rows of a many-branch alternation are dear (new terms
    for every UTF-8 and escape segment), and a first mask reads dozens of them.

    `endings`: term id -> the bytes that end it (its row's segments to EMPTY)."""
    out = []
    for b in t.args:
        if not tb.first(b) & bits:
            continue
        head, rest = b.args if b.kind == CONCAT else (b, tb.empty)
        if head.kind != REPEAT:
            return None
        x, lo, hi = head.args
        ends = endings.get(x.id)
        if ends is None:
            ends = endings[x.id] = sum((1 << e) - (1 << s) for s, e, y in tb.row(x) if y is tb.empty)
        if ends & bits != bits or (lo == 0 and tb.first(rest) & bits):
            return None
        out.append(tb.concat(tb.repeat(x, max(lo - 1, 0), None if hi is None else hi - 1), rest))
    return tb.alt(out) if out else None


def _one_target(row: tuple, runs: list) -> object:
    """The one target of every byte in `runs` (sorted [start, end) ranges) under a
    source row, False when none of them has one (all dead), None when they differ."""
    target, covered = None, 0
    for a, b, key in row:
        for lo, hi in runs:
            n = min(b, hi) - max(a, lo)
            if n > 0:
                if target is None:
                    target = key
                elif key is not target:
                    return None
                covered += n
    if not covered:
        return False
    return target if covered == sum(hi - lo for lo, hi in runs) else None
