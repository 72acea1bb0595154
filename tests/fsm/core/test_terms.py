"""Terms and their lazy DFA (fsm/core/terms.py, dfa.py): export/load, lazy terms loaded only
where a walk can start them, derivatives by one byte, and TermSource's emptiness rules
(length bounds, guessed members) against breadth-first search; random regexes as input."""
from __future__ import annotations

import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import dfa_fullmatch, patterns, strings_near

from structgen.fsm.core.dfa import DEAD, LazyDFA, TermSource
from structgen.fsm.core.terms import AND, TermBuilder
from structgen.fsm.regex.syntax import regex_to_term


def _repeats(rx, text: str, lo: int, hi: int) -> bool:
    """text is lo..hi consecutive full matches of rx."""
    if not text:  # the rest of the repeats may match the empty string
        return lo <= 0 or (hi > 0 and rx.fullmatch("") is not None)
    return hi > 0 and any(rx.fullmatch(text[:i]) and _repeats(rx, text[i:], lo - 1, hi - 1)
                          for i in range(1, len(text) + 1))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), patterns(), st.integers(0, 2**32 - 1))
def test_export_load_keeps_the_language(p1, p2, seed):
    """TermBuilder.export / load / lazy (how JSON formats are built once per process)
    rebuild the same language in a fresh builder, intersections and complements included."""
    tb = TermBuilder()
    a, b = regex_to_term(tb, p1), regex_to_term(tb, p2)
    t = tb.alt([tb.intersect([a, tb.complement(b)]), tb.concat(b, tb.repeat(a, 1, 3))])
    fresh = TermBuilder()
    fresh.literal(b"shift the ids")
    prog = tb.export(t)
    loaded = LazyDFA(TermSource(fresh), fresh.load(prog))
    other = TermBuilder()  # loaded only when a derivative is asked for
    deferred = other.lazy(f"test:{p1!r}:{p2!r}", prog)
    assert (deferred.nullable, deferred.boolean) == (t.nullable, t.boolean)
    deferred = LazyDFA(TermSource(other), other.concat(deferred, other.literal(b"!")))
    # a later builder takes the lazy term's row as the first one saved it (_LAZY_ROWS):
    # the same targets as its own derivative of the loaded term
    third = TermBuilder()
    third.literal(b"shift the ids again")
    other.row(other.lazy(f"test:{p1!r}:{p2!r}", prog))
    late = third.lazy(f"test:{p1!r}:{p2!r}", prog)
    from structgen.fsm.core.terms import _LAZY_ROWS
    assert _LAZY_ROWS[f"test:{p1!r}:{p2!r}"] is not None  # saved: the next row is loaded
    saved = third.row(late)
    assert saved == third.row(third.body(late)), (p1, p2)
    late = LazyDFA(TermSource(third), late)
    rx1, rx2 = re.compile(p1), re.compile(p2)
    for text in strings_near(p1, np.random.default_rng(seed)):
        want = bool(rx1.fullmatch(text)) and not rx2.fullmatch(text) or any(
            rx2.fullmatch(text[:i]) and _repeats(rx1, text[i:], 1, 3) for i in range(len(text) + 1))
        assert dfa_fullmatch(loaded, text) == want, (p1, p2, text)
        assert dfa_fullmatch(deferred, text + "!") == want, (p1, p2, text)
        assert dfa_fullmatch(late, text) == want, (p1, p2, text)


def test_a_walk_does_not_load_a_lazy_term_at_bytes_it_cannot_start_with():
    """A lazy term's first bytes are read off its program (TermBuilder.first), and
    LazyDFA.fill leaves a state's row unbuilt where a walk meets it only at bytes that no
    member starts with: the lazy term there stays unloaded (an email's address literal
    after `@`, which the tokens `["`, `[[`... meet)."""
    tb = TermBuilder()
    prog = tb.export(regex_to_term(tb, r"(?:[0-9]+|IPv6:[0-9a-f:]+)\]"))
    other, third = TermBuilder(), TermBuilder()
    lazy = other.lazy("test:first-bytes", prog)
    assert other.first(lazy) == third.first(third.load(prog)) == sum(1 << c for c in b"0123456789I")
    assert other.derive(lazy, ord("[")) is other.nothing
    dfa = LazyDFA(TermSource(other), other.seq([other.literal(b"["), lazy, other.literal(b'"')]))
    s = dfa.step(dfa.start, ord("["))
    dfa.fill(s, (ord('"'), ord("[")))
    assert dfa.table[s, ord('"')] == dfa.table[s, ord("[")] == DEAD and not dfa.expanded[s]
    assert "test:first-bytes" not in other._loaded
    dfa.fill(s, (ord("1"),))  # a byte it starts with: the row, and the term, are built
    assert dfa.expanded[s] and dfa.table[s, ord("1")] > DEAD
    for text, want in [('[12]"', True), ('[IPv6:ff::1]"', True), ('["', False), ('[1"', False), ("[]", False)]:
        assert dfa_fullmatch(dfa, text) == want, text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), patterns(), st.integers(0, 2**32 - 1))
def test_derive_by_one_byte_equals_the_row(p1, p2, seed):
    """TermBuilder.derive (a walk's single step) gives the row's target at that byte,
    before and after the row is known, intersections and complements included; the
    bytes TermBuilder.first gives (derive skips alternatives by them) hold the row's."""
    rng = np.random.default_rng(seed)
    tb = TermBuilder()
    a, b = regex_to_term(tb, p1), regex_to_term(tb, p2)
    todo = [tb.alt([tb.intersect([a, tb.complement(b)]), tb.concat(b, tb.repeat(a, 1, 3))])]
    for _ in range(12):
        t = todo.pop(int(rng.integers(len(todo))))
        byte = int(rng.choice(list(b"a0.\n\xc3\xa9") + [int(rng.integers(256))]))
        before = tb.derive(t, byte)  # t.row may not be built yet
        want = next((x for s, e, x in tb.row(t) if s <= byte < e), tb.nothing)
        assert before is want and tb.derive(t, byte) is want, (p1, p2, byte)
        first = tb.first(t)
        assert all(first >> c & 1 for s, e, _ in tb.row(t) for c in range(s, e)), (p1, p2)
        todo += [x for _, _, x in tb.row(t)] or [t]


def _shortest_member(tb, t, limit=20):
    """The length of t's shortest member, by a breadth-first walk of its derivatives
    (no emptiness rule prunes them: an oracle for TermSource's); None if none within
    `limit` bytes."""
    level, seen = [t], {t.id}
    for n in range(limit + 1):
        if any(x.nullable for x in level):
            return n
        level = [y for x in level for _, _, y in tb.row(x) if y.id not in seen and not seen.add(y.id)]
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), patterns(), st.integers(1, 5), st.integers(0, 6), st.integers(0, 2))
def test_length_bound_rules_equal_search(p1, p2, h1, h2, lo):
    """TermSource's rules for length bounds `A AND .{0,hi}` against breadth-first search,
    at the bound and at states reached from it: emptiness without a search
    (bound_is_empty), for A plain and for A holding a bound itself (a hostname's
    labels), and the radius through a bound (every live state's shortest completion is
    at most the radius). A branch whose bound is empty hides a longer shortest member
    behind its length: the radius must see it."""
    tb = TermBuilder()
    src = TermSource(tb)
    a, b = regex_to_term(tb, p1), regex_to_term(tb, p2)
    nested = tb.concat(tb.intersect([a, tb.repeat(tb.any_byte, 0, h1)]), b)
    hidden = tb.alt([tb.intersect([tb.literal(b"xxxxx"), tb.repeat(tb.any_byte, 0, 2)]), tb.literal(b"abcdefg")])
    for t in (tb.intersect([a, tb.repeat(tb.any_byte, lo, h2)]),
              tb.intersect([nested, tb.repeat(tb.any_byte, lo, h1 + h2)]),
              tb.intersect([hidden, tb.repeat(tb.any_byte, lo, 4 + h2)])):
        radius, states, seen = src.radius(t), [t], {t.id}
        for x in states:
            if len(states) < 40:
                states += [y for _, _, y in tb.row(x) if y.id not in seen and not seen.add(y.id)]
        for x in states:
            shortest = _shortest_member(tb, x)
            rule = src.bound_is_empty(x)
            assert rule is None or rule == (shortest is None), (p1, p2, h1, h2)
            assert radius is None or shortest is None or shortest <= radius, (p1, p2, h1, h2)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), patterns(), patterns())
def test_emptiness_guess_agrees_with_search(p1, p2, p3):
    """is_empty tries a guessed member (TermSource.has_guess: the shortest member of
    the positive parts, checked by derivatives) before searching; the answers equal a
    breadth-first search's wherever that finds a member within its limit, and a search
    without the guess, for TermSource and for JsonTermSource (A*)."""
    from structgen.fsm.json.source import JsonTermBuilder, JsonTermSource

    def terms(tb):
        a, b, c = (regex_to_term(tb, p) for p in (p1, p2, p3))
        return [tb.intersect([a, tb.complement(b)]), tb.intersect([a, b]),
                tb.concat(tb.intersect([a, tb.complement(b)]), c),
                tb.alt([tb.intersect([a, b, tb.complement(c)]), tb.intersect([b, c])]),
                tb.intersect([tb.repeat(a, 2, None), tb.complement(tb.concat(b, c))])]

    for make, source in ((TermBuilder, TermSource), (JsonTermBuilder, JsonTermSource)):
        tb = make()
        guessed = [source(tb).is_empty(t) for t in terms(tb)]
        tb2 = make()
        plain = source(tb2)
        plain.guess = lambda t: None
        assert guessed == [plain.is_empty(t) for t in terms(tb2)], (p1, p2, p3, source)
        for t, empty in zip(terms(tb), guessed):
            if _shortest_member(tb, t, 12) is not None:
                assert not empty, (p1, p2, p3, source)


def test_wrong_guesses_fall_back_to_the_search():
    """Where the guessed member (the shortest of the positive part) is excluded, the
    answer is the search's: empty, or the longer member found."""
    from structgen.fsm.json.source import JsonTermBuilder, JsonTermSource
    for make, source in ((TermBuilder, TermSource), (JsonTermBuilder, JsonTermSource)):
        for a, b, empty in (("a(b|c)?", "ab?|ac", True), ("a(b|c)?", "ab?", False),
                            ("(xy)+", "xy|xyxy|xyxyxy", False), ("x{1,3}", "x|xx|xxx", True)):
            tb = make()
            t = tb.intersect([regex_to_term(tb, a), tb.complement(regex_to_term(tb, b))])
            assert source(tb).is_empty(t) == empty, (a, b, source)
        tb = make()  # a complement's guess (the empty string) outside an intersection
        nothing = tb.complement(tb.alt([tb.empty, tb.repeat(tb.any_byte, 1, None)]))  # all strings
        assert source(tb).is_empty(tb.concat(nothing, tb.literal(b"y"))), source
        assert not source(tb).is_empty(tb.alt([tb.concat(nothing, tb.literal(b"y")), tb.literal(b"z")]))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), patterns(), patterns(), st.integers(0, 2**32 - 1))
def test_intersection_rows_meet_each_pair_once_and_stay_exact(p1, p2, p3, seed):
    """The rows of intersections (TermBuilder._intersect_rows: a pair of targets met once
    per builder, neighbouring segments of one target joined): the DFA they build accepts
    exactly what Python's `re` says of `a & ~b` and `a & c`, where an earlier
    intersection of other terms filled the builder's memo first; no two neighbouring
    segments of a row have one target; each target is the parts' derivatives met."""
    tb = TermBuilder()
    a, b, c = (regex_to_term(tb, p) for p in (p1, p2, p3))
    warm = LazyDFA(TermSource(tb), tb.intersect([b, tb.complement(c)]))  # (the memo, filled by other pairs)
    for s in range(1, 6):
        if s < warm.num_states:
            warm.expand(s)
    rx1, rx2, rx3 = re.compile(p1), re.compile(p2), re.compile(p3)
    both = LazyDFA(TermSource(tb), tb.alt([tb.intersect([a, tb.complement(b)]), tb.intersect([a, c])]))
    for text in strings_near(p1, np.random.default_rng(seed)):
        want = bool(rx1.fullmatch(text)) and (not rx2.fullmatch(text) or bool(rx3.fullmatch(text)))
        assert dfa_fullmatch(both, text) == want, (p1, p2, p3, text)
    for t in (tb.intersect([a, tb.complement(b)]), tb.intersect([a, c])):
        if t.kind != AND:  # (a & a is a)
            continue
        row = tb.row(t)
        assert all(x[1] <= y[0] and (x[1] < y[0] or x[2] is not y[2]) for x, y in zip(row, row[1:])), (p1, p2, p3)
        for s, e, x in row:
            for byte in (s, e - 1):
                assert x is tb.intersect([tb.derive(p, byte) for p in t.args]), (p1, p2, p3, byte)


def test_intersection_row_joins_neighbouring_segments_of_one_target():
    """`([a-m]x | [n-z](x&y)) & [a-z]y`: both halves of [a-z] lead to `x&y`, one segment."""
    tb = TermBuilder()
    x, y = tb.literal(b"xx"), tb.literal(b"yy")
    a = tb.alt([tb.concat(tb.byte_range(0x61, 0x6D), x), tb.concat(tb.byte_range(0x6E, 0x7A), tb.intersect([x, y]))])
    t = tb.intersect([a, tb.concat(tb.byte_range(0x61, 0x7A), y)])
    assert tb.row(t) == ((0x61, 0x7B, tb.intersect([x, y])),)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), patterns(), patterns(), st.integers(0, 2**32 - 1))
def test_matches_splits_alternatives_of_intersections(p1, p2, p3, seed):
    """TermBuilder.matches checks an alternation with AND/NOT parts branch by branch
    (a oneOf's `B1 & ~B2 | B2 & ~B1`, which emptiness guesses check): the same answers
    as Python's `re`, and as the DFA of the term."""
    tb = TermBuilder()
    a, b, c = (regex_to_term(tb, p) for p in (p1, p2, p3))
    t = tb.alt([tb.intersect([a, tb.complement(b)]), tb.intersect([b, tb.complement(a)]), tb.concat(c, a)])
    dfa = LazyDFA(TermSource(tb), t)
    rx1, rx2, rx3 = re.compile(p1), re.compile(p2), re.compile(p3)
    for text in strings_near(p1, np.random.default_rng(seed)):
        want = bool(rx1.fullmatch(text)) != bool(rx2.fullmatch(text)) or any(
            rx3.fullmatch(text[:i]) and rx1.fullmatch(text[i:]) for i in range(len(text) + 1))
        assert tb.matches(t, text.encode()) == want == dfa_fullmatch(dfa, text), (p1, p2, p3, text)
