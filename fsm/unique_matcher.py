"""A Matcher that also keeps the items of unique arrays of strings distinct
(fsm/json_unique.py says where and why this is exact).

Masks: the automaton's mask, less the tokens that would close an item equal to an
earlier one of its array. Only tokens with a `"` can close an item, and most are ruled
out without reading them (`QuoteTokens`): inside an item, a token closes it with the
bytes before its first quote, so those equal to the rest of an earlier item are looked
up; between items a token needs two quotes to make one, and outside unique arrays four
(two items). The few tokens left that the mask allows are stepped through the tracker.
"""
from __future__ import annotations

from bisect import bisect_left

import numpy as np

from .json_unique import BOUNDED, MAX_VIABLE_STEPS
from .matcher import Matcher


class QuoteTokens:
    """The vocabulary's tokens by their quotes: `closing[b]`, the tokens without a
    backslash before their first quote whose bytes before it are b; `escaped`, those
    with one; `quotes[k]`, those with at least k quotes (k = 1..4)."""

    def __init__(self, token_bytes):
        closing: dict[bytes, list] = {}
        escaped, quotes = [], {1: [], 2: [], 3: [], 4: []}
        for t, b in enumerate(token_bytes):
            if not b or 0x22 not in b:
                continue
            head = b[:b.index(0x22)]
            if 0x5C in head:
                escaped.append(t)
            else:
                closing.setdefault(head, []).append(t)
            for k in range(1, min(b.count(0x22), 4) + 1):
                quotes[k].append(t)
        self.closing = {h: tuple(v) for h, v in closing.items()}
        self.escaped = tuple(escaped)
        self.quotes = {k: np.array(v, dtype=np.int64) for k, v in quotes.items()}

    @staticmethod
    def of(vocab) -> "QuoteTokens":
        q = vocab._cache.get("quote_tokens")
        if q is None:
            q = vocab._cache["quote_tokens"] = QuoteTokens(vocab.token_bytes)
        return q


def _rests(items: tuple, done: bytes) -> tuple:
    """What is left of the (sorted) items that begin with `done`."""
    lo = bisect_left(items, done)
    hi = bisect_left(items, done + b"\xff", lo)  # (UTF-8 has no 0xFF: past every item done begins)
    return tuple(x[len(done):] for x in items[lo:hi])


def _has(items: tuple, x: bytes) -> bool:
    at = bisect_left(items, x)
    return at < len(items) and items[at] == x


class UniqueMatcher(Matcher):
    """Matcher over an automaton with a `unique` plan; the same contract."""

    __slots__ = ("plan", "track", "_tracks", "_quotes")

    def __init__(self, automaton):
        super().__init__(automaton)
        self.plan = automaton.unique
        self.track = self.plan.start
        self._tracks: list = []
        self._quotes = QuoteTokens.of(automaton.vocab)

    def accept_token(self, token_id: int) -> bool:
        bounded = self._bounded()
        if not super().accept_token(token_id):
            return False
        data = self.automaton.vocab.token_bytes[token_id] if not self._terminated else None
        nxt = self.plan.feed(self.track, data) if data else self.track
        if nxt is None or (bounded and not self._viable(self.state, nxt)):  # (a repeat, or no way but one)
            Matcher.rollback(self, 1)
            return False
        self._tracks.append(self.track)
        self.track = nxt
        return True

    def rollback(self, n: int) -> None:
        super().rollback(n)
        if n:
            self.track = self._tracks[-n]
            del self._tracks[-n:]

    def fill_next_token_bitmask(self, row) -> None:
        super().fill_next_token_bitmask(row)
        if not self._terminated:
            self._drop_repeats(row if type(row) is np.ndarray else np.asarray(row))

    def next_token_mask(self) -> np.ndarray:
        out = super().next_token_mask().copy()
        self._drop_repeats(out)
        return out

    def _candidates(self, words: np.ndarray, inside) -> list:
        """The tokens `words` allows that may close a repeated item from here (a
        superset); `inside`: plan.item_prefix of the tracker's state."""
        plan, q, track = self.plan, self._quotes, self.track
        if inside is None:
            return self._allowed(2 if plan.between_items(track) else 4, words)
        done, seen = inside
        if done is None:  # (an escape cut short: any quote may close it)
            return self._allowed(1, words)
        out = self._allowed(3, words)
        rests = _rests(seen, done)
        if not rests:  # (no earlier item goes on as this one)
            return out
        if len(rests) > len(q.closing):  # (many do: try each token's head instead)
            rests = [h for h in q.closing if _has(seen, done + h)]
        extra = [t for r in rests for t in q.closing.get(r, ())] + list(q.escaped)
        return out + [t for t in extra if words[t >> 5] >> (t & 31) & 1]

    def _allowed(self, k: int, words: np.ndarray) -> list:
        """The tokens with at least k quotes that the current state's mask allows
        (remembered per state: the mask is the state's)."""
        memo = self.automaton.__dict__.setdefault("_quoted_allowed", {})
        key = (self.state, k)
        out = memo.get(key)
        if out is None:
            ids = self._quotes.quotes[k]
            out = memo[key] = ids[(words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1 == 1].tolist()
        return out

    def _drop_repeats(self, out: np.ndarray) -> None:
        words, inside = out.view(np.uint32), self.plan.item_prefix(self.track)
        ids = self._candidates(words, inside)
        bounded = self._bounded()
        if bounded:  # (also the tokens that go on as an earlier item, or begin one: from
            # inside an item, those with two quotes or more)
            ids = set(ids).union(self._allowed(1 if inside is None else 2, words), self._echoes(words, inside))
        if not ids:
            return
        a, feed, track = self.automaton, self.plan.feed, self.track
        data, s = a.vocab.token_bytes, self.state
        for t in ids:
            nxt = feed(track, data[t])
            if nxt is None or (bounded and not self._viable(a._next.get((s, t)) or a.next_state(s, t), nxt)):
                words[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)

    def _bounded(self) -> bool:
        """Whether the output is in a unique array of bounded strings (json_unique.BOUNDED)."""
        stack, dead = self.track[0], self.track[1]
        return (not dead and bool(stack) and stack[-1][0] == "a" and stack[-1][3] is not None
                and self.plan.frames[stack[-1][1]][1] == BOUNDED)

    def _echoes(self, words: np.ndarray, inside) -> list:
        """The tokens `words` allows that keep the current item (`inside`:
        plan.item_prefix) a beginning of an earlier one (their bytes begin what is
        left of it)."""
        if inside is None or inside[0] is None:
            return []
        done, seen = inside
        trie, out = self.automaton.vocab.trie, []
        for rest in _rests(seen, done):
            path = trie.path(rest)
            if path:
                ids = trie.tokens_at(np.array([trie.offset[j] + k for j, k in enumerate(path)]))
                out += [t for t in ids.tolist() if words[t >> 5] >> (t & 31) & 1]
        return out

    def _viable(self, state: int, track: tuple) -> bool:
        """Whether the item the output is in (automaton state `state`, tracker state
        `track`) can still end as a value no earlier item has: a walk over the bytes
        from there, along the earlier items' rests only (MAX_VIABLE_STEPS bytes at most:
        beyond, it is taken as viable); remembered per (state, rests)."""
        inside = self.plan.item_prefix(track)
        if inside is None:
            return True
        done, seen = inside
        if done is not None:
            rests = _rests(seen, done)
            if not rests:
                return True
            memo = self.automaton.__dict__.setdefault("_viable", {})
            key = (state, rests)
            if key not in memo:
                memo[key] = self._ends_new(state, track)
            return memo[key]
        return self._ends_new(state, track)

    def _ends_new(self, state: int, track: tuple) -> bool:
        dfa, feed, item_prefix = self.automaton.dfa, self.plan.feed, self.plan.item_prefix
        todo, steps = [(state, track)], 0
        while todo:
            q, tr = todo.pop()
            for b in dfa.live_bytes(q):
                nxt = feed(tr, bytes((b,)))
                steps += 1
                if nxt is None:
                    continue
                inside = item_prefix(nxt)
                if inside is None or (inside[0] is not None and not _rests(*inside[::-1])) or steps > MAX_VIABLE_STEPS:
                    return True  # (a new value, or one on its way)
                todo.append((dfa.step(q, b), nxt))
        return False

    def _holds(self, data: bytes) -> bool:
        return self.plan.feed(self.track, data) is not None

    def forced_bytes(self, limit: int = 4096) -> bytes:
        out = super().forced_bytes(limit)
        return out if not out or self._holds(out) else b""

    def forced_tokens(self, limit: int = 256) -> list[int]:
        out, track, data = super().forced_tokens(limit), self.track, self.automaton.vocab.token_bytes
        for k, t in enumerate(out):
            track = self.plan.feed(track, data[t])
            if track is None:
                return out[:k]
        return out

    def copy(self) -> "UniqueMatcher":
        m = UniqueMatcher(self.automaton)
        m.state, m._history, m._terminated = self.state, list(self._history), self._terminated
        m.track, m._tracks = self.track, list(self._tracks)
        return m
