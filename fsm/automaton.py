"""A byte DFA lifted to the tokens of one vocabulary: the compiled constraint.

Per-state token masks are computed on a state's first visit by walking every token
through the DFA at once, one byte column at a time (numpy), dropping tokens as soon
as they die; most die at their first byte. Masks are cached per state, so a state's
later visits cost a copy.

A TokenAutomaton is logically immutable: its lazy caches are filled under a lock, so
one instance is shared by any number of requests and threads.
"""
from __future__ import annotations

import threading

import numpy as np

from .dfa import DEAD, DEFAULT_MAX_STATES, LazyDFA, StateSource, TermSource
from .terms import Term, TermBuilder
from .vocabulary import Vocabulary


class TokenAutomaton:
    """A compiled constraint. Create per-request matchers with `.matcher()`.

    >>> m = compile_regex(r"[0-9]+", vocab).matcher()     # doctest: +SKIP
    >>> m.accept_token(vocab_id_of("12"))                 # doctest: +SKIP
    True
    """

    def __init__(self, source: StateSource, start_key, vocab: Vocabulary, description: str = "",
                 max_states: int | None = None):
        self.vocab, self.description = vocab, description
        self.dfa = LazyDFA(source, start_key, max_states or DEFAULT_MAX_STATES)
        self._eos = np.array(vocab.eos_ids, dtype=np.int64)
        self._eos_set = frozenset(vocab.eos_ids)
        self._masks: dict[int, np.ndarray] = {}
        self._counts: dict[int, int] = {}
        self._next: dict[tuple[int, int], int] = {}  # (state, token) -> state, as met
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"TokenAutomaton({self.description!r}, states={self.dfa.num_states})"

    @property
    def start(self) -> int:
        return self.dfa.start

    @classmethod
    def from_term(cls, tb: TermBuilder, root: Term, vocab: Vocabulary, description: str = "",
                  max_states: int | None = None) -> "TokenAutomaton":
        """The automaton of a byte-level regular term (see fsm/terms.py)."""
        max_states = max_states or DEFAULT_MAX_STATES
        return cls(TermSource(tb, max_states), root, vocab, description, max_states)

    def matcher(self) -> "Matcher":
        from .matcher import Matcher
        return Matcher(self)

    # -- queries used by Matcher ---------------------------------------------------
    def is_accepting(self, s: int) -> bool:
        return bool(self.dfa.accepting[s])

    def is_eos(self, token_id: int) -> bool:
        return token_id in self._eos_set

    def next_state(self, s: int, token_id: int) -> int:
        """State after `token_id` (an ordinary token) from `s`; 0 when not allowed."""
        nxt = self._next.get((s, token_id))
        if nxt is None:
            if not 0 <= token_id < len(self.vocab.token_bytes) or not self.vocab.token_bytes[token_id]:
                return DEAD
            with self._lock:
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
        self.mask(s)
        return self._counts[s]

    def allowed_tokens(self, s: int) -> np.ndarray:
        bits = np.unpackbits(self.mask(s).view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.vocab.size])

    def _compute_mask(self, s: int) -> np.ndarray:
        vocab, dfa = self.vocab, self.dfa
        bits = np.zeros(vocab.num_words * 32, dtype=bool)
        if s != DEAD and vocab.trie.num_nodes:
            trie = vocab.trie
            live = self._walk(s)
            ids = trie.token_of_node.take(live)
            bits[ids[ids >= 0]] = True
            if len(trie.dup_nodes):
                bits[trie.dup_ids[np.isin(trie.dup_nodes, live)]] = True
        if dfa.accepting[s] and len(self._eos):
            bits[self._eos] = True
        count = int(bits.sum())
        mask = np.packbits(bits, bitorder="little").view("<i4")
        mask.setflags(write=False)
        self._counts[s] = count
        self._masks[s] = mask
        return mask

    def _walk(self, s: int) -> np.ndarray:
        """The flat indices of the trie nodes whose bytes keep state s alive, found
        one trie level at a time.

        A level is computed whole while many of its nodes live (dead parents sit in
        state 0, whose row is all 0, so no compaction is needed); once few live, only
        the children of live nodes are visited. Work scales with the live nodes."""
        trie, dfa = self.vocab.trie, self.dfa
        dfa.expand(s)
        cur = dfa.table[s].take(trie.byte[0])
        found = []
        live = None  # indices of live nodes in the current level; None: the whole level
        for j in range(1, len(trie.byte) + 1):
            if live is None:
                nz = np.flatnonzero(cur)
                found.append(nz + trie.offset[j - 1])
                if not nz.size or j == len(trie.byte):
                    break
                if nz.size * 8 < len(cur):
                    live, cur = nz, cur.take(nz)
                else:
                    cur = self._step(cur.take(trie.parent[j]), trie.byte[j])
                    continue
            else:
                found.append(live + trie.offset[j - 1])
                if j == len(trie.byte):
                    break
                # numpy costs ~15 µs a level, Python ~1 µs a node: finish small subtrees in Python
                # numpy costs ~15 µs a level, Python ~1 µs a node: finish small subtrees in Python
                if len(live) < 64 and int(trie.descendants[j - 1].take(live).sum()) < 256:
                    found.append(self._walk_small(j - 1, live.tolist(), cur.tolist()))
                    break
            starts, ends = trie.child_start[j - 1].take(live), trie.child_end[j - 1].take(live)
            sizes = ends - starts
            total = int(sizes.sum())
            if total == 0:
                break
            first = np.cumsum(sizes) - sizes
            children = np.repeat(starts - first, sizes) + np.arange(total)
            nxt = self._step(np.repeat(cur, sizes), trie.byte[j].take(children))
            keep = np.flatnonzero(nxt)
            live, cur = children.take(keep), nxt.take(keep)
            if not live.size:
                break
        return np.concatenate(found)

    def _walk_small(self, level: int, nodes: list, states: list) -> np.ndarray:
        """The live descendants of a few trie nodes (given with their states), walked
        one by one: deep levels hold few nodes, where numpy's per-call cost dominates."""
        trie, dfa = self.vocab.trie, self.dfa
        byte, cstart, cend = trie.lists
        offset, flat = trie.offset, dfa.table.reshape(-1)
        out, stack = [], [(level, k, st) for k, st in zip(nodes, states)]
        while stack:
            j, k, st = stack.pop()
            if j + 1 >= len(byte):
                continue
            bj, base = byte[j + 1], st * 256
            for c in range(cstart[j][k], cend[j][k]):
                nxt = flat.item(base + bj[c])
                if nxt < 0:
                    dfa.expand(st)
                    flat = dfa.table.reshape(-1)
                    nxt = flat.item(base + bj[c])
                if nxt:
                    out.append(offset[j + 1] + c)
                    stack.append((j + 1, c, nxt))
        return np.array(out, dtype=np.intp)

    def _step(self, st: np.ndarray, col: np.ndarray) -> np.ndarray:
        """One byte per walker: next states, expanding rows met for the first time."""
        dfa = self.dfa
        idx = st * np.intp(256)  # intp indices: take() converts anything else first
        idx += col
        nxt = dfa.table.reshape(-1).take(idx)
        if nxt.size and nxt.min() < 0:  # UNKNOWN: rows not expanded yet
            missing = nxt < 0
            for u in np.unique(st[missing]).tolist():
                dfa.expand(u)
            nxt[missing] = dfa.table.reshape(-1).take(idx[missing])
        return nxt
