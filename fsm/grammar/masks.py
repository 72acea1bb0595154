"""Token masks of grammar configurations: a context-free lexer pass, cached per lexer
position, plus a few parser steps per mask (used by fsm/grammar/automaton.py).

A token's fate depends on the parser stack only where it completes a terminal inside
itself; everything else is lexing, the same under every stack. So each lexer position is
walked once through a lazily built lexer DFA (LexerSource, LexerWalker), whose final
states class the tokens, and a mask is a few cached parser steps per class, a
class-to-token gather and ORs of rows, cached per pattern of outcomes. Tokens whose
lexings the lexer does not track are checked one by one, so masks are exact.
Design: docs/grammars.md, "Masks".
"""
from __future__ import annotations

import gc

import numpy as np

from ..core import budget
from ..core.automaton import char_class, first_bytes, made_of
from ..core.dfa import DEFAULT_MAX_STATES, LazyDFA
from ..core.terms import CONCAT, REPEAT, paused_gc, row_target
from ..core.vocabulary import ascending_set
from ..core.walks import TrieWalker, walk_columns
from .rows import merge, stacks, subtract

# Completed non-ignored terminals a lexing may hold before another one starts: LONG_SEQ
# in lexer states of at most SMALL_KEY items (unambiguous lexing, e.g. `((((` or
# `"}]}`, where long sequences cost no states), MAX_SEQ up to BIG_KEY items, else none
# (SQL's identifiers split into NAME NAME ... and keywords: combinations multiply).
MAX_SEQ, LONG_SEQ, SMALL_KEY, BIG_KEY = 1, 64, 2, 8
_CAPS = (LONG_SEQ, MAX_SEQ, 0)  # the cap of each bucket


def _cap_bucket(items: int) -> int:
    """The bucket of a lexer state of `items` items: its cap is _CAPS[bucket]."""
    return 0 if items <= SMALL_KEY else 1 if items <= BIG_KEY else 2


DEEP_TERM = -2  # the terminal of a DEEP marker item


NORMAL, DEEP, FRESH = 0, 1, 2  # item kinds (see LexerSource)


def _terms(seq: tuple) -> tuple:
    """The completed terminals of a seq (without its leading context set, if any)."""
    return seq[1:] if seq and type(seq[0]) is frozenset else seq


class LexerSource:
    """A StateSource over sets of lexing items `(seq, terminal, lexeme, kind)` (see
    docs/grammars.md, "Masks"); `g` is the GrammarSource whose terminals are lexed. Items are
    only created live (lexemes whose language is empty are dropped), so a non-empty
    key is a live state.

    `seq` may start with a frozenset: the terminals that can start at the stack the
    walk is for (a boundary, or an %ignore'd lexeme, which leaves the stack alone);
    after a completed terminal t, those in `follows[t]` start: the terminals some LR
    state entered by shifting t has an action on (a superset of what can follow t in
    any sentence; ignored terminals always can), of t's family where t reads the
    character after it (fsm/grammar/follow.py). A lexing that would start a terminal
    after more than its cap of completed ones (see MAX_SEQ) becomes a sticky marker
    `(seq, -2, None, DEEP)`: the token needs an exact check wherever the stack takes
    seq. A FRESH item is a lexeme that must go on before it may end (the position
    walks of GrammarMasks; its end is handled as a boundary). The boundary item is
    `(seq, -1, None, NORMAL)`.

    Items are numbered as they are met, and a key is the int with their bits set: a
    byte's target is the OR of each item's target, kept per (item, cap, byte). A
    keyword-heavy grammar's boundary walk meets a thousand or more lexer states of a few
    items each, most at a byte or two; as frozensets of item tuples (hashed and merged
    whole) they were dear."""

    def __init__(self, g):
        self.g = g
        self.dead = 0
        n = len(g.terms)
        follows = [set() for _ in range(n)]
        for acts in g.t.action.values():
            budget.check()  # (a parser state: the compile's time budget)
            for i, act in acts.items():
                for shift, arg in act[1] if act[0] is None else (act,):  # (a fork: each action)
                    if shift:
                        follows[i].update(g.t.action[arg])
        ign = {i for i in range(n) if g.ignored[i]}
        # (after a terminal that reads the character after it, its family's: follow.py)
        self.follows = [frozenset(f | ign) if g.fam.plain else frozenset((f | ign) & g.fam.members[g.fam.after[i]])
                        for i, f in enumerate(follows)]
        self._items: list = []        # item number -> item
        self._number: dict = {}       # item -> its bit
        self._members: dict = {0: ()}  # key -> its item numbers
        self._steps: dict = {}        # (item number * 3 + cap bucket) * 256 + byte -> key
        self._item_rows: dict = {}    # item number * 3 + cap bucket -> row
        self._starts: dict = {}       # (seq, room) -> start row (targets are keys)
        self._start_lists: dict = {}  # the same as lists of 256 keys (0 where none)

    def _bit(self, item) -> int:
        b = self._number.get(item)
        if b is None:
            b = self._number[item] = 1 << len(self._items)
            self._items.append(item)
        return b

    def members(self, key: int) -> tuple:
        """The numbers of key's items."""
        m = self._members.get(key)
        if m is None:
            out, k = [], key
            while k:
                low = k & -k
                out.append(low.bit_length() - 1)
                k ^= low
            m = self._members[key] = tuple(out)
        return m

    def items(self, key: int) -> list:
        """key's items `(seq, terminal, lexeme, kind)`."""
        items = self._items
        return [items[j] for j in self.members(key)]

    def boundary(self, ctx: frozenset) -> int:
        return self._bit(((ctx,), -1, None, NORMAL))

    def position(self, ctx: frozenset | None, term: int, lexeme) -> int:
        return self._bit((() if ctx is None else (ctx,), term, lexeme, FRESH))

    def _start_row(self, seq: tuple, room: bool) -> tuple:
        """Lexemes starting after `seq`: items for the allowed terminals where there is
        `room` for one more, else items for the ignored ones and a DEEP marker where a
        non-ignored one would start."""
        k = (seq, room)
        r = self._starts.get(k)
        if r is None:
            last = seq[-1] if seq else None
            allowed = self.follows[last] if type(last) is int else last
            if room:
                r = self._lifted(allowed, seq)
            else:
                ign = frozenset(j for j in allowed if self.g.ignored[j])
                m = self._bit((_terms(seq), DEEP_TERM, None, DEEP))
                deep = tuple((a, b, m) for a, b, _ in self.g.template(allowed - ign))
                r = merge([p for p in (self._lifted(ign, seq), deep) if p])
            self._starts[k] = r
        return r

    def _start_cells(self, seq: tuple, room: bool) -> list:
        """`_start_row(seq, room)` as a list of 256 keys (0 where none)."""
        k = (seq, room)
        r = self._start_lists.get(k)
        if r is None:
            r = self._start_lists[k] = [0] * 256
            for a, b, x in self._start_row(seq, room):
                r[a:b] = [x] * (b - a)
        return r

    def _lifted(self, allowed: frozenset, seq: tuple) -> tuple:
        # only an ignored lexeme needs the context set: after any other, follows apply
        plain, ignored, bit = _terms(seq), self.g.ignored, self._bit
        out = []
        for a, b, items in self.g.template(allowed):
            key = 0
            for j, y in items:
                key |= bit((seq if ignored[j] else plain, j, y, NORMAL))
            out.append((a, b, key))
        return tuple(out)

    def row(self, key: int) -> tuple:
        members = self.members(key)
        bucket = _cap_bucket(len(members))
        rows, parts = self._item_rows, []
        for j in members:
            r = rows.get(j * 3 + bucket)
            if r is None:
                r = rows[j * 3 + bucket] = self._item_row(j, bucket)
            if r:
                parts.append(r)
        return merge(parts)

    def _item_row(self, j: int, bucket: int) -> tuple:
        """Item j's row in a lexer state of cap bucket `bucket`."""
        seq, i, x, kind = self._items[j]
        if kind == DEEP:
            return ((0, 256, 1 << j),)
        if i < 0:  # the boundary
            return self._start_row(seq, True)
        g = self.g
        seg = g._live_row(x)
        parts = [tuple((a, b, self._bit((seq, i, y, NORMAL))) for a, b, y in seg)] if seg else []
        if kind != FRESH and x.nullable:
            if not g.ignored[i]:
                seq = _terms(seq) + (i,)
            r = self._start_row(seq, len(_terms(seq)) <= _CAPS[bucket])
            if g.ignored[i] and r and seg:  # longest match of an ignored lexeme
                r = subtract(r, seg)
            if r:
                parts.append(r)
        return merge(parts)

    def derive(self, key: int, c: int) -> int:
        """`row(key)`'s target at byte c, without building the row: most lexer states
        are met at a byte or two (SQL's keyword prefixes), and a row costs a merge of
        every item's start rows."""
        members = self._members.get(key) or self.members(key)
        base = _cap_bucket(len(members)) * 256 + c
        steps, out = self._steps, 0
        for j in members:
            r = steps.get(j * 768 + base)
            if r is None:
                r = steps[j * 768 + base] = self._item_step(j, base >> 8, c)
            out |= r
        return out

    def _item_step(self, j: int, bucket: int, c: int) -> int:
        """Item j's target at byte c in a lexer state of cap bucket `bucket`."""
        seq, i, x, kind = self._items[j]
        if kind == DEEP:
            return 1 << j
        if i < 0:
            return self._start_cells(seq, True)[c]
        g, out = self.g, 0
        y = row_target(g._live_row(x), c)
        if y is not None:
            out = self._bit((seq, i, y, NORMAL))
        if kind == FRESH or not x.nullable or (g.ignored[i] and y is not None):
            return out  # (an ignored lexeme that goes on: longest match)
        if not g.ignored[i]:
            seq = _terms(seq) + (i,)
        return out | self._start_cells(seq, len(_terms(seq)) <= _CAPS[bucket])[c]

    def accepting(self, key) -> bool:
        return False

    def is_empty(self, key) -> bool:
        return not key


class _Plan:
    """One lexer position walked over the vocabulary: the live tokens with their class,
    and per class the requirements (nodes of a tree of terminal sequences) that allow
    it. Only live tokens are kept: most positions inside a lexeme keep a handful."""
    __slots__ = ("tokens", "token_class", "parent", "term", "skip", "cols", "starts",
                 "deep_cols", "deep_starts", "has_deep", "cache", "depths", "by_top",
                 "loop", "loop_class", "by_id")

    def __init__(self, tokens, token_class, parent, term, skip, cols, starts, deep_cols,
                 deep_starts):
        self.tokens, self.token_class = tokens, token_class
        self.parent, self.term = parent, term       # requirement tree, node 0 = ()
        self.skip = skip                            # node -> first node after its subtree
        self.cols, self.starts = cols, starts       # CSR: class -> requirement nodes
        self.deep_cols, self.deep_starts = deep_cols, deep_starts
        self.has_deep = deep_cols is not None
        self.cache: dict = {}                       # requirement outcomes -> bits
        self.by_top: dict = {}                      # top states of a stack -> bits
        self.depths: list = []                      # their lengths - 1 (_position_bits)
        self.loop = None                            # tokens of class loop_class (bool
        self.loop_class = -1                        # per token: LexerWalker.loop_walk)
        self.by_id = None                           # class per token id (see _assemble)


# A walk that builds this many lexer states collects the young generations itself.
COLLECT_AFTER = 200
# _literal_plan walks a position whose lexeme has at most this many words left.
LITERAL_WORDS = 64
# walk_loops walks a position by the trie if at most this many tokens start in its row.
EAGER_TOKENS = 4096
# _literal_plan walks the tokens longer than a word by its trie subtree (in Python) if
# that has at most this many nodes, else by byte columns (numpy).
SUBTREE_WALK = 256
# A walk whose start leads at least this share of the tokens into one state that loops
# on all their bytes takes LexerWalker.loop_walk.
LOOP_SHARE = 0.25


class LexerWalker(TrieWalker):
    """Trie walks through the lexer DFA (automaton.TrieWalker, small subtrees kept),
    plus the walk of a position inside a string or a comment (`loop_walk`)."""

    def __init__(self, dfa: LazyDFA, trie, token_bytes, width: int):
        super().__init__(dfa, trie, remember=True)
        self.token_bytes, self.width = token_bytes, width
        self._loops: dict = {}  # (terminal, lexeme id) -> _lexeme_loops

    def loop_walk(self, s: int, cols):
        """The walk from state s when most tokens loop in one state (inside a string
        or a comment): None where no state holds LOOP_SHARE of the tokens, else
        (tokens, states, looping tokens (bool per token id), u). A token whose first
        byte leads to u and all of whose bytes are in u's loop class (the bytes that
        lead u to itself; with every non-ASCII character where those loop too:
        _chars_loop) ends in u: decided for all tokens at once. Only the others are
        walked, byte column by byte column (TokenColumns; no trie prefixes shared, but
        they are few: a typical vocabulary has a few hundred tokens with a quote or
        newline, and a few hundred that cut a character short)."""
        dfa, least = self.dfa, LOOP_SHARE * len(cols.order)
        if not len(cols.order):
            return None
        dfa.expand(s)
        row0 = dfa.table[s]
        by_first = cols.first_counts
        share = np.bincount(row0, weights=by_first, minlength=dfa.num_states)
        share[0] = 0
        u = int(share.argmax())
        if not share[u] or share[u] < least:
            return None
        dfa.expand(u)
        cls = dfa.table[u] == u
        starts_u = row0 == u
        if by_first[starts_u & cls].sum() < least:
            return None  # too few tokens start with a byte of the class
        if any(kind == DEEP for _s, _i, _x, kind in dfa.source.items(dfa.keys[u])):
            return None  # a class needing exact checks: its thousands of tokens are not checked
        live0 = row0 != 0
        whole = self._chars_loop(s, u)
        if whole:  # every non-ASCII character, from its first byte (whole tokens only)
            cls, starts_u = cls.copy(), starts_u.copy()
            cls[0x80:] = starts_u[0x80:] = True
        # the same for the positions of one string or comment, and for any grammar
        # (or recursive schema) on this vocabulary with the same bytes
        k = ("loop", cls.tobytes(), starts_u.tobytes(), live0.tobytes())
        looping, n_loop, pos = cols.memo(k, lambda: self._loop_split(cols, cls, starts_u, live0, whole))
        if n_loop < least:
            return None
        alive, sts = walk_columns(dfa, cols, self.token_bytes, pos, row0.take(cols.first.take(pos)))
        tokens = cols.order.take(alive)
        return tokens, sts.astype(np.int32, copy=False), looping, u

    def _chars_loop(self, s: int, u: int) -> bool:
        """Whether every non-ASCII character leads lexer states s and u to u, byte by
        byte: u's items are s's, each a lexeme `C* R` (C a class of every non-ASCII
        character, R starting with none of them) that cannot end there (or an
        ignored one: longest match). Then a token of whole characters walks like
        its ASCII ones: a string's or comment's tokens with accents or CJK loop too
        (hundreds fewer walked)."""
        keys, items = self.dfa.keys, self.dfa.source.items
        in_u = items(keys[u])
        if s != u and {(q, i, x, NORMAL) for q, i, x, _k in items(keys[s])} != set(in_u):
            return False
        return all(self._lexeme_loops(i, x) for _q, i, x, _k in in_u)

    def _lexeme_loops(self, i: int, x) -> bool:
        r = self._loops.get((i, x.id))
        if r is None:
            g = self.dfa.source.g
            head, rest = x.args if x.kind == CONCAT else (x, g.tb.empty)
            r = False
            if head.kind == REPEAT and head.args[1:] == (0, None) and (g.ignored[i] or not x.nullable):
                c = char_class(g.tb, head.args[0])
                r = c is not None and bool(c[0][0x80:].all()) and not c[2] and \
                    not first_bytes(g.tb, rest)[0x80:].any()
            self._loops[(i, x.id)] = r
        return r

    def _loop_split(self, cols, cls: np.ndarray, starts_u: np.ndarray, live0: np.ndarray,
                    whole: bool) -> tuple:
        """loop_walk's split of the tokens: (looping: bool per token id, their number,
        the positions of the others that live past their first byte). The others are
        few (a string's: those with a quote or newline, or not whole UTF-8 characters
        where those loop, `whole`): they are read from the vocabulary's per-byte
        lists, and the looping tokens are all but them (cheaper than a test of every
        token's byte set and a scatter of the many looping ones)."""
        order = cols.order
        looping = np.zeros(self.width, dtype=bool)
        others = cols.with_bytes(~cls, cls & ~starts_u, len(order) // 4)
        if others is None:  # most tokens do not loop (nor will the walk take the split)
            loops = made_of(cols, cls) & starts_u.take(cols.first)
            if whole:
                loops &= cols.whole
            ids = order[loops]
            looping[ids[ids < self.width]] = True
            others = np.flatnonzero(~loops)
        else:
            if whole:
                others = ascending_set([others, cols.broken])
            n = min(self.width, len(cols.first_of_id))
            looping[:n] = cols.first_of_id[:n] != 256  # (every token with bytes)
            ids = order.take(others)
            looping[ids[ids < self.width]] = False
        looping.setflags(write=False)  # shared by every grammar on this vocabulary
        return looping, len(order) - len(others), others[live0.take(cols.first.take(others))]


def _top_key(stack, depth: int) -> int:
    """The states of the stack's top depth+1 nodes (fewer at the bottom), as one int
    (32 bits per node, state + 1): a key the collector does not track, unlike a tuple."""
    key, shift = 0, 0
    while stack is not None and shift <= 32 * depth:
        key |= (stack.state + 1) << shift
        stack, shift = stack.parent, shift + 32
    return key


class GrammarMasks:
    """Element masks (packed uint32 bitmask rows) for a GrammarSource and vocabulary."""

    def __init__(self, g, vocab, byte_dfa: LazyDFA, max_states: int, ahead: bool):
        self.g, self.vocab, self.byte_dfa = g, vocab, byte_dfa
        self.ahead = ahead  # keyword positions walked on from the shared boundary
        self.lex = LexerSource(g)
        # the lexer DFA depends on the grammar and vocabulary only, not on the output:
        # it is not held to the configuration cap
        self.dfa = LazyDFA(self.lex, self.lex.dead, max(max_states, DEFAULT_MAX_STATES),
                           sparse=True)
        self.walker = LexerWalker(self.dfa, vocab.trie, vocab.token_bytes, vocab.num_words * 32)
        # (keyword positions walk subtrees that no other walk meets from the same state:
        # not kept, and walked in one batch)
        self.subtree_walker = TrieWalker(self.dfa, vocab.trie, remember=False)
        self.width = vocab.num_words * 32
        self._plans: dict = {}       # lexer key -> _Plan
        self._ctx_plans: dict = {}   # boundary context -> its _Plan
        self._pos_plans: dict = {}   # (terminal, lexeme id) -> its position's _Plan
        self._boundary: dict = {}    # stack (family 0), or (stack, family) -> bits
        self._elements: dict = {}    # (stack, terminal, lexeme id) -> bits
        self._startable: dict = {}   # LR stack (family 0, or with the family) -> terminals that can start there
        self._acts: dict = {}        # LR state (family 0, or with the family) -> GrammarMasks._actions
        self._all = g.fam.members[0]
        self._contexts: list = [[] for _ in g.fam.members]  # per family: context sets walked (_context)
        self._ctx_of_state: dict = {}  # LR state (or with the family) -> a walked context covering its actions
        self._restart: dict = {}     # (terminal, lexeme id) -> GrammarMasks._restarts
        self._no_first: dict = {}    # lexeme id -> bits of tokens not starting in its row
        self._wide: list = []        # (terminal, lexeme): loop positions walk_loops left
        self._reqs: dict = {}        # lexer state -> _requirements
        self._seq_ids: dict = {}     # terminal sequence -> its id (_seq)
        self._seqs: list = []        # id -> terminal sequence
        self._seq_parent: list = []  # id -> id of the sequence without its last terminal
        self._shifted: dict = {}     # (terminal, id) -> _shift
        self.stats = {"walks": 0, "exact_checks": 0}

    # -- plans -----------------------------------------------------------------------
    def _plan(self, key, trie_walk: bool = True) -> _Plan | None:
        """The walk of lexer key `key`; None where it would take a walk of the trie
        and `trie_walk` is False (see walk_loops)."""
        p = self._plans.get(key)
        if p is None:
            before = self.dfa.num_states
            with paused_gc():
                p = self._make_plan(key, trie_walk)
            if p is None:
                return None
            self._plans[key] = p
            if self.dfa.num_states - before >= COLLECT_AFTER:
                # Thousands of new lexer items and sets, all kept: the collector would
                # scan them young in the next steps anyway (gen 0, then gen 1); done here,
                # in the step already slow.
                gc.collect(1)
        return p

    def _make_plan(self, key, trie_walk: bool = True) -> _Plan | None:
        dfa = self.dfa
        s = dfa.state_of(key)
        looped = self.walker.loop_walk(s, self.vocab.columns)
        if looped is None and not trie_walk:
            return None
        self.stats["walks"] += 1
        if looped is not None:
            tokens, sts, loop, loop_state = looped
            keep = tokens < self.width
            return self._assemble(tokens[keep], sts[keep], None, (), loop, loop_state)
        tokens, sts = self._node_tokens(*self.walker.walk(s))
        return self._assemble(tokens, sts, None, ())

    def _node_tokens(self, nodes: np.ndarray, sts: np.ndarray) -> tuple:
        """The tokens of trie nodes `nodes` and their states: those of the same bytes
        as another one too, none past the mask's width."""
        trie = self.vocab.trie
        tokens = trie.token_of_node.take(nodes)
        if len(trie.dup_nodes):  # tokens with the same bytes as another one
            dup = np.isin(trie.dup_nodes, nodes)
            if dup.any():
                pos = {n: k for k, n in enumerate(nodes.tolist())}
                at = [pos[n] for n in trie.dup_nodes[dup].tolist()]
                tokens = np.concatenate([tokens, trie.dup_ids[dup]])
                sts = np.concatenate([sts, sts.take(at)])
        keep = (tokens >= 0) & (tokens < self.width)
        return tokens[keep], sts[keep]

    def _literal_words(self, x) -> list | None:
        """The words of lexeme x where its language is finite and small (the rest of a
        keyword: `in`i after `jo`, 4 words): at most LITERAL_WORDS words of at most 32
        bytes, byte classes of at most 4 bytes (case pairs); else None."""
        g, words, todo = self.g, [], [(b"", x)]
        while todo:
            w, y = todo.pop()
            if y.nullable:
                words.append(w)
            for a, b, z in g._live_row(y):
                if b - a > 4 or len(w) >= 32:
                    return None
                todo += [(w + bytes((c,)), z) for c in range(a, b)]
            if len(words) + len(todo) > LITERAL_WORDS:
                return None
        return words

    def _literal_plan(self, t: int, x, words: list) -> _Plan:
        """The walk of the position inside lexeme x of terminal t whose rest is one of a
        few `words` (a keyword's): the tokens along each word's trie path (the lexeme
        goes on), and the tokens that run past a whole word walked on from the boundary
        of all terminals, shared: their lexer states are relative to the boundary after
        t, so their requirements get t in front (_assemble). A walk from the position
        itself builds a lexer state for every state after t (dozens for a keyword such
        as `JO|IN`), though the boundary's walk has most of them already."""
        self.stats["walks"] += 1
        dfa, trie, lex, cols = self.dfa, self.vocab.trie, self.lex, self.vocab.columns
        s_pos = dfa.state_of(lex.position(None, t, x))
        s_all = dfa.state_of(lex.boundary(self.g.fam.members[self.g.fam.after[t]]))
        along: dict = {}  # trie node -> state after it, from the position
        below: dict = {}  # word length -> the words and their trie nodes (level indices)
        for w in words:
            st = s_pos
            path = trie.path(w)
            for i, c in enumerate(path):
                st = dfa.step(st, w[i])
                along[trie.offset[i] + c] = st
            if w and len(path) == len(w):
                below.setdefault(len(w), []).append((w, path[-1]))
        nodes = np.fromiter(along, dtype=np.intp, count=len(along))
        tokens, sts = self._node_tokens(nodes, np.fromiter(along.values(), dtype=np.int32,
                                                             count=len(along)))
        flags = np.zeros(len(tokens), dtype=bool)
        past, past_st = [], []  # the tokens longer than a word, walked on from s_all
        for n, ws in below.items():  # (a keyword's case variants: one walk)
            ks = np.array([k for _, k in ws], dtype=np.intp)
            size = int(trie.descendants[n - 1].take(ks).sum())
            if not size:
                continue
            if size <= SUBTREE_WALK:  # their subtrees
                sub, sub_st = [], []
                self.subtree_walker.descend(n - 1, ks, np.full(len(ks), s_all, dtype=np.int32),
                                            sub, sub_st)
                if sub:
                    p, q = self._node_tokens(np.concatenate(sub), np.concatenate(sub_st))
                    past.append(p)
                    past_st.append(q)
                continue
            pos = []  # many tokens: byte columns (numpy) rather than nodes (Python)
            for w, _ in ws:
                p = cols.with_first[cols.first_start[w[0]]:cols.first_start[w[0] + 1]]
                p = p[p < cols.count[n]]
                for j in range(1, n):
                    p = p[cols.column[j].take(p) == w[j]]
                pos.append(p)
            pos = np.sort(np.concatenate(pos))
            p, q = walk_columns(dfa, cols, self.vocab.token_bytes, pos,
                                np.full(len(pos), s_all, dtype=np.int32), n)
            p = cols.order.take(p)
            keep = p < self.width
            past.append(p[keep])
            past_st.append(q[keep])
        if past:
            past = np.concatenate(past)
            tokens = np.concatenate([tokens, past])
            sts = np.concatenate([sts, np.concatenate(past_st).astype(np.int32, copy=False)])
            flags = np.concatenate([flags, np.ones(len(past), dtype=bool)])
        return self._assemble(tokens, sts, flags, (t,))

    def _seq(self, q: tuple) -> int:
        """The id of terminal sequence q (interned: requirement trees are built from ids,
        whose hashes, unlike a tuple's, cost nothing)."""
        i = self._seq_ids.get(q)
        if i is None:
            parent = self._seq(q[:-1]) if q else -1
            i = self._seq_ids[q] = len(self._seqs)
            self._seqs.append(q)
            self._seq_parent.append(parent)
        return i

    def _shift(self, t: int, i: int) -> int:
        """The id of (t,) + sequence i (_literal_plan's states after its terminal t)."""
        k = (t, i)
        j = self._shifted.get(k)
        if j is None:
            j = self._shifted[k] = self._seq((t,) + self._seqs[i])
        return j

    def _requirements(self, u: int) -> tuple:
        """The terminal sequences (ids, _seq) that allow lexer state u's tokens: one per
        plain item (its completed terminals, then its own), and those of its DEEP
        markers (only their prefix is known: exact checks); and the ids of every
        non-empty prefix of them all (the requirement tree's nodes). Kept per state
        (shared by the walks that end there, and by _literal_plan's, which put a
        terminal in front)."""
        r = self._reqs.get(u)
        if r is None:
            ignored, reqs, dreqs = self.g.ignored, set(), set()
            for seq, i, _x, kind in self.lex.items(self.dfa.keys[u]):
                if kind == DEEP:  # seq stopped growing: only its prefix is known
                    dreqs.add(seq)
                else:
                    s0 = _terms(seq)
                    reqs.add(s0 + (i,) if not ignored[i] else s0)
            nodes = {q[:n] for q in (*reqs, *dreqs) for n in range(1, len(q) + 1)}
            r = self._reqs[u] = (frozenset(map(self._seq, reqs)), frozenset(map(self._seq, dreqs)),
                                 frozenset(map(self._seq, nodes)))
        return r

    def _assemble(self, tokens, sts, shifted, prefix: tuple, loop=None, loop_state=-1) -> _Plan:
        """The plan of `tokens` ending in lexer states `sts`. Where `shifted` (bool per
        token) is set, the state is relative to the boundary after the position's
        terminal (_literal_plan): its requirements get `prefix` (one terminal) in front."""
        dfa = self.dfa
        code = sts.astype(np.intp) * 2  # a class: a lexer state, shifted or not
        if shifted is not None:
            code += shifted
        present = np.zeros(2 * dfa.num_states, dtype=bool)  # no sort: a walk keeps ~100k nodes
        present[code] = True
        if loop is not None:
            present[2 * loop_state] = True
        classes = np.flatnonzero(present)
        remap = np.zeros(2 * dfa.num_states, dtype=np.intp)
        remap[classes] = np.arange(len(classes))
        token_class = remap.take(code)
        # classes with the same requirements are one (a keyword's states after it: ~70
        # lexer states, a few distinct requirements); a requirement tree: a node per
        # terminal sequence (and per prefix of one)
        groups: dict = {}
        empty = self._seq(())
        merged, per_class, closed, moved = [], [], {empty}, set()
        for cu in classes.tolist():
            reqs, dreqs, nodes = self._requirements(cu >> 1)
            k = groups.get((reqs, dreqs, cu & 1))
            if k is None:
                k = groups[(reqs, dreqs, cu & 1)] = len(per_class)
                per_class.append((reqs, dreqs, cu & 1))
                if cu & 1:
                    moved |= nodes
                    moved.add(empty)  # (a requirement of nothing: the prefix alone)
                else:
                    closed |= nodes
            merged.append(k)
        if moved:
            (t,) = prefix
            shifted_id = {i: self._shift(t, i) for i in moved}
            closed.update(shifted_id.values())
        merged = np.array(merged, dtype=np.intp)
        token_class = merged.take(token_class)
        # preorder (sorted sequences: a prefix comes first, a subtree is contiguous),
        # so that _met skips the subtree of a sequence the stack does not take
        seqs = self._seqs
        ids = sorted(closed, key=seqs.__getitem__)
        new = {i: k for k, i in enumerate(ids)}
        parent = [0] + [new[self._seq_parent[i]] for i in ids[1:]]
        term = [-1] + [seqs[i][-1] for i in ids[1:]]
        size = [1] * len(ids)  # of each subtree: it ends where the next one starts
        for k in range(len(ids) - 1, 0, -1):
            size[parent[k]] += size[k]
        skip = [k + n for k, n in enumerate(size)]
        false = len(ids)  # sentinel requirement, never met
        node_of = (new, {i: new[j] for i, j in shifted_id.items()} if moved else None)
        cols, starts = _csr([(r, node_of[m]) for r, _, m in per_class], false)
        dcols = dstarts = None
        if any(d for _, d, _ in per_class):
            dcols, dstarts = _csr([(d, node_of[m]) for _, d, m in per_class], false)
        plan = _Plan(tokens, token_class, parent, term, skip, cols, starts, dcols, dstarts)
        if 4 * len(tokens) > self.width and np.bincount(tokens).max() == 1:
            # most tokens live (a boundary, an identifier): a mask is one gather by token
            # id, cheaper than a gather, a selection and a scatter
            plan.by_id = np.full(self.width, len(per_class), dtype=np.intp)
            plan.by_id[tokens] = token_class
        if loop is not None:
            plan.loop, plan.loop_class = loop, int(merged[remap[2 * loop_state]])
        return plan

    # -- evaluation -------------------------------------------------------------------
    def _met(self, plan: _Plan, stack) -> tuple:
        """Which requirement nodes the stack meets (+ the False sentinel), and the
        height of the deepest stack node that deciding it read."""
        feed_low = self.g.feed_low
        parent, term, skip = plan.parent, plan.term, plan.skip
        n = len(parent)
        st = [None] * n
        st[0] = stack
        met = bytearray(n + 1)
        met[0] = 1
        k, low = 1, stack.height
        while k < n:
            x = st[parent[k]]
            h = x.feed.get(term[k]) or feed_low(x, term[k])
            if h[1] < low:
                low = h[1]
            x = h[0]
            if x is None:
                k = skip[k]  # nor does it take any longer sequence with this prefix
                continue
            if x.__class__ is tuple:  # the parse forks (a grammar with conflicts)
                return self._met_forked(plan, stack)
            st[k] = x
            met[k] = 1
            k += 1
        return np.frombuffer(met, dtype=bool), low

    def _met_forked(self, plan: _Plan, stack) -> tuple:
        """_met where feeding a terminal may fork the stack: a node is met where any of
        the stacks its parent node reached takes its terminal."""
        feed_low = self.g.feed_low
        parent, term, skip = plan.parent, plan.term, plan.skip
        n = len(parent)
        st: list = [()] * n
        st[0] = (stack,)
        met = bytearray(n + 1)
        met[0] = 1
        k, low = 1, stack.height
        while k < n:
            outs: dict = {}
            for x in st[parent[k]]:
                h = x.feed.get(term[k]) or feed_low(x, term[k])
                if h[1] < low:
                    low = h[1]
                outs.update(dict.fromkeys(stacks(h[0])))
            if not outs:
                k = skip[k]
                continue
            st[k] = tuple(outs)
            met[k] = 1
            k += 1
        return np.frombuffer(met, dtype=bool), low

    def _position_bits(self, plan: _Plan, stack, elem) -> np.ndarray:
        """The tokens the position walked by `plan` allows under `stack`. Outcomes are
        cached by the states of the stack's top nodes that deciding them read (as many
        as the deepest reduction reached; any stack with those top states decides
        alike): nested structure repeats them."""
        if plan.by_top:
            for d in plan.depths:  # (few: one to three)
                bits = plan.by_top.get(_top_key(stack, d))
                if bits is not None:
                    return bits
        met, low = self._met(plan, stack)
        ck = met.tobytes()
        bits = plan.cache.get(ck)
        if bits is None:
            ok = np.logical_or.reduceat(met.take(plan.cols), plan.starts)
            if plan.by_id is not None:
                allowed = np.append(ok, False).take(plan.by_id)
            else:
                allowed = np.zeros(self.width, dtype=bool)
                allowed[plan.tokens[ok.take(plan.token_class)]] = True
            if plan.loop is not None and ok[plan.loop_class]:
                allowed |= plan.loop
            if plan.has_deep:
                deep = np.logical_or.reduceat(met.take(plan.deep_cols), plan.deep_starts) & ~ok
                if deep.any():
                    allowed |= self._exact(elem, plan.tokens[deep.take(plan.token_class)])
                    return _pack(allowed)  # depends on more of the stack than `met`: not cached
            bits = plan.cache[ck] = _pack(allowed)
        d = stack.height - low
        if d not in plan.depths:
            plan.depths = sorted(plan.depths + [d])
        plan.by_top[_top_key(stack, d)] = bits
        return bits

    def _exact(self, elem, ids: np.ndarray) -> np.ndarray:
        """Tokens `ids` checked one by one from the element alone, stepping its
        configuration a byte at a time (GrammarSource.step: no DFA state or row is
        built for the bytes in between); shared prefixes are stepped once. Elements
        are only created live, so a token is allowed iff its configuration is not
        empty."""
        bits = np.zeros(self.width, dtype=bool)
        step, data = self.g.step, self.vocab.token_bytes
        keys = {b"": frozenset((elem,))}  # prefix -> configuration
        self.stats["exact_checks"] += len(ids)
        for u in ids.tolist():
            b = data[u] if u < len(data) else None
            if not b:
                continue
            k = len(b)
            while b[:k] not in keys:
                k -= 1
            key = keys[b[:k]]
            while key and k < len(b):
                key = keys[b[: k + 1]] = step(key, b[k])
                k += 1
            bits[u] = bool(key)
        return bits

    def boundary_bits(self, stack, fam: int = 0) -> np.ndarray:
        """The tokens allowed where the next lexeme starts at `stack`, in family `fam`."""
        key = stack if fam == 0 else (stack, fam)  # (no tuple where no terminal reads past its end)
        b = self._boundary.get(key)
        if b is None:
            ctx = self._context(stack, fam)
            plan = self._ctx_plans.get(ctx)
            if plan is None:
                plan = self._ctx_plans[ctx] = self._plan(self.lex.boundary(ctx))
                if ctx == self._all:  # the loop positions walk_loops left: their lexer
                    for t, y in self._wide:  # states are mostly built now, in a slow step
                        self._position_plan(t, y)
                    self._wide = []
            b = self._boundary[key] = self._position_bits(plan, stack, (stack, -1, self.g.tb.empty))
        return b

    def _context(self, stack, fam: int = 0) -> frozenset:
        """The set of terminals a boundary walk for `stack` starts with. Any superset of
        the terminals that can start there gives the same masks (requirements check
        them), so a walk made for a superset is reused; the first walk is for just this
        stack's terminals (a cheap first mask), the second for all terminals (then no
        more). An ignored lexeme's position is walked for all terminals at once: the
        lexer states after it are then the boundary's, shared, and a comment is walked
        once per lexeme, not once per context."""
        key = stack.state if fam == 0 else (stack.state, fam)
        c = self._ctx_of_state.get(key)
        if c is not None:
            return c
        ctxs = self._contexts[fam]
        acts = self._actions(stack.state, fam)  # a superset of `need`, without parser steps
        for c in ctxs:
            if acts <= c:
                self._ctx_of_state[key] = c  # contexts are only added: still valid later
                return c
        need = self.startable(stack, fam)
        for c in ctxs:
            if need <= c:
                return c
        c = need if not ctxs else self.g.fam.members[fam]
        ctxs.append(c)
        return c

    def _actions(self, state: int, fam: int = 0) -> frozenset:
        """The terminals of family `fam` LR state `state` has an action on, and the
        ignored ones."""
        key = state if fam == 0 else (state, fam)
        r = self._acts.get(key)
        if r is None:
            g = self.g
            r = frozenset(list(g.t.action[state]) + g._ignored_idx)
            r = self._acts[key] = r if g.fam.plain else r & g.fam.members[fam]
        return r

    def startable(self, stack, fam: int = 0) -> frozenset:
        """The terminals of family `fam` that can start at `stack` (ignored ones included)."""
        key = stack if fam == 0 else (stack, fam)
        r = self._startable.get(key)
        if r is None:
            g = self.g
            r = frozenset([i for i in self._actions(stack.state, fam) if g.ignored[i] or g.feed(stack, i) is not None])
            self._startable[key] = r
        return r

    def element_bits(self, elem) -> np.ndarray:
        stack, t, x = elem
        if t < 0:
            return self.boundary_bits(stack)
        ck = (stack, t, x.id)
        b = self._elements.get(ck)
        if b is not None:
            return b
        g = self.g
        seg = g._live_row(x)
        b = None
        if seg and g.ignored[t] and x.nullable and self._restarts(t, x, seg):
            b = self._elements[ck] = self.boundary_bits(stack)
            return b
        if seg:
            b = self._position_bits(self._position_plan(t, x), stack, elem)
        if x.nullable:
            nxts = stacks(stack if g.ignored[t] else g.feed(stack, t))  # (several: a forked parse)
            fam = 0 if g.ignored[t] else g.fam.after[t]
            if nxts:
                after = self.boundary_bits(nxts[0], fam)
                for nxt in nxts[1:]:
                    after = after | self.boundary_bits(nxt, fam)
                if g.ignored[t] and seg:
                    after = after & self._not_first(x, seg)
                b = after if b is None else (b | after)
        if b is None:
            b = np.zeros(self.width // 32, dtype=np.uint32)
        self._elements[ck] = b
        return b

    def _position_plan(self, t: int, x, trie_walk: bool = True) -> _Plan | None:
        """The walk of the position inside lexeme x of terminal t (x goes on); None
        where it would take a walk of the trie and `trie_walk` is False."""
        plan = self._pos_plans.get((t, x.id))
        if plan is None:
            ignored = self.g.ignored[t]
            words = self._literal_words(x) if self.ahead and not ignored else None
            if words is not None:
                with paused_gc():
                    plan = self._literal_plan(t, x, words)
            else:
                plan = self._plan(self.lex.position(self._all if ignored else None, t, x), trie_walk)
            if plan is not None:
                self._pos_plans[(t, x.id)] = plan
        return plan

    def walk_loops(self, most: int = 16) -> None:
        """Walk now the positions inside each terminal's loops: the lexemes, a byte or
        more into a terminal, that some byte leaves where they are (an identifier's
        tail, a number's digits, a string's or a comment's body; at most `most`
        lexemes explored per terminal). A document meets most of them at its first
        identifier, number or string, where each walk would slow that step: done here,
        in the time to the first mask. Only walks that are cheap anyway: a loop walk
        (LexerWalker.loop_walk), or a trie walk of at most EAGER_TOKENS tokens (by first
        byte). An SQL identifier position is neither: its keyword and NAME NAME splits
        cost many lexer states, paid once, by whichever walk meets them first (the
        boundary's, lazily)."""
        g, first = self.g, self.vocab.columns.first_counts
        for t, term in enumerate(g.terms):
            seen, todo = {term.id}, [term]
            while todo and len(seen) <= most:
                for _a, _b, y in g._live_row(todo.pop()):
                    if y.id in seen:
                        continue
                    seen.add(y.id)
                    todo.append(y)
                    seg = g._live_row(y)
                    if not any(z is y for _a, _b, z in seg):
                        continue
                    if g.ignored[t] and y.nullable and self._restarts(t, y, seg):
                        continue  # its element allows what the boundary allows
                    narrow = sum(first[a:b].sum() for a, b, _z in seg) <= EAGER_TOKENS
                    if self._position_plan(t, y, trie_walk=narrow) is None:
                        self._wide.append((t, y))

    def _restarts(self, t: int, x, seg) -> bool:
        """Whether an ignored lexeme x of terminal t goes on exactly as a new lexeme of
        t would (`[ \\n]*` after a space of `[ \\n]+`), with no other terminal
        starting on those bytes: then its element allows what the boundary of its
        stack allows (the same lexings, the same requirements)."""
        k = (t, x.id)
        r = self._restart.get(k)
        if r is None:
            g = self.g
            want = {c: y for a, b, y in seg for c in range(a, b)}
            starts = {c: items for a, b, items in g.template(g.fam.members[0])
                      for c in range(a, b) if c in want}
            r = self._restart[k] = all(starts.get(c) == frozenset(((t, y),))
                                       for c, y in want.items())
        return r

    def _not_first(self, x, seg) -> np.ndarray:
        """Tokens whose first byte is not in the row `seg` (of lexeme x)."""
        r = self._no_first.get(x.id)
        if r is None:
            cont = np.zeros(257, dtype=bool)
            for a, b, _ in seg:
                cont[a:b] = True
            first = self.vocab.columns.first_of_id
            n = min(self.width, len(first))
            keep = np.ones(self.width, dtype=bool)  # ids past the tokenizer's: no token
            keep[:n] = ~cont.take(first[:n])
            r = self._no_first[x.id] = _pack(keep)
        return r


def _pack(bits: np.ndarray) -> np.ndarray:
    """A bool array over token ids -> uint32 words, bit j of word i = token 32*i+j
    (the bitmask layout), read-only: element masks are combined packed."""
    out = np.packbits(bits, bitorder="little").view("<u4")
    out.setflags(write=False)
    return out


def _csr(rows: list, false: int) -> tuple:
    """Rows (requirement sequence ids, each once; their tree node per id) as CSR arrays
    of their tree nodes."""
    cols, starts = [], []
    for r, node in rows:
        starts.append(len(cols))
        cols.extend(sorted(map(node.__getitem__, r)) if r else (false,))
    return np.array(cols, dtype=np.intp), np.array(starts, dtype=np.intp)
