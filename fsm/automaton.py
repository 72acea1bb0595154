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
        if s != DEAD and vocab.trie.num_nodes:
            bits = self._walk(s).take(vocab.trie.node_of_token) != DEAD
            if len(bits) < vocab.num_words * 32:  # logits wider than the tokenizer
                bits = np.concatenate([bits, np.zeros(vocab.num_words * 32 - len(bits), bool)])
        else:
            bits = np.zeros(vocab.num_words * 32, dtype=bool)
        if dfa.accepting[s] and len(self._eos):
            bits[self._eos] = True
        count = int(bits.sum())
        mask = np.packbits(bits, bitorder="little").view("<i4")
        mask.setflags(write=False)
        self._counts[s] = count
        self._masks[s] = mask
        return mask

    def _walk(self, s: int) -> np.ndarray:
        """The DFA state reached at every trie node from state s (0 where dead or
        not visited), one trie level per step.

        A level is computed whole while many of its nodes live (dead parents sit in
        state 0, whose row is all 0, so no compaction is needed); once few live, only
        the children of live nodes are visited."""
        trie, dfa = self.vocab.trie, self.dfa
        states = np.zeros(trie.num_nodes + 1, dtype=np.int32)  # + the never-reached slot
        dfa.expand(s)
        cur = dfa.table[s].take(trie.byte[0])
        states[: len(cur)] = cur
        live = None  # indices of live nodes in the current level; None: the whole level
        for j in range(1, len(trie.byte)):
            if live is None:
                alive = np.count_nonzero(cur)
                if alive == 0:
                    break
                if alive * 8 < len(cur):
                    live = np.flatnonzero(cur)
                    cur = cur[live]
            if live is None:
                cur = self._step(cur.take(trie.parent[j]), trie.byte[j])
                states[trie.offset[j]: trie.offset[j] + len(cur)] = cur
                continue
            starts, ends = trie.child_start[j - 1][live], trie.child_end[j - 1][live]
            sizes = ends - starts
            total = int(sizes.sum())
            if total == 0:
                break
            first = np.cumsum(sizes) - sizes
            children = np.repeat(starts - first, sizes) + np.arange(total)
            nxt = self._step(np.repeat(cur, sizes), trie.byte[j].take(children))
            keep = np.flatnonzero(nxt)
            live, cur = children[keep], nxt[keep]
            if not live.size:
                break
            states[trie.offset[j] + live] = cur
        return states

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
