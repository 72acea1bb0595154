"""An object's keys kept distinct, checked while decoding.

Declared keys have a slot each in the automaton, but the keys an object takes beyond
them (additionalProperties, patternProperties, free values' objects) are a repeated
part, which a regular language cannot keep apart. A tracker beside the automaton keeps
each open object's keys so far (as values), and KeyMatcher refuses the token that would
close a key equal to an earlier one of its object; where those keys are bounded, also
the tokens after which a key can only end as an earlier one (KeyPlan.walks). Nothing is
added where no object takes undeclared keys. Why: docs/json-schema.md, "Distinct keys".

>>> plan = KeyPlan(walks=False)
>>> plan.accepts(b'{"a":{"a":1},"b":[{"a":2}]}'), plan.accepts(b'{"a":1,"\\\\u0061":2}')
(True, False)
"""
from __future__ import annotations

import re
from bisect import bisect_left

import numpy as np

from ..core.dfa import fold
from ..core.matcher import TokenMatcher
from ..core.terms import ALT, AND, BYTES, CONCAT, EMPTY, NOTHING, REPEAT, STR, Term
from ..core.vocabulary import ascending_set
from .unique import MAX_VIABLE_STEPS, decoded_prefix, string_value
from .unique_matcher import _among, _bounded_memo, _drop, _index_of, _path_tokens, _rests, tracked_prefix

_STRUCTURE_BYTES = b'"{}[],'
_STRUCTURE = re.compile(b"[" + re.escape(_STRUCTURE_BYTES) + b"]")
_STRING_STOP = re.compile(rb'["\\]')
OUTSIDE, IN_VALUE_STRING, IN_KEY = 0, 1, 2  # (KeyPlan's modes, plus the flags:)
ESCAPED, KEY_NEXT = 4, 8


class KeyPlan:
    """The tracker: `feed(state, data)` reads output bytes (valid JSON so far: the
    automaton checked them). Its state is (stack, mode, buf): stack, the containers
    open, None for an array and its keys so far for an object (sorted, as UTF-8 bytes
    of their characters); mode, where the output is: outside strings, in a value
    string or in a key, plus ESCAPED after a backslash, KEY_NEXT outside strings where
    a key of the innermost object comes next (after `{` or `,`); buf, the key's raw
    bytes so far. `walks`: some object's undeclared keys are bounded (the module
    notes): the matcher checks that a key begun can end as a new one."""

    start = ((), OUTSIDE, b"")

    def __init__(self, walks: bool):
        self.walks = walks

    def feed(self, state: tuple, data: bytes):
        """The state after `data`, or None if they close a key equal to an earlier one
        of its object."""
        stack, mode, buf = state
        esc, mode = mode & ESCAPED, mode & ~ESCAPED
        owned = False  # (stack a list of this call's, once it changes)
        i, n = 0, len(data)
        while i < n:
            if mode & 3:
                if esc:
                    if mode == IN_KEY:
                        buf += data[i:i + 1]
                    esc, i = 0, i + 1
                    continue
                m = _STRING_STOP.search(data, i)
                if m is None:
                    if mode == IN_KEY:
                        buf += data[i:]
                    break
                j = m.start()
                if data[j] == 0x5C:  # (a backslash: the next byte is escaped)
                    if mode == IN_KEY:
                        buf += data[i:j + 1]
                    esc, i = ESCAPED, j + 1
                    continue
                if mode == IN_KEY:
                    buf += data[i:j]
                    keys = stack[-1]
                    key = string_value(buf)
                    at = bisect_left(keys, key)
                    if at < len(keys) and keys[at] == key:
                        return None
                    if not owned:
                        stack, owned = list(stack), True
                    stack[-1] = (*keys[:at], key, *keys[at:])
                mode, buf, i = OUTSIDE, b"", j + 1
                continue
            m = _STRUCTURE.search(data, i)
            if m is None:
                break
            c, i = data[m.start()], m.start() + 1
            if c == 0x22:  # "
                mode = IN_KEY if mode == KEY_NEXT else IN_VALUE_STRING
            elif c == 0x2C:  # ,
                mode = OUTSIDE if stack[-1] is None else KEY_NEXT
            else:
                if not owned:
                    stack, owned = list(stack), True
                if c == 0x7B:  # {
                    stack.append(())
                    mode = KEY_NEXT
                elif c == 0x5B:  # [
                    stack.append(None)
                    mode = OUTSIDE
                else:  # } ]
                    stack.pop()
                    mode = OUTSIDE
        return (tuple(stack) if owned else stack), mode | esc, buf

    def accepts(self, text) -> bool:
        """Whether a whole text (valid for the automaton) repeats no key of an object."""
        data = text.encode("utf-8") if isinstance(text, str) else text
        return self.feed(self.start, data) is not None

    @staticmethod
    def pending(state: tuple):
        """What a new key must stay clear of where `state` is in a key or before one
        (after `{` or `,`): (the key's characters so far, None while an escape is
        unfinished; the earlier keys of its object that begin so, or all of them before
        the key); None where no key is under way or none can repeat."""
        stack, mode, buf = state
        keys = stack[-1] if stack else None
        if not keys:
            return None
        if mode & 3 == IN_KEY:
            done = None if mode & ESCAPED else decoded_prefix(buf)
            if done is None:
                return None, keys
            rests = _rests(keys, done)
            return (done, rests) if rests else None
        return (b"", keys) if mode == KEY_NEXT else None


class KeyTokens:
    """The vocabulary's tokens by the strings they hold (keys as KeyPlan keeps them):
    `whole[0][s]` / `whole[1][s]`, the tokens holding the string s whole when they
    begin outside / inside a string; `heads[h]`, the tokens whose bytes before their
    first quote (the end of a string they begin inside) are the characters h; `odd`,
    those with a quote that a broken escape keeps from being read so (checked always);
    `quoted`, those with a quote; `commas`, those with a comma, `quote_commas`, those
    with a comma after a quote (they may begin a key from outside strings / from a
    string); `plain[t]`, 1 where token t has no quote, bracket, comma or backslash (it
    changes nothing outside keys)."""

    def __init__(self, vocab):
        token_bytes = vocab.token_bytes
        whole: tuple[dict, dict] = ({}, {})
        heads: dict = {}
        odd, quoted, commas, quote_commas = [], [], [], []
        self.plain = bytearray(b"\x01") * len(token_bytes)
        for t in _with_structure(vocab.columns).tolist():  # (the others are plain)
            b = token_bytes[t]
            self.plain[t] = 0
            if 0x2C in b:
                commas.append(t)
                if 0x22 in b[:b.rindex(0x2C)]:
                    quote_commas.append(t)
            if 0x22 not in b:
                continue
            quoted.append(t)
            try:
                head, strings = _strings(b, True)
                if head is not None:
                    heads.setdefault(head, []).append(t)
                for s in set(strings):
                    whole[1].setdefault(s, []).append(t)
                for s in set(_strings(b, False)[1]):
                    whole[0].setdefault(s, []).append(t)
            except ValueError:
                odd.append(t)
        self.whole = tuple({s: tuple(v) for s, v in w.items()} for w in whole)
        self.heads = {h: tuple(v) for h, v in heads.items()}
        self.odd = tuple(odd)
        self.quoted, self.commas, self.quote_commas = (
            np.array(v, dtype=np.int64) for v in (quoted, commas, quote_commas))


def _with_structure(columns) -> np.ndarray:
    """The ids (ascending) of the tokens with a quote, bracket, brace, comma or backslash,
    from the vocabulary's lists of the tokens that hold each byte."""
    start = columns.with_start
    positions = ascending_set([columns.with_byte[start[b]:start[b + 1]] for b in _STRUCTURE_BYTES + b"\\"])
    return np.sort(columns.order.take(positions))


def _strings(b: bytes, inside: bool) -> tuple:
    """(the characters before the first quote, where `b` begins inside a string, else
    None; the strings `b` holds whole), as UTF-8 bytes; ValueError for an escape that
    does not read."""
    def end(i):  # (the closing quote of a string whose bytes begin at i, or -1)
        while i < len(b):
            if b[i] == 0x5C:
                i += 2
            elif b[i] == 0x22:
                return i
            else:
                i += 1
        return -1

    head, out, i = None, [], 0
    if inside:
        j = end(0)
        if j < 0:  # (only escaped quotes: the string goes on)
            return None, out
        head, i = string_value(b[:j]), j + 1
    while (q := b.find(b'"', i)) >= 0 and (j := end(q + 1)) >= 0:
        out.append(string_value(b[q + 1:j]))
        i = j + 1
    return head, out


class KeyMatcher:
    """The Matcher contract over another matcher (of an automaton with a `keys` plan):
    its masks less the tokens that would repeat a key of an object."""

    __slots__ = ("inner", "automaton", "plan", "track", "_tracks", "_tokens", "_stack", "_held")

    def __init__(self, inner, plan: KeyPlan):
        self.inner, self.automaton, self.plan = inner, inner.automaton, plan
        self.track, self._tracks = plan.start, []
        self._tokens = _index_of(inner.automaton.vocab, KeyTokens)
        self._stack, self._held = (), None  # (a tracker stack, _held_tokens of it)

    @property
    def state(self) -> int:
        """The automaton's state (the inner matcher's)."""
        return self.inner.state

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token. Returns False (and changes nothing) if it is not allowed."""
        inner, track = self.inner, self.track
        if not inner.accept_token(token_id):
            return False
        plain = self._tokens.plain
        if (token_id >= len(plain) or plain[token_id]) and not track[1] & ESCAPED:  # (the usual step; EOS)
            self._tracks.append(track)
            if track[1] == IN_KEY:  # (a key's bytes, no quote among them)
                self.track = nxt = (track[0], IN_KEY, track[2] + self.automaton.vocab.token_bytes[token_id])
                if self.plan.walks and not self._viable(inner.state, nxt):
                    self.rollback(1)
                    return False
            return True
        data = b"" if inner.is_terminated() else self.automaton.vocab.token_bytes[token_id]
        nxt = self.plan.feed(track, data) if data else track
        if nxt is None or (self.plan.walks and not self._viable(inner.state, nxt)):
            inner.rollback(1)
            return False
        self._tracks.append(self.track)
        self.track = nxt
        return True

    def accept_tokens(self, token_ids) -> bool:
        return TokenMatcher.accept_tokens(self, token_ids)

    def rollback(self, n: int) -> None:
        self.inner.rollback(n)
        if n:
            self.track = self._tracks[-n]
            del self._tracks[-n:]

    def fill_next_token_bitmask(self, row) -> None:
        self.inner.fill_next_token_bitmask(row)
        if not self.inner.is_terminated():
            self._drop_repeats(row if type(row) is np.ndarray else np.asarray(row))

    def next_token_mask(self) -> np.ndarray:
        out = self.inner.next_token_mask().copy()
        if not self.inner.is_terminated():
            self._drop_repeats(out)
        return out

    def is_terminated(self) -> bool:
        return self.inner.is_terminated()

    def is_accepting(self) -> bool:
        return self.inner.is_accepting()

    def forced_bytes(self, limit: int = 4096) -> bytes:
        out = self.inner.forced_bytes(limit)
        return out if not out or self.plan.feed(self.track, out) is not None else b""

    def forced_tokens(self, limit: int = 256) -> list[int]:
        return tracked_prefix(self.plan, self.track, self.inner.forced_tokens(limit), self.automaton.vocab.token_bytes)

    def copy(self) -> KeyMatcher:
        m = KeyMatcher(self.inner.copy(), self.plan)
        m.track, m._tracks = self.track, list(self._tracks)
        return m

    # -- masks -----------------------------------------------------------------------
    def _drop_repeats(self, out: np.ndarray) -> None:
        ids = self._candidates(out)
        if self.plan.walks:
            ids = set(ids).union(self._walk_candidates(out))
        if not ids:
            return
        words = out.view(np.uint32)
        a, feed, track, s = self.automaton, self.plan.feed, self.track, self.inner.state
        data = a.vocab.token_bytes
        for t in ids:
            if not words[t >> 5] >> (t & 31) & 1:  # (dropped by the inner matcher)
                continue
            nxt = feed(track, data[t])
            if nxt is None:
                _drop(words, t)
            elif self.plan.walks and not self._viable(a._next.get((s, t)) or a.next_state(s, t), nxt):
                _drop(words, t)

    def _candidates(self, words: np.ndarray) -> list:
        """The tokens `words` allows that may close a key equal to an earlier one of its
        object (a superset, stepped through the tracker): those that hold an earlier
        key of an open object whole, or, in a key, end it as an earlier key of its
        object."""
        stack, mode, buf = self.track
        if stack is not self._stack and stack != self._stack:
            self._stack, self._held = stack, self._held_tokens(stack)
        held = self._held
        if held is None:
            return []
        if mode == IN_KEY:
            done = decoded_prefix(buf)
            if done is None:  # (an escape cut short: rare)
                return self._allowed("quoted", self._tokens.quoted)
            ids = held[1]
            closing = held[2].get(done)
            if closing:
                ids = ids + closing
        elif mode & ESCAPED:
            return self._allowed("quoted", self._tokens.quoted)
        else:
            ids = held[mode & 3 != OUTSIDE]
        return [t for t in ids if words[t >> 5] >> (t & 31) & 1] if ids else []

    def _held_tokens(self, stack: tuple) -> tuple:
        """(the tokens that hold a key of an object in `stack` whole when they begin
        outside a string, the same when they begin inside one, the odd ones in both;
        {a key's beginning: the tokens that end it as an earlier key of the innermost
        object}); None where no object holds a key. Remembered per object's keys."""
        if not any(stack):
            return None
        kt, memo = self._tokens, _bounded_memo(self.automaton, "keys_held")
        parts = []
        for keys in stack:
            if keys:
                got = memo.get(keys)
                if got is None:
                    closing: dict = {}
                    for k in keys:
                        for h, ids in kt.heads.items():
                            if k.endswith(h):
                                closing.setdefault(k[:len(k) - len(h)], []).extend(ids)
                    got = memo[keys] = (*(tuple(t for k in keys for t in table.get(k, ())) for table in kt.whole),
                                        {d: tuple(v) for d, v in closing.items()})
                parts.append(got)
        return (*(tuple(t for p in parts for t in p[side]) + kt.odd for side in (0, 1)),
                parts[-1][2] if stack[-1] else {})

    def _walk_candidates(self, words: np.ndarray) -> list:
        """Where some keys are bounded: the tokens `words` allows after which a key of an
        object that holds keys is under way or comes next (those a new key must be
        checked for): before a key, those with a quote; elsewhere, those that may write
        a comma outside strings (those with a comma, from a string one after a quote);
        in a key, also those that keep it a beginning of an earlier key of its object.
        (Whitespace before a key leaves the keys that may come as they were; a key
        closed as a new one is no check's.)"""
        stack, mode, buf = self.track
        if not any(stack):
            return []
        kt = self._tokens
        if mode == KEY_NEXT:
            return self._allowed("quoted", kt.quoted)
        if mode == OUTSIDE:
            return self._allowed("commas", kt.commas)
        out = self._allowed("quote_commas", kt.quote_commas)
        p = self.plan.pending(self.track)
        if p is not None and mode & 3 == IN_KEY and p[0] is not None:
            trie = self.automaton.vocab.trie
            out = out + [t for r in p[1] for t in _among(_path_tokens(trie, r), words).tolist()]
        return out

    def _allowed(self, name: str, ids: np.ndarray) -> list:
        """The tokens of `ids` that the automaton's mask of the current state allows
        (remembered per state; not the row being filled, which the inner matcher may
        have narrowed by its own tracker's state: a superset, stepped through ours)."""
        memo = self.automaton.matcher_memo.setdefault("keys_" + name, {})
        s = self.inner.state
        out = memo.get(s)
        if out is None:
            out = memo[s] = _among(ids, self.automaton.mask(s)).tolist()
        return out

    def _viable(self, state: int, track: tuple) -> bool:
        """Whether, from automaton state `state` and tracker state `track`, the key under
        way (or about to begin) can still end as a new key of its object: a walk over
        the automaton's bytes (MAX_VIABLE_STEPS at most: beyond, taken as viable),
        remembered per (state, what it must stay clear of)."""
        p = self.plan.pending(track)
        if p is None:
            return True
        memo = _bounded_memo(self.automaton, "keys_viable")
        key = (state, track[1] & 3, *p) if p[0] is not None else None
        got = memo.get(key) if key else None
        if got is None:
            got = _ends_new(self.automaton.dfa, self.plan, state, track)
            if key:
                memo[key] = got
        return got


def _ends_new(dfa, plan: KeyPlan, state: int, track: tuple) -> bool:
    """Whether some bytes from (automaton DFA state, tracker state) end the key under
    way, or begin and end one, as a new key of its object (KeyMatcher._viable)."""
    todo, met, steps = [(state, track)], set(), 0
    while todo:
        q, tr = todo.pop()
        for b in dfa.live_bytes(q):
            nxt = plan.feed(tr, bytes((b,)))
            steps += 1
            if nxt is None:
                continue  # (a repeat)
            if plan.pending(nxt) is None or steps > MAX_VIABLE_STEPS:
                return True  # (a new key, or one on its way)
            r = dfa.step(q, b)
            if (r, nxt) not in met:
                met.add((r, nxt))
                todo.append((r, nxt))
    return False


def longest_text(t: Term, memo: dict | None = None) -> int | None:
    """A bound on the bytes of a text of term `t`, read from its structure, or None
    where none is known (a star, a complement, a lazy program). An object's keys under
    `^.{1,256}$` (vercel's headers) are that many characters: finitely many, known
    without walking the thousands of DFA states that key_language would."""
    return fold(t, {} if memo is None else memo, _longest_of)


def _longest_of(x: Term, kids: list) -> int | None:
    k = x.kind
    if k in (NOTHING, EMPTY):
        return 0
    if k == BYTES:
        return 1
    if k == STR:
        return len(x.args[0])
    if k in (CONCAT, ALT):
        return None if None in kids else (sum(kids) if k == CONCAT else max(kids, default=0))
    if k == REPEAT:
        return None if kids[0] is None or x.args[2] is None else kids[0] * x.args[2]
    if k == AND:  # (the tightest of its parts' known bounds)
        return min((n for n in kids if n is not None), default=None)
    return None


def key_language(dfa) -> tuple[bool, bool]:
    """(whether every beginning of a key that `dfa` accepts (a quoted key's) ends in
    endlessly many ways, whether its keys are finitely many): a state ends endlessly
    many ways where it reaches a cycle. Every state of a LazyDFA is live; one past
    its max_states raises TooLargeError."""
    succ, todo = {dfa.start: None}, [dfa.start]
    while todo:
        q = todo.pop()
        succ[q] = nxt = {dfa.step(q, b) for b in dfa.live_bytes(q)}
        for r in nxt:
            if r not in succ:
                succ[r] = None
                todo.append(r)
    preds: dict = {q: [] for q in succ}
    left = {q: len(nxt) for q, nxt in succ.items()}
    for q, nxt in succ.items():
        for r in nxt:
            preds[r].append(q)
    finite = [q for q, k in left.items() if k == 0]  # (pruned from the ends: what is left reaches a cycle)
    for q in finite:
        for p in preds[q]:
            left[p] -= 1
            if left[p] == 0:
                finite.append(p)
    finite = set(finite)
    return all(q not in finite or dfa.accepting[q] for q in succ), dfa.start in finite
