"""A Matcher that also keeps the items of unique arrays distinct (fsm/json/unique.py
says where and why this is exact).

Masks: the automaton's mask, less the tokens that would close an item equal to an
earlier one of its array. Most tokens are ruled out without reading them (only tokens
with a quote can close a string item, only a number's end a number item: QuoteTokens,
NumberTokens); the few left that the mask allows are stepped through the tracker.
"""
from __future__ import annotations

import functools
import re
from bisect import bisect_left

import numpy as np

from ..core.matcher import TokenMatcher
from .unique import INTEGERS, LITERALS, MAX_VIABLE_STEPS, VALUE_MARK, _number_key

_NUMBER_BYTES = frozenset(b"0123456789.eE+-")  # (unique._NUMBER_STOP's complement)
_NUMBER_STARTS = frozenset(b"0123456789-")


class QuoteTokens:
    """The vocabulary's tokens by their quotes: `closing[b]`, the tokens without a
    backslash before their first quote whose bytes before it are b; `escaped`, those
    with one; `quotes[k]`, those with at least k quotes (k = 1..4); also `commas`, the
    tokens with a comma (between the items of an array whose listed values all came,
    they would begin another: UniquePlan.limits), and `closers` / `quoted_closers`,
    those with a `]` or `}` / with one after a quote (they may close a list or object
    item, from outside / inside a string: unique.LISTS, OBJECTS)."""

    def __init__(self, vocab):
        token_bytes = vocab.token_bytes
        closing: dict[bytes, list] = {}
        escaped, quotes = [], {1: [], 2: [], 3: [], 4: []}
        commas, closers, quoted_closers = [], [], []
        closer = re.compile(rb"[\]}]")
        for t, b in enumerate(token_bytes):
            if not b:
                continue
            if 0x2C in b:
                commas.append(t)
            if closer.search(b):
                closers.append(t)
            if 0x22 not in b:
                continue
            if closer.search(b, b.index(0x22)):
                quoted_closers.append(t)
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
        self.commas, self.closers, self.quoted_closers = (
            np.array(v, dtype=np.int64) for v in (commas, closers, quoted_closers))


class NumberTokens:
    """The vocabulary's tokens by the number items they may touch. A token's *head* is
    its leading run of number bytes (what it adds to a number item being read), its
    *tail* the rest:
    - `closing[h]`: tokens with head h and a tail where no number begins (inside a
      number item they close it as the item's bytes + h, and close nothing else);
    - `dotted[h]`: tokens all number bytes with a `.` (they may finish an integer's
      digits: "5" + "." can only end as 5);
    - `later`: tokens with a tail where a number begins (they may close a second item);
    - `runs`: tokens where a number begins (at the start or after another byte) and
      ends within them, or ends them as "0" or with a `.`; `quoted_runs`, those where
      one does after their first quote (from inside a string, only they reach a
      number item)."""

    def __init__(self, vocab):
        token_bytes = vocab.token_bytes
        closing: dict[bytes, list] = {}
        dotted: dict[bytes, list] = {}
        later, runs, quoted = [], [], []
        for t, b in enumerate(token_bytes):
            if not b:
                continue
            h = 0
            while h < len(b) and b[h] in _NUMBER_BYTES:
                h += 1
            head, tail = b[:h], b[h:]
            if not tail:
                if 0x2E in head:
                    dotted.setdefault(head, []).append(t)
            elif any(c in _NUMBER_STARTS for c in tail):
                later.append(t)
            else:
                closing.setdefault(head, []).append(t)
            if _run_in(b):
                runs.append(t)
            if 0x22 in b and _run_in(b[b.index(0x22) + 1:]):  # (after the quote that may close a string)
                quoted.append(t)
        self.closing = {h: np.array(v, dtype=np.int64) for h, v in closing.items()}
        self.dotted = {h: np.array(v, dtype=np.int64) for h, v in dotted.items()}
        self.later, self.runs, self.quoted_runs = (np.array(v, dtype=np.int64) for v in (later, runs, quoted))


class LiteralTokens:
    """The vocabulary's tokens where a literal item (true, false, null: unique.
    LITERALS) may begin: `heads`, those that begin with one (after whitespace and a
    comma, maybe: between items); `after`, those with one after a comma (they may end
    an item and begin one); `quoted_after`, those with one after a comma after their
    first quote (from inside a string, only they reach one)."""

    def __init__(self, vocab):
        token_bytes = vocab.token_bytes
        head = re.compile(rb"\A[ \t\n\r]*(?:,[ \t\n\r]*)?[tfn]")
        after = re.compile(rb",[ \t\n\r]*[tfn]")
        heads, afters, quoted = [], [], []
        for t, b in enumerate(token_bytes):
            if not b:
                continue
            if head.match(b):
                heads.append(t)
            if after.search(b):
                afters.append(t)
                if 0x22 in b and after.search(b, b.index(0x22)):
                    quoted.append(t)
        self.after, self.quoted_after = np.array(afters, dtype=np.int64), np.array(quoted, dtype=np.int64)
        self.heads = np.union1d(np.array(heads, dtype=np.int64), self.after)  # (between items: either)


def _index_of(vocab, kind):
    """kind(vocab) (QuoteTokens, NumberTokens, LiteralTokens, KeyTokens), made once per
    vocabulary."""
    out = vocab._cache.get(kind.__name__)
    if out is None:
        out = vocab._cache[kind.__name__] = kind(vocab)
    return out


def _run_in(b: bytes) -> bool:
    """Whether a number begins in `b` and may be finished there (NumberTokens.runs)."""
    i, n = 0, len(b)
    while i < n:
        if b[i] in _NUMBER_STARTS and (i == 0 or b[i - 1] not in _NUMBER_BYTES):
            j = i
            while j < n and b[j] in _NUMBER_BYTES:
                j += 1
            if j < n or 0x2E in b[i:j] or b[i:j] == b"0":
                return True
            i = j
        i += 1
    return False


def _among(ids: np.ndarray, words: np.ndarray) -> np.ndarray:
    """The tokens of `ids` whose bit is set in the mask `words` (uint32 words)."""
    return ids[(words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1 == 1]


def _drop(words: np.ndarray, t: int) -> None:
    words[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)


@functools.lru_cache(maxsize=512)
def _rests(items: tuple, done: bytes) -> tuple:
    """What is left of the (sorted) items that begin with `done` (remembered: a step asks
    it of the same items and prefix several times, for candidates, echoes, viability)."""
    lo = bisect_left(items, done)
    hi = bisect_left(items, done + b"\xff", lo)  # (UTF-8 has no 0xFF: past every item done begins)
    return tuple(x[len(done):] for x in items[lo:hi])


def ends_new(dfa, plan, state: int, track: tuple, capture: bool = False) -> bool:
    """Whether, from byte DFA state `state` and tracker state `track` (plan.feed's),
    the item under way can still end as a value no earlier item of its array has: a
    walk over the DFA's bytes along the earlier items' rests (MAX_VIABLE_STEPS bytes at
    most: beyond, it is taken as viable). In an object item a place met again is not
    walked again: the same DFA state with the same rests and the same bytes held back
    (plan.held) as far as a rest reaches (more zeros held than any rest is long: any
    digit after them leaves every rest), so `1.0000...` ends. (A string item's walk
    shortens its rests at every byte but an escape's.)

    `capture`: the item is the closed object read with its frames that `track` is in
    (plan.capture). The tracker refuses the bytes that repeat an item of a
    unique array inside it; where the walk leaves every rest, the item it is in below
    (plan.in_bounded) must still be able to end as a new value too (the walk of that
    level), or that way on is none."""
    todo, steps, met = [(state, track)], 0, set()
    while todo:
        q, tr = todo.pop()
        for b in dfa.live_bytes(q):
            nxt = plan.feed(tr, bytes((b,)))
            steps += 1
            if nxt is None:
                continue
            if capture:
                cap = plan.capture(nxt)
                inside, held = (None, b"") if cap is None else (cap[:2], cap[2])
            else:
                inside, held = plan.item_prefix(nxt), None
            rests = None if inside is None or inside[0] is None else _rests(*inside[::-1])
            if inside is None or rests == () or steps > MAX_VIABLE_STEPS:
                if capture and inside is not None and steps <= MAX_VIABLE_STEPS and plan.in_bounded(nxt) \
                        and not ends_new(dfa, plan, dfa.step(q, b), nxt):
                    continue  # (new here, but the item below can only repeat)
                return True  # (a new value, or one on its way)
            r = dfa.step(q, b)
            # (an object item's walk may loop: 1.000..., whitespace)
            if rests is not None and inside[0][:1] == VALUE_MARK:
                if held is None:
                    held = plan.held(nxt)
                key = (r, rests, held[:1 + max(map(len, rests))])
                if capture:  # (and the items below: the same text may hold others)
                    key += (nxt[0][-1], nxt[2])
                if key in met:
                    continue
                met.add(key)
            todo.append((r, nxt))
    return False


MAX_MEMO = 1 << 14  # entries of a memo keyed by the outputs' own items or keys: then it starts afresh


def _bounded_memo(automaton, name: str) -> dict:
    """automaton.matcher_memo[name], emptied once it holds MAX_MEMO entries: where its
    keys are the outputs' own (earlier items' rests, objects' keys), which a server's
    requests keep adding to an automaton that lives in the compile cache."""
    memo = automaton.matcher_memo.setdefault(name, {})
    if len(memo) >= MAX_MEMO:
        memo.clear()
    return memo


def tracked_prefix(plan, track, tokens: list, token_bytes) -> list:
    """The longest beginning of `tokens` that the tracker `plan` (unique.UniquePlan,
    keys.KeyPlan) reads from its state `track` without a refusal: forced tokens
    stop before one it would refuse."""
    for k, t in enumerate(tokens):
        track = plan.feed(track, token_bytes[t])
        if track is None:
            return tokens[:k]
    return tokens


def _path_tokens(trie, data: bytes) -> np.ndarray:
    """The tokens that are beginnings of `data` (those along its path in the trie)."""
    path = trie.path(data)
    return trie.tokens_at(np.array([trie.offset[j] + k for j, k in enumerate(path)], dtype=np.intp))


def _has(items: tuple, x: bytes) -> bool:
    at = bisect_left(items, x)
    return at < len(items) and items[at] == x


class UniqueMatcher(TokenMatcher):
    """Matcher over an automaton with a `unique` plan; the same contract."""

    __slots__ = ("plan", "track", "_tracks", "_quotes", "_numbers", "_literals")

    def __init__(self, automaton, plan):
        super().__init__(automaton)
        self.plan = plan
        for table in ("allowed", "heads"):  # (shared by this automaton's matchers)
            automaton.matcher_memo.setdefault(table, {})
        self.track = self.plan.start
        self._tracks: list = []
        self._quotes = _index_of(automaton.vocab, QuoteTokens)
        self._numbers = _index_of(automaton.vocab, NumberTokens) if self.plan.numbers else None
        self._literals = _index_of(automaton.vocab, LiteralTokens) if self.plan.literals else None

    def accept_token(self, token_id: int) -> bool:
        bounded = self.plan.in_bounded(self.track)
        if not super().accept_token(token_id):
            return False
        data = self.automaton.vocab.token_bytes[token_id] if not self._terminated else None
        nxt = self.plan.feed(self.track, data) if data else self.track
        if nxt is None or (bounded and not self._viable(self.state, nxt)) \
                or (self.plan.captures and not self._viable_capture(self.state, nxt)):  # (a repeat, or no way but one)
            TokenMatcher.rollback(self, 1)
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
        """The tokens with at least k quotes that the current state's mask allows."""
        return self._allowed_among(k, self._quotes.quotes[k], words)

    def _allowed_among(self, key, ids: np.ndarray, words: np.ndarray) -> list:
        """The tokens of `ids` that the current state's mask `words` allows (remembered
        per state and `key`: the mask is the state's)."""
        memo = self.automaton.matcher_memo["allowed"]
        out = memo.get((self.state, key))
        if out is None:
            out = memo[(self.state, key)] = _among(ids, words).tolist()
        return out

    def _drop_repeats(self, out: np.ndarray) -> None:
        words, inside = out.view(np.uint32), self.plan.item_prefix(self.track)
        bounded = self.plan.in_bounded(self.track)
        if inside is not None and (inside[0] or b"")[:1] == VALUE_MARK:  # (a closed object item)
            mode, buf = self.track[2] & 7, self.track[3]
            ids = self._object_candidates(words, inside, self.plan.held(self.track),
                                          mode == 6, mode == 5 and buf[-1] in _NUMBER_BYTES)
        elif bounded:  # (also the tokens that go on as an earlier item, or begin one: from
            # inside an item, those with two quotes or more)
            ids = self._candidates(words, inside)
            ids = set(ids).union(self._allowed(1 if inside is None else 2, words), self._echoes(words, inside))
            if self.plan.limits and self.plan.used_up(self.track):  # (and a comma: it would begin one more)
                ids.update(self._allowed_among("commas", self._quotes.commas, words))
        else:
            ids = self._candidates(words, inside)
        if self.plan.containers:
            ids = [*ids, *self._container_candidates(words)]
        if self._numbers is not None:
            more, repeats = self._number_candidates(words)
            ids = [*ids, *more]
            for t in repeats:
                _drop(words, t)
        if self._literals is not None:
            ids = [*ids, *self._literal_candidates(words)]
        captures = self.plan.captures
        if captures and (cap := self.plan.capture(self.track)) is not None:
            # (in a closed object item read with its frames: the tokens that may keep it an
            # earlier one's beginning too)
            done, seen, held, raw = cap
            in_string = self.track[2] & 7 in (1, 2, 3, 6, 7)
            ids = [*ids, *self._object_candidates(words, (done, seen), held, in_string,
                                                  not in_string and bool(raw) and raw[-1] in _NUMBER_BYTES)]
        if not ids:
            return
        a, feed, track = self.automaton, self.plan.feed, self.track
        data, s = a.vocab.token_bytes, self.state
        for t in ids:
            nxt = feed(track, data[t])
            if nxt is None:
                _drop(words, t)
            elif bounded or captures:
                q = a._next.get((s, t)) or a.next_state(s, t)
                if (bounded and not self._viable(q, nxt)) or (captures and not self._viable_capture(q, nxt)):
                    _drop(words, t)

    def _object_candidates(self, words: np.ndarray, inside: tuple, held: bytes, in_string: bool,
                           in_number: bool) -> list:
        """The tokens `words` allows after which a closed object item (`inside`:
        plan.item_prefix, or plan.capture's first two) may still be a beginning of an earlier
        one (a superset: the others leave every earlier item's normal text, so the item
        ends as a new value whatever comes). Where its normal text holds bytes back
        (`held`: a number's `1.50`), every token the mask allows; else, per earlier
        item's rest, those whose bytes follow it up to where the output's bytes may
        differ from the normal text (`_sync_tokens`; `in_string`, `in_number`: where the
        output is)."""
        done, seen = inside
        rests = _rests(seen, done)
        if not rests:
            return []
        if held:
            memo = self.automaton.matcher_memo["allowed"]
            if (self.state, "all") not in memo:
                memo[(self.state, "all")] = self.automaton.allowed_tokens(self.state).tolist()
            return memo[(self.state, "all")]
        where = (in_string, in_number)
        memo, out = _bounded_memo(self.automaton, "echoes"), []
        for rest in rests:
            got = memo.get((self.state, rest, where))
            if got is None:
                got = memo[(self.state, rest, where)] = _among(self._sync_tokens(rest, *where), words).tolist()
            out += got
        return out

    def _sync_tokens(self, rest: bytes, in_string: bool, in_number: bool) -> np.ndarray:
        """The tokens whose bytes begin `rest` (an earlier object item's normal text
        after the current one's), run past its end, or follow it up to a place where the
        output may write what the normal text does not show (whitespace outside
        strings; a number's trailing zeros or dot), then go on with such a byte.
        `in_string`: whether `rest` begins inside a string; `in_number`: right after a
        number's byte (the current item's last)."""
        trie = self.automaton.vocab.trie
        longest = len(trie.offset)
        parts = [_path_tokens(trie, rest)]
        if len(rest) <= longest:
            parts.append(trie.tokens_under(rest))
        esc = False
        for k in range(min(len(rest), longest) + 1):
            if not in_string:
                parts += [trie.tokens_under(rest[:k] + w) for w in (b" ", b"\t", b"\n", b"\r")]
                if (rest[k - 1] in _NUMBER_BYTES if k else in_number) and \
                        (k == len(rest) or rest[k] not in _NUMBER_BYTES):
                    parts += [trie.tokens_under(rest[:k] + b"0"), trie.tokens_under(rest[:k] + b".")]
            if k == len(rest):
                break
            c = rest[k]
            if in_string:
                if esc:
                    esc = False
                elif c == 0x5C:
                    esc = True
                elif c == 0x22:
                    in_string = False
            elif c == 0x22:
                in_string = True
        return np.unique(np.concatenate(parts)).astype(np.int64)

    def _container_candidates(self, words: np.ndarray) -> list:
        """The tokens `words` allows that may close a list or object item
        (unique.LISTS, OBJECTS) where one came before in the array: those with a `]`
        or `}` (after a quote, from inside a string)."""
        stack, dead, mode, _ = self.track
        if self.plan.capturing(self.track):  # (inside an object item read with its frames: any
            # closing bracket may end it)
            inside = mode & 7 in (1, 2, 3, 6, 7)
        elif dead or not stack or stack[-1][0] != "a" or not stack[-1][4] \
                or not any(k[:1] == VALUE_MARK for k in stack[-1][4]):
            return []
        else:
            inside = mode & 7 in (3, 6)
        return self._allowed_among("quoted_closers" if inside else "closers",
                                   self._quotes.quoted_closers if inside else self._quotes.closers, words)

    def _literal_candidates(self, words: np.ndarray) -> list:
        """The tokens `words` allows that may begin a literal item (true, false, null)
        of a unique array that keeps them (unique.LITERALS): from between its
        items, those that begin one or have one after a comma; from inside a string,
        those with one after a quote and a comma; from elsewhere below it, those with
        one after a comma (LiteralTokens)."""
        stack, dead, mode, _ = self.track
        frames = self.plan.frames
        if not any(e[0] == "a" and e[4] is not None and frames[e[1]][1] & LITERALS for e in stack):
            return []
        mode &= 7
        key = ("quoted_after" if mode in (1, 2, 3, 6, 7) else
               "heads" if mode == 0 and not dead and stack[-1][0] == "a" else "after")
        return self._allowed_among(("literal", key), getattr(self._literals, key), words)

    def _number_candidates(self, words: np.ndarray) -> tuple[list, list]:
        """(tokens `words` allows that may close a repeated number item, or leave an
        integer item that can only end as an earlier value: a superset, to step
        through the tracker; tokens that do, found by their heads). Inside a number
        item, a token with a head and a tail where no number begins closes it as its
        bytes so far + the head: one lookup per head the mask allows."""
        stack, dead, mode, buf = self.track
        nt = self._numbers
        if mode != 4:
            return (self._allowed_among("runs", nt.runs, words) if mode == 0 else
                    self._allowed_among("quoted_runs", nt.quoted_runs, words)), []
        _, f, _, _, nums = stack[-1]
        more = self._allowed_among("later", nt.later, words)
        if not nums:
            return more, []
        digits_open = self.plan.frames[f][1] & INTEGERS and 0x2E not in buf
        repeats = [t for head, (ids, closes) in self._heads(words).items()
                   if (closes or digits_open) and _number_key(buf + head) in nums for t in ids]
        return more, repeats

    def _heads(self, words: np.ndarray) -> dict:
        """{head: (the tokens NumberTokens.closing (closes True) or .dotted (False) has
        under it that `words` allows, closes)}, remembered per state."""
        memo = self.automaton.matcher_memo["heads"]
        out = memo.get(self.state)
        if out is None:
            out = memo[self.state] = {}
            for table, closes in ((self._numbers.closing, True), (self._numbers.dotted, False)):
                for head, ids in table.items():
                    hit = _among(ids, words)
                    if len(hit):
                        out[head] = (hit.tolist(), closes)
        return out

    def _echoes(self, words: np.ndarray, inside) -> list:
        """The tokens `words` allows that keep the current item (`inside`:
        plan.item_prefix) a beginning of an earlier one (their bytes begin what is
        left of it)."""
        if inside is None or inside[0] is None:
            return []
        done, seen = inside
        trie, out = self.automaton.vocab.trie, []
        memo = _bounded_memo(self.automaton, "echoes")  # (per state and rest: `words` is the state's mask)
        for rest in _rests(seen, done):
            got = memo.get((self.state, rest))
            if got is None:
                got = memo[(self.state, rest)] = _among(_path_tokens(trie, rest), words).tolist()
            out += got
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
            memo = _bounded_memo(self.automaton, "viable")
            key = (state, rests, self.plan.held(track)) if done[:1] == VALUE_MARK else (state, rests)
            if key not in memo:
                memo[key] = ends_new(self.automaton.dfa, self.plan, state, track)
            return memo[key]
        return ends_new(self.automaton.dfa, self.plan, state, track)

    def _viable_capture(self, state: int, track: tuple) -> bool:
        """Whether the closed object item read with its frames that the output is in
        (plan.capture) can still end as a value no earlier item has, its unique
        arrays inside kept (ends_new's `capture` walk); remembered per (state, track)."""
        cap = self.plan.capture(track)
        if cap is None or not _rests(cap[1], cap[0]):
            return True
        memo = _bounded_memo(self.automaton, "viable_capture")
        key = (state, track)
        if key not in memo:
            memo[key] = ends_new(self.automaton.dfa, self.plan, state, track, capture=True)
        return memo[key]

    def _holds(self, data: bytes) -> bool:
        return self.plan.feed(self.track, data) is not None

    def forced_bytes(self, limit: int = 4096) -> bytes:
        out = super().forced_bytes(limit)
        return out if not out or self._holds(out) else b""

    def forced_tokens(self, limit: int = 256) -> list[int]:
        return tracked_prefix(self.plan, self.track, super().forced_tokens(limit), self.automaton.vocab.token_bytes)

    def copy(self) -> UniqueMatcher:
        m = UniqueMatcher(self.automaton, self.plan)
        m.state, m._history, m._terminated = self.state, list(self._history), self._terminated
        m.track, m._tracks = self.track, list(self._tracks)
        return m
