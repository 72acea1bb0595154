"""The Matcher contract (one per request), and the matcher of a plain token automaton."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from .automaton import TokenAutomaton


@runtime_checkable
class Matcher(Protocol):
    """Tracks one output against a compiled constraint. Every matcher satisfies it:
    TokenMatcher here, and the JSON front end's (unique items, distinct keys, unions).
    Bitmask layout: int32 words, bit j of word i allows token 32*i+j."""

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) where it is not allowed."""

    def accept_tokens(self, token_ids) -> bool:
        """Accept several tokens, or none of them (False)."""

    def fill_next_token_bitmask(self, row) -> None:
        """Write the allowed tokens into `row` (ceil(vocab/32) int32 words)."""

    def next_token_mask(self) -> np.ndarray:
        """The current bitmask (read-only)."""

    def is_terminated(self) -> bool:
        """EOS was accepted."""

    def is_accepting(self) -> bool:
        """The output so far is a complete match (EOS would be accepted)."""

    def rollback(self, n: int) -> None:
        """Undo the last n accepted tokens."""

    def forced_bytes(self, limit: int = 4096) -> bytes:
        """The bytes every completion starts with (jump-forward)."""

    def forced_tokens(self, limit: int = 256) -> list[int]:
        """The tokens that are the only way forward, one after another."""

    def copy(self) -> Matcher:
        """An independent matcher at the same point."""


class TokenMatcher:
    """Tracks one output against a TokenAutomaton.

    >>> m = automaton.matcher()                        # doctest: +SKIP
    >>> m.fill_next_token_bitmask(bitmask[0])          # doctest: +SKIP
    >>> m.accept_token(next_id)                        # doctest: +SKIP
    True
    """

    __slots__ = ("automaton", "state", "_history", "_terminated")

    def __init__(self, automaton: TokenAutomaton):
        self.automaton = automaton
        self.state = automaton.start
        self._history: list[int] = []
        self._terminated = False

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token. Returns False (and changes nothing) if it is not allowed."""
        a = self.automaton
        if self._terminated:
            return False
        if token_id in a._eos_set:
            if not a.is_accepting(self.state):
                return False
            self._history.append(self.state)
            self._terminated = True
            return True
        nxt = a._next.get((self.state, token_id))  # the hot path: a transition met before
        if nxt is None:
            nxt = a.next_state(self.state, token_id)
        if nxt == 0:
            return False
        self._history.append(self.state)
        self.state = nxt
        return True

    def accept_tokens(self, token_ids) -> bool:
        """Accept several tokens; on the first refusal, undo them all and return False."""
        done = 0
        for t in token_ids:
            if not self.accept_token(int(t)):
                self.rollback(done)
                return False
            done += 1
        return True

    def fill_next_token_bitmask(self, row) -> None:
        """Write the allowed-token bitmask (int32, bit j of word i = token 32*i+j) into
        `row`: a 1-D numpy int32 array or CPU torch int32 tensor of ceil(vocab/32) words.
        After termination only EOS stays allowed."""
        out = row if type(row) is np.ndarray else np.asarray(row)
        if self._terminated:
            out[:] = 0
            for e in self.automaton.vocab.eos_ids:
                out[e >> 5] |= np.int32(np.uint32(1 << (e & 31)).view(np.int32))
            return
        a = self.automaton
        mask = a._masks.get(self.state)
        out[:] = mask if mask is not None else a.mask(self.state)

    def next_token_mask(self) -> np.ndarray:
        """The current bitmask (read-only, shared: copy before changing it)."""
        return self.automaton.mask(self.state)

    def is_terminated(self) -> bool:
        return self._terminated

    def is_accepting(self) -> bool:
        """The output so far is a complete match (EOS would be accepted)."""
        return not self._terminated and self.automaton.is_accepting(self.state)

    def rollback(self, n: int) -> None:
        """Undo the last n accepted tokens (EOS included)."""
        if n < 0 or n > len(self._history):
            raise ValueError(f"cannot roll back {n} tokens: {len(self._history)} accepted")
        if n == 0:
            return
        self.state = self._history[-n]
        del self._history[-n:]
        self._terminated = False

    def forced_bytes(self, limit: int = 4096) -> bytes:
        """The bytes that every completion starts with (empty where there is a choice
        or the output could end here)."""
        if self._terminated:
            return b""
        return self.automaton.forced_bytes(self.state, limit)

    def forced_tokens(self, limit: int = 256) -> list[int]:
        """Tokens that are the only way forward: each is the single allowed token (EOS
        not allowed) in the state the previous one leads to."""
        a, s, out = self.automaton, self.state, []
        if self._terminated:
            return out
        while len(out) < limit and not a.is_accepting(s) and a.allowed_count(s) == 1:
            t = int(a.allowed_tokens(s)[0])
            out.append(t)
            s = a.next_state(s, t)
        return out

    def copy(self) -> TokenMatcher:
        m = TokenMatcher(self.automaton)
        m.state, m._history, m._terminated = self.state, list(self._history), self._terminated
        return m
