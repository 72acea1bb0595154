"""Regex automata agree with Python's re.fullmatch, at the byte and the token level."""
from __future__ import annotations

import functools
import itertools
import random
import re
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from structgen import fsm
from structgen.fsm.core.dfa import DEAD, LazyDFA, TermSource
from structgen.fsm.regex.syntax import regex_to_term
from structgen.fsm.core.terms import TermBuilder

from .conftest import live_tokens_brute_force, small_vocab

ALPHABET = "ab0-. é中😀\n_"
ATOMS = ["a", "b", "0", "é", "中", "😀", r"\.", "-", " ", ".", r"\d", r"\w", r"\s", r"\D", r"\W",
         r"\S", "[ab]", "[^a]", "[a-z]", "[0-9é]", "[^ab0]", "[é-😀]", r"[\d.]", r"\n", r"[\s\S]"]


def patterns():
    atom = st.sampled_from(ATOMS)

    def extend(inner):
        return st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}|{t[1]}"),
            inner.map(lambda p: f"({p})"),
            inner.map(lambda p: f"(?:{p})"),
            inner.map(lambda p: f"(?P<g>{p})"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}",
                                              "*?", "+?", "??", "{1,2}?"]))
              .map(lambda t: f"(?:{t[0]}){t[1]}"),
        )
    return st.recursive(atom, extend, max_leaves=8).map(_number_groups)


def _number_groups(pattern: str) -> str:
    """Give each named group its own name (re rejects duplicates)."""
    parts = pattern.split("(?P<g>")
    return parts[0] + "".join(f"(?P<g{i}>{p}" for i, p in enumerate(parts[1:]))


def byte_dfa(pattern, flags=0):
    tb = TermBuilder()
    return LazyDFA(TermSource(tb), regex_to_term(tb, pattern, flags))


def dfa_fullmatch(dfa, text: str) -> bool:
    s = dfa.walk(dfa.start, text.encode())
    return bool(dfa.accepting[s])


def strings_near(pattern: str, rng) -> list[str]:
    out = ["".join(rng.choice(list(ALPHABET), size=int(rng.integers(0, 7)))) for _ in range(40)]
    for n in range(0, 3):  # every short string over a small alphabet
        out += ["".join(p) for p in itertools.product("a0é.\n", repeat=n)]
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), st.integers(0, 2**32 - 1))
def test_bytes_agree_with_re(pattern, seed):
    rng = np.random.default_rng(seed)
    dfa = byte_dfa(pattern)
    rx = re.compile(pattern)
    for text in strings_near(pattern, rng):
        assert dfa_fullmatch(dfa, text) == bool(rx.fullmatch(text)), (pattern, text)


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


def _repeats(rx, text: str, lo: int, hi: int) -> bool:
    """text is lo..hi consecutive full matches of rx."""
    if not text:  # the rest of the repeats may match the empty string
        return lo <= 0 or (hi > 0 and rx.fullmatch("") is not None)
    return hi > 0 and any(rx.fullmatch(text[:i]) and _repeats(rx, text[i:], lo - 1, hi - 1)
                          for i in range(1, len(text) + 1))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), st.data())
def test_matches_from_hypothesis_are_accepted_and_prefixes_live(pattern, data):
    """Matching strings drawn by hypothesis' own regex generator (another oracle)."""
    text = data.draw(st.from_regex(pattern, fullmatch=True))
    try:
        raw = text.encode()
    except UnicodeEncodeError:
        assume(False)  # lone surrogates have no UTF-8 form
    assert re.fullmatch(pattern, text)
    dfa = byte_dfa(pattern)
    s = dfa.start
    for b in raw:  # byte by byte, also inside multi-byte characters
        s = dfa.step(s, b)
        assert s != 0, (pattern, text)
    assert dfa.accepting[s]


@pytest.mark.parametrize("flags,pattern,text", [
    (re.IGNORECASE, "straße", "STRASSE"), (re.IGNORECASE, "straße", "STRAßE"),
    (re.IGNORECASE, "[a-c]+x", "AbCX"), (re.IGNORECASE, "k", "\u212a"),  # Kelvin sign
    (re.DOTALL, "a.b", "a\nb"), (0, "a.b", "a\nb"), (re.ASCII, r"\w+", "é"), (0, r"\w+", "é"),
    (re.VERBOSE, "a b # comment\n c", "abc"), (re.MULTILINE, "^ab$", "ab"),
    (0, r"\Aab\Z", "ab"), (0, "^(a|^b)$", "b"), (0, r"\x41\u00e9\U0001F600", "Aé😀"),
    (0, r"[^\x00-\x7f]", "é"), (0, "(?i:a)b", "Ab"), (0, "(?i:a)b", "AB"),
    (0, "a{0}", ""), (0, "(a|)+", ""), (0, "[\ud800-\udfff]", "\ud800"),
])
def test_flags_and_escapes(flags, pattern, text):
    dfa = byte_dfa(pattern, flags)
    try:
        data = text.encode()
    except UnicodeEncodeError:  # surrogates: no UTF-8 form, so no token can produce them
        assert dfa.table is not None and byte_dfa(pattern, flags).accepting.sum() == 0
        return
    s = dfa.walk(dfa.start, data)
    assert bool(dfa.accepting[s]) == bool(re.fullmatch(pattern, text, flags))


def looking_patterns():
    """patterns() with lookaheads anywhere and lookbehinds of fixed width, word
    boundaries and `^` after an atom."""
    behind = st.sampled_from(["(?<=a)", "(?<!a)", "(?<=[ab])", "(?<!\\d)", "(?<=a0)", "(?<!0.)", "\\b", "\\B", "^"])

    def extend(inner):
        return st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}|{t[1]}"),
            inner.map(lambda p: f"(?:{p})"),
            st.tuples(st.sampled_from(["(?=", "(?!"]), inner, st.sampled_from(["", "$"]))
              .map(lambda t: f"{t[0]}{t[1]}{t[2]})"),
            st.tuples(st.sampled_from(ATOMS), behind).map(lambda t: t[0] + t[1]),
            st.tuples(inner, st.sampled_from(["?", "{2}", "{0,2}", "*", "+"])).map(lambda t: f"(?:{t[0]}){t[1]}"),
        )
    return st.recursive(st.sampled_from(ATOMS), extend, max_leaves=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(looking_patterns(), st.integers(0, 2**32 - 1))
def test_lookarounds_agree_with_re(pattern, seed):
    """Lookaheads (which see the rest of the input, past their group), lookbehinds, word
    boundaries and anchors are exact; the only refusals are a lookahead (or a boundary, or
    `$`) inside an unbounded repeat and a lookbehind (or a boundary, or `^`) that would
    look before its group, each at its position."""
    try:
        dfa = byte_dfa(pattern)
    except fsm.RegexError as e:
        assert "inside a repeat" in str(e) or "that may look before" in str(e), e
        assert pattern[e.pos:e.pos + 3] in ("(?=", "(?!", "(?<") or pattern[e.pos] in "^$\\", (pattern, e.pos)
        return
    rx = re.compile(pattern)
    for text in strings_near(pattern, np.random.default_rng(seed)):
        assert dfa_fullmatch(dfa, text) == bool(rx.fullmatch(text)), (pattern, text)


@pytest.mark.parametrize("pattern", [
    r"^(?!-)(?!.*--)[a-z0-9-]{1,32}(?<!-)$", r"([\da-z](?:(?!.*--)[\da-z-]*[\da-z])?)", r"(?=.{1,3}$)a*b*",
    r"^(?!(ab|ba)$)[ab]*$", r"(?:a(?=b)|b){0,3}", r"(a|bb)(?<!b)c?", r"ab(?<=[ab]b)c", r"(?=(a|b)+(?<=b))\w+",
    # tempered tokens at the end: "no `ab` anywhere" (Converter._tempered)
    r"^((?!ab).)*$", r"-((?!a|b$)[ab])*", r"(?:(?!a)(?!bb).){2,}", r"((?=a|$).)*", r"a((?!-0)\w|-){1,}",
    # word boundaries, and anchors inside (`^` looks one character back, `$` ahead)
    r"\ba", r"a\b", r"\b\w+\b", r"a\b-", r"\Ba", r"\bab|ba\b", r"(?:a\b){0,3}", r"(?:a\b-?){0,4}", r"-*\B0",
    r"(?:^a)?b", r"a^b", r"(a|^b)?-", r"a$b", r"(a$|b)", r"(?:a$|-)*", r"(?:^a|b)\b-?",
    # a lookahead of one character before one, or a repeat of one, in an unbounded repeat
    # (Converter._folded: a domain's labels, `((?!-)[a-z0-9-]{1,63}\.)+`)
    r"((?!-)[ab0-]{1,3}-)+", r"(?:(?!a)\w)*", r"(-(?=a)\w+)*", r"((-(?!-)a)?\w+-?)+", r"(?:(?=[a0])[^-])+b?",
    r"(?:(?i:(?!A)[a-b0]))+-"])
def test_lookarounds_of_real_patterns(pattern):
    """Every string of up to 5 characters over the patterns' alphabet, against re (`a`,
    `b` and `0` are word characters, `-` is not)."""
    dfa, rx = byte_dfa(pattern), re.compile(pattern)
    for n in range(6):
        for t in map("".join, itertools.product("ab-0", repeat=n)):
            assert dfa_fullmatch(dfa, t) == bool(rx.fullmatch(t)), (pattern, t)


@pytest.mark.parametrize("pattern,construct,pos", [
    (r"(a)\1", "backreference", 3), ("(?:a(?=b))*b", "lookahead inside a repeat", 4),
    ("x|a(?!c)b|(?:b(?!a)){9}c", "lookahead inside a repeat of more than 8", 14),
    ("x(?:(?<=a)b)*", "lookbehind that may look before", 4), ("xa(?:b(?<!ab))*", "lookbehind", 6),
    (r"(\b-|a)+", "word boundary that may look before", 1), (r"x\b|y(?:c|\bd)", "word boundary", 10),
    (r"^x|y(?:c|^d)", "`^` or word boundary", 9), ("(?:a|(?:^b))+", "`^` or word boundary", 8),
    ("(?:a$|bc)*x", "`$` inside a repeat", 4), ("(?<=a$)b", "`$` inside a lookbehind", 0), ("(?P<x>a)(?P=x)", "backreference", 8), ("(a)?(?(1)b|c)", "conditional", 4),
    ("(?>ab)", "atomic", 0), ("a*+", "possessive", 2),
])
def test_unsupported_constructs_name_position(pattern, construct, pos):
    with pytest.raises(fsm.RegexError) as err:
        byte_dfa(pattern)
    assert construct in str(err.value) and err.value.pos == pos


@pytest.mark.parametrize("pattern", ["a(b", "[a-", "a{2,1}", "*a", "a)"])
def test_invalid_regex_names_position(pattern):
    with pytest.raises(re.error) as want:
        re.compile(pattern)
    with pytest.raises(fsm.RegexError, match="invalid regex") as err:
        byte_dfa(pattern)
    assert err.value.pos == want.value.pos


def test_constraints_without_outputs_are_refused():
    """require_output refuses a constraint whose first mask is empty (no token begins
    an output: an empty language, or one the vocabulary cannot spell) with
    ConstraintError naming it, for every kind; one that only the empty output
    satisfies passes. The automata themselves compile (acceptors of token sequences)."""
    vocab = small_vocab([b"a", b"b", b"ab", b"1", b"{", b"}", b'"'])
    empty = [lambda: fsm.compile_regex(r"[^\s\S]", vocab), lambda: fsm.compile_regex("c", vocab),
             lambda: fsm.compile_choice(["zz"], vocab), lambda: fsm.compile_json_schema(False, vocab),
             lambda: fsm.compile_json_schema({"type": "integer", "minimum": 5, "maximum": 3}, vocab),
             lambda: fsm.compile_grammar('start: "c" | "c" "a"', vocab)]
    for compile_ in empty:
        a = compile_()
        with pytest.raises(fsm.ConstraintError, match="accepts no output at all"):
            a.require_output()
    for a in (fsm.compile_regex("", vocab), fsm.compile_json_schema({"const": 1}, vocab)):
        assert a.require_output() is a  # ("": EOS at once)


def test_state_cap_raises_clear_error():
    vocab = small_vocab([b"a", b"b"])
    a = fsm.compile_regex("(a|b)*a(a|b){14}", vocab, max_states=500)
    rng = np.random.default_rng(0)
    with pytest.raises(fsm.TooLargeError, match="max_states=500"):
        for _ in range(200):  # 2**15 states exist; random walks meet 500 soon
            m = a.matcher()
            for _ in range(20):
                m.fill_next_token_bitmask(np.zeros(vocab.num_words, np.int32))
                assert m.accept_token(int(rng.integers(0, 2)))


def test_large_bounded_repeat_is_cheap():
    dfa = byte_dfa("[^\"]{0,10000}x")
    assert dfa_fullmatch(dfa, "é" * 9999 + "x") and not dfa_fullmatch(dfa, "a" * 10001 + "x")


# -- token level -------------------------------------------------------------------------

def token_vocab():
    """All strings of 1..2 characters over a small alphabet, plus split UTF-8 pieces."""
    chars = ["a", "b", "0", ".", " ", "é", "中", "\n"]
    toks = [c.encode() for c in chars] + [(x + y).encode() for x in chars for y in chars]
    toks += [b"\xc3", b"\xa9", b"\xe4", b"\xb8\xad", b"\xe4\xb8", b"\xad", b"a\xc3", b"\xa9a"]
    return small_vocab(toks)


def tokenizations(data: bytes, vocab, limit=60):
    """Every way to write data as vocabulary tokens (up to limit)."""
    by_bytes = {}
    for i, b in enumerate(vocab.token_bytes):
        if b:
            by_bytes.setdefault(b, []).append(i)
    out = []

    def rec(pos, acc):
        if len(out) >= limit:
            return
        if pos == len(data):
            out.append(list(acc))
            return
        for k in range(1, min(3, len(data) - pos) + 1):
            for t in by_bytes.get(data[pos: pos + k], []):
                rec(pos + k, acc + [t])
    rec(0, [])
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), st.lists(st.text(alphabet="ab0. é中\n", max_size=5), min_size=1, max_size=6))
def test_tokens_agree_with_re(pattern, texts):
    vocab = token_vocab()
    a = fsm.compile_regex(pattern, vocab)
    eos = vocab.eos_ids[0]
    for text in texts:
        want = bool(re.fullmatch(pattern, text))
        for toks in tokenizations(text.encode(), vocab):
            m = a.matcher()
            ok = True
            for t in toks:
                row = np.zeros(vocab.num_words, np.int32)
                m.fill_next_token_bitmask(row)
                allowed = bool((int(row[t >> 5]) >> (t & 31)) & 1)
                accepted = m.accept_token(t)
                assert allowed == accepted
                if not accepted:
                    ok = False
                    break
            if ok:
                assert m.accept_token(eos) == want, (pattern, text, toks)
            else:
                assert not want


@settings(max_examples=80, deadline=None)
@given(patterns(), st.text(alphabet="ab0. é中\n", max_size=4))
def test_mask_is_exactly_the_live_tokens(pattern, prefix):
    """Brute force: token t is allowed iff walking its bytes keeps a live state."""
    vocab = token_vocab()
    a = fsm.compile_regex(pattern, vocab)
    tb = TermBuilder()
    oracle = LazyDFA(TermSource(tb), regex_to_term(tb, pattern))
    s = oracle.walk(oracle.start, prefix.encode())
    assume(s != 0)
    m = a.matcher()
    for t in tokenizations(prefix.encode(), vocab, limit=1)[0] if prefix else []:
        assert m.accept_token(t)
    allowed = set(a.allowed_tokens(m.state).tolist())
    expect = {i for i, b in enumerate(vocab.token_bytes) if b and oracle.walk(s, b) != 0}
    if oracle.accepting[s]:
        expect |= set(vocab.eos_ids)
    assert allowed == expect


# -- the real vocabulary -------------------------------------------------------------

REAL_PATTERNS = {
    r"\d{4}-\d{2}-\d{2}": ["2024-01-31", "1999-12-01"],
    r"[a-z]+@[a-z]+\.(com|org)": ["john@example.com", "a@b.org"],
    r"(中文|日本語|😀+)( [a-z]+)?": ["中文 abc", "😀😀😀", "日本語"],
    r"\(\d{3}\) \d{3}-\d{4}": ["(555) 123-4567"],
    r"\$\d+(\.\d\d)?": ["$12.50", "$7"],
}


@pytest.mark.parametrize("pattern", list(REAL_PATTERNS))
def test_real_vocab_canonical_tokenizations(pattern, smol_tokenizer, smol_vocab):
    a = fsm.compile_regex(pattern, smol_vocab)
    for text in REAL_PATTERNS[pattern]:
        m = a.matcher()
        for t in smol_tokenizer.encode(text, add_special_tokens=False):
            row = np.zeros(smol_vocab.num_words, np.int32)
            m.fill_next_token_bitmask(row)
            assert (int(row[t >> 5]) >> (t & 31)) & 1
            assert m.accept_token(t)
        assert m.is_accepting() and m.accept_token(smol_vocab.eos_ids[0]) and m.is_terminated()


def test_real_vocab_random_walks_fullmatch(smol_vocab):
    rng = np.random.default_rng(0)
    for pattern in REAL_PATTERNS:
        a = fsm.compile_regex(pattern, smol_vocab)
        for _ in range(5):
            m, out = a.matcher(), b""
            for _ in range(40):
                allowed = a.allowed_tokens(m.state)
                t = int(rng.choice(allowed))
                assert m.accept_token(t)
                if m.is_terminated():
                    break
                out += smol_vocab.token_bytes[t]
            if m.is_terminated():
                assert re.fullmatch(pattern, out.decode()), (pattern, out)


@pytest.mark.parametrize("pattern,texts", [
    ("(?P<w>foo|ba\\.r|)", ["foo", "ba.r", "", "bar", "ba\\.r", "fo"]),
    ("x\\-y|\\é|中文", ["x-y", "é", "中文", "\\é", "x\\-y"]),
    ("(?:a b|#c)", ["a b", "#c", "ab"]),
    ("a\\|b|c", ["a|b", "c", "a", "b"]),        # an escaped bar: re's parser decides
    ("(red|green)|blue\\d", ["red", "blue1", "blue\\d"]),
])
def test_word_lists_agree_with_re(pattern, texts):
    """Plain alternations skip re's parser (fsm/regex.py); the language is the same."""
    tb = TermBuilder()
    dfa = LazyDFA(TermSource(tb), regex_to_term(tb, pattern))
    for text in texts:
        assert dfa_fullmatch(dfa, text) == bool(re.fullmatch(pattern, text)), (pattern, text)


def test_literal_words_stop_where_no_token_reaches(smol_vocab):
    """Nested objects' key paths multiply (`{"p1":{"q2":{"k3":"x"`...): literal_heads
    spells an alternation out only after a literal that some token starts with; the
    masks stay exact, token by token, also for tokens that run into the nested keys."""
    from structgen.fsm.core.automaton import literal_heads
    from structgen.fsm.json.schema import build_automaton
    inner = {"type": "object", "properties": {f"k{i}": {"enum": ["x", "y"]} for i in range(8)}}
    schema = {"type": "object", "properties": {
        f"p{i}": {"type": "object", "properties": {f"q{j}": inner for j in range(6)}} for i in range(6)}}
    toy = small_vocab([b'{"', b'{"p1":{"', b'{"p1":{"q2', b'{"p', b'":{"', b'{"p2":{"q3":{"k4":"x"', b'x"}', b'}}'])
    for vocab in (smol_vocab, toy):
        a = build_automaton(schema, vocab)
        tb, trie = a.dfa.source.tb, vocab.trie
        key = a.dfa.keys[a.start]
        spelled, _ = literal_heads(key, tb)
        heads, _ = literal_heads(key, tb, lambda w: len(trie.path(w)) == len(w))
        assert len(spelled) > 500 and len(heads) < 40, (len(spelled), len(heads))
        for prefix in ['', '{"', '{"p1":{"', '{"p2":{"q3":{"']:
            s = a.dfa.walk(a.start, prefix.encode())
            assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == \
                live_tokens_brute_force(a, s), prefix


def test_fast_paths_equal_brute_force(smol_vocab):
    """Branches that start with literal bytes descend the vocabulary trie directly
    (TokenAutomaton._walk_literals), states that loop on a wide class test byte sets
    (TokenAutomaton._chain_words); the mask must equal a token-by-token walk."""
    words = [b[1:].decode() for b in smol_vocab.token_bytes[1000:3000:20]
             if b and b[:1] == b" " and b[1:].isalpha() and b[1:].isascii()]
    cases = {
        "(" + "|".join(words) + ")": ["", words[3][:2]],
        "(the|then|there|other|)( [a-z]+)*": ["", "the", "there "],
        '"(red|green|blue)", ?[0-9]+': ['"', '"gre', '"blue"'],
        "(abc|ab|a)x*(yz|y)?": ["", "a", "abx"],
        "(<|<=|==|!=)[a-z]+|[0-9]+": ["", "<"],
        r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}": ["", "jo", "jo@x", "jo@x.org"],
        r'"([^"\\]|\\["\\/bfnrt])*"': ['"', '"héllo wörld', '"a\\'],
        r"[^\n]*\n|(?s:.{3,})": ["", "ab", "x\ny"],
        r"[a-z ]{0,5}x|[a-z ]{3,40}[0-9]{2}": ["", "ab", "abcd"],   # chains that end, split
        r'"([^"\\]|é){0,12}"': ['"', '"abcdefghij', '"ééé'],
        r"[a-z]{2}(a[a-z]*|b[0-9]*)": ["", "q"],   # the class splits two bytes in
        '[^"\n\t]*"!': ["", "ab", "é"],  # loops on every character but a few ASCII ones
        '[^"é]*"': ["", "ab"],  # loops on all characters but one: walked
        "[ -~]*(\u00e9|\u4e2d)*z": ["", "ab"],
        "[ -~]*([^\\x00-\\x7f][ -~]*)?\t": ["", "ab"],  # a character leaves the loop
        "([a-z ]|[^\\x00-\\x7f]!)*\t": ["", "ab"],  # characters that do not end the item
        "[À-ÿ a-z]{0,6}!": ["", "é", "ab"],  # some non-ASCII characters: checked one by one
        '"[a-zé中]*"': ['"', '"é'],
        '[^"' + "".join(chr(0x30 + 64 * i) for i in range(2, 32)) + ']*"': ["", "a"],  # no (C2-DF) B0: °
        "[0-9a-f]{2}-[0-9a-f]-[a-zé]!": ["a", "ab-", "ab-c-"],  # one character of a class left (x R)
    }
    runs = 0
    for pattern, prefixes in cases.items():
        a = fsm.compile_regex(pattern, smol_vocab)
        for prefix in prefixes:
            s = a.dfa.walk(a.start, prefix.encode())
            assert s != 0
            runs += pattern.startswith("[0-9a-f]{2}") and a._run_words(s, a.dfa.keys[s]) is not None
            assert set(a.allowed_tokens(s).tolist()) - set(smol_vocab.eos_ids) == \
                live_tokens_brute_force(a, s), (pattern, prefix)
    assert runs == 3


def test_enum_tries_keep_masks_exact(smol_vocab):
    """JSON enums (and regex word lists) are tries (TermBuilder.words); masks read them
    as whole words (literal_heads), followed by the rest of the document."""
    from structgen.fsm.json.schema import build_automaton
    schema = {"type": "object", "properties": {
        "c": {"enum": [f"country-{i}" for i in range(30)] + ["count", "co", "the", "then", 12, 123]},
        "n": {"type": "integer"}}, "required": ["c", "n"], "additionalProperties": False}
    toy = small_vocab([b'"co",', b'"country-1"', b'"country-12",', b'12,"', b'123,"n', b'"the', b'n",'])
    for vocab in (smol_vocab, toy):  # toy: tokens that run past a whole word
        a = build_automaton(schema, vocab)
        for prefix in ['{"c":', '{"c":"', '{"c":"co', '{"c":"country-1', '{"c":1', '{"c":"the']:
            s = a.dfa.walk(a.start, prefix.encode())
            assert s != 0
            assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == \
                live_tokens_brute_force(a, s), prefix


def test_run_lists_are_bounded(monkeypatch):
    """The per-vocabulary token lists of character-class runs keep at most
    WALK_CACHE_BYTES of arrays (here none: one entry at a time); masks stay exact when
    one is dropped and rebuilt."""
    import structgen.fsm.core.vocabulary as vocabulary
    monkeypatch.setattr(vocabulary, "WALK_CACHE_BYTES", 0)
    vocab = small_vocab([b"a", b"ab", b"abc", b"1", b"12", b"x", b"a1", b"b!", b"!", b"\xc3\xa9", b"\xc3"])
    for i, pattern in enumerate(["[ab]{0,5}x", "[0-9]*!", "[a-c]+!", "[ab]{0,5}x", "[^x]*x", "[0-9]*!"]):
        a = fsm.compile_regex(pattern, vocab, max_states=10**5 + 10 + i)  # fresh automata
        for s in [a.start, a.dfa.walk(a.start, b"a"), a.dfa.walk(a.start, b"1")]:
            if s:
                assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == \
                    live_tokens_brute_force(a, s), (pattern, s)
        assert len(vocab.columns.walks) <= 1
        assert vocab.columns.walk_bytes[0] == sum(b for _, b in vocab.columns.walks.values())


def test_walk_cache_drops_the_least_recently_used(monkeypatch):
    """TokenColumns.memo, over its byte bound, drops the entry used longest ago (a
    server's schemas reuse a few classes all the time), counting arrays as stored."""
    import numpy as np

    import structgen.fsm.core.vocabulary as vocabulary
    monkeypatch.setattr(vocabulary, "WALK_CACHE_BYTES", 3 * 1001)  # (an entry: its array, 1 for the rest)
    cols = small_vocab([b"a", b"b"]).columns
    made = []

    def make(k):
        return lambda: made.append(k) or (np.zeros(1000, dtype=np.uint8), {})
    for k in "abc":
        cols.memo(k, make(k))
    cols.memo("a", make("a"))  # a hit: a is the most recent now
    cols.memo("d", make("d"))  # over the bound: b goes
    assert set(cols.walks) == {"a", "c", "d"} and made == list("abcd")
    assert cols.walk_bytes[0] == 3 * 1001


def test_long_chain_masks_stay_exact(smol_vocab):
    """A bounded repeat longer than any token: the chain shortcut must not remember a
    partial exploration as the end of the chain (masks ~80 bytes in stay exact)."""
    a = fsm.compile_regex("[a-z ]{0,300}", smol_vocab, max_states=10**5 + 2)  # own cache slot
    s = a.start
    for i in range(120):
        a.mask(s)  # every state's first mask in turn, as a document would
        if i in (0, 40, 79, 80, 81, 119):
            assert set(a.allowed_tokens(s).tolist()) - set(smol_vocab.eos_ids) == \
                live_tokens_brute_force(a, s), i
        s = a.dfa.step(s, ord("a"))


def test_clipped_repeats_keep_masks_exact(smol_vocab):
    """Bounded repeats no token can exhaust share one mask (automaton.clip_repeats):
    heads and repeats behind a part, upper and lower bounds, around the clip edge."""
    # SmolLM2's longest tokens: 80 '#', and a newline with 80 spaces (81 bytes)
    cases = [  # pattern, prefix, the unit repeated, how many units in (ascending)
        ("#{0,100}x", b"", b"#", [0, 15, 19, 20, 21, 22, 60, 100]),  # hi crosses 80-81
        ("(##){90,100}x", b"", b"##", [0, 5, 30, 49, 50, 70, 89, 90, 100]),  # lo clips too
        ("(##){90,100}x", b"#", b"##", [0, 45]),
        ("[ \n]{100,}x", b"", b" ", [0, 10, 19, 20, 21, 100]),
        ('"(é|#){0,200}"', b'"\xc3', b"", [0]),  # the repeat behind a part (mid-character)
        ('"(é|#){0,200}"', b'"', b"#", [0, 60, 119, 120, 121, 130, 200]),
        ("(#,){0,1000}z", b"", b"#,", [0, 300]),
        ("\n {0,79}x", b"", b"", [0]), ("\n {0,81}x", b"", b"", [0]),  # behind a part
    ]
    eos = set(smol_vocab.eos_ids)
    for pattern, prefix, unit, steps in cases:
        a = fsm.compile_regex(pattern, smol_vocab)
        s, done = a.dfa.walk(a.start, prefix), 0
        for i in steps:
            s, done = a.dfa.walk(s, unit * (i - done)), i
            assert s != 0, (pattern, prefix, i)
            assert set(a.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(a, s), \
                (pattern, prefix, i)


def test_clipped_length_bounds_keep_masks_exact(smol_vocab):
    """`A AND .{0,hi}` shares A's mask once no token can reach the bound, judged by A's
    radius (TermSource.radius, clip_repeats): a hostname-like A (radius 2) and one whose
    prefixes may be 31 bytes from the end (`[a-z.]*x{30}`), around the clip edge, with
    SmolLM2's vocabulary (longest token: 81 bytes) and one whose longest token (12
    bytes) is made of A's bytes, so a bound clipped too early shows."""
    from structgen.fsm.core.automaton import TokenAutomaton
    tight = small_vocab([b"a", b".", b"x", b"aaaa", b"x" * 8, b"a." * 6, b"x" * 12, b'"', b'"1', b'x"1'])
    cases = [  # vocabulary, A, its radius, hi, the unit walked, how many units in (ascending)
        (smol_vocab, r"[a-z]{1,5}(\.[a-z]{1,5})*", 2, 130, b"abc.", [0, 1, 10, 11, 12, 13, 20, 30]),
        (smol_vocab, r"[a-z.]*x{30}", 31, 160, b"a.", [0, 10, 20, 22, 23, 24, 25, 30, 40, 60]),
        (tight, r"[a-z.]*x{30}", 31, 80, b"a", [0, 10, 20, 30, 35, 36, 37, 38, 40, 45, 49]),
        (tight, r"[a-z.]*x{30}", 31, 80, b"x", [0, 10, 29, 30, 40, 60]),
    ]
    for vocab, pattern, radius, hi, unit, steps in cases:
        tb = TermBuilder()
        shape = regex_to_term(tb, pattern)
        root = tb.concat(tb.intersect([shape, tb.repeat(tb.any_byte, 1, hi)]), regex_to_term(tb, '"[0-9]'))
        a = TokenAutomaton.from_term(tb, root, vocab)
        assert a.dfa.source.radius(shape) == radius
        assert set(a.allowed_tokens(a.start).tolist()) - set(vocab.eos_ids) == \
            live_tokens_brute_force(a, a.start), pattern  # .{1,hi}: lo 1, A without ""
        s, done = a.dfa.walk(a.start, unit[:1]), 0  # past the first byte: lo is 0
        for i in steps:
            s, done = a.dfa.walk(s, unit * (i - done)), i
            assert s != 0, (pattern, unit, i)
            assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == \
                live_tokens_brute_force(a, s), (pattern, unit, i)


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


def test_matcher_contract():
    vocab = small_vocab([b"a", b"b", b"ab", b"c", b"\xc3", b"\xa9"])
    eos = vocab.eos_ids[0]
    a = fsm.compile_regex("ab(c|é)", vocab)
    m = a.matcher()
    assert m.forced_bytes() == b"ab" and m.forced_tokens() == []  # "a"+"b" or "ab"
    assert not m.accept_token(3) and m.state == a.start  # refused: no change
    assert m.accept_token(2) and m.forced_bytes() == b""
    assert m.accept_token(4) and m.forced_bytes() == b"\xa9" and m.forced_tokens() == [5]
    assert not m.accept_token(eos) and m.accept_token(5) and m.is_accepting()
    assert m.accept_token(eos) and m.is_terminated() and not m.accept_token(0)
    row = np.zeros(vocab.num_words, np.int32)
    m.fill_next_token_bitmask(row)  # after the end only EOS
    assert np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist() == [eos]
    m.rollback(2)
    assert m.state == a.next_state(a.next_state(a.start, 2), 4) and not m.is_terminated()
    with pytest.raises(ValueError):
        m.rollback(5)
    assert fsm.compile_regex("ab(c|é)", vocab) is a  # cached per vocabulary


def test_shared_automaton_across_threads(smol_vocab):
    from concurrent.futures import ThreadPoolExecutor
    pattern = r"[a-z]{1,8}(-[a-z]{1,8}){0,3}@[a-z]+\.(com|org)"
    fresh = fsm.compile_regex(pattern, smol_vocab, max_states=10**5 + 1)  # a separate cache slot
    texts = ["abc-de@xy.com", "zz@q.org", "hello-world-foo@bar.com"]

    def run(text):
        m, masks = fresh.matcher(), []
        for t in [smol_vocab.token_bytes.index(bytes([c])) for c in text.encode()]:
            masks.append(m.next_token_mask().copy())
            assert m.accept_token(t)
        return masks
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(run, texts * 4))
    serial = fsm.compile_regex(pattern, smol_vocab)
    for text, masks in zip(texts * 4, parallel):
        m = serial.matcher()
        for t, mask in zip([smol_vocab.token_bytes.index(bytes([c])) for c in text.encode()], masks):
            assert np.array_equal(mask, m.next_token_mask())
            m.accept_token(t)


def test_paused_gc_nests_and_keeps_the_users_choice():
    import gc

    from structgen.fsm.core.terms import paused_gc
    was = gc.isenabled()
    try:
        gc.enable()
        with paused_gc():
            with paused_gc():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer pause still holds
        assert gc.isenabled()
        gc.disable()  # a collector the user turned off stays off
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_paused_gc_collect_young():
    """At the end of a compilation that left more than YOUNG_COLLECT objects young,
    collect_young collects them (one generation-1 run); with fewer, or where the
    collector was off before the pause, it does not; a pause alone never collects."""
    import gc

    from structgen.fsm.core.terms import YOUNG_COLLECT, paused_gc
    was = gc.isenabled()
    try:
        gc.enable()
        gc.collect()
        with paused_gc():
            kept = [[i] for i in range(YOUNG_COLLECT + 1000)]
            assert gc.get_count()[0] > YOUNG_COLLECT  # (no collection while paused)
            paused_gc().collect_young()
            assert gc.get_count() == (0, 0, 1)
            few = [[i] for i in range(100)]
            paused_gc().collect_young()
            assert gc.get_count()[0] >= 100
        gc.disable()
        with paused_gc():
            more = [[i] for i in range(YOUNG_COLLECT + 1000)]
            paused_gc().collect_young()
            assert gc.get_count()[0] > YOUNG_COLLECT
        assert not gc.isenabled()
        assert len(kept) + len(few) + len(more) > 2 * YOUNG_COLLECT
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("text", ["select", "SeLeCt", "a.b", "x y", "é", "ß", "ſ", "İ", "Σσς",
                                  "k2", "(?i)", "\\n", "ﬀ", "\U0001F600", ""])
def test_caseless_literal_is_the_regex_term(text):
    """Grammar keywords (`"select"i`) skip re's parser: the same interned term."""
    from structgen.fsm.regex.syntax import caseless_literal
    tb = TermBuilder()
    assert caseless_literal(tb, text) is regex_to_term(tb, re.escape(text), re.IGNORECASE)


# -- Unicode property escapes: \p{...} / \P{...} against unicodedata.category -------------
# (the expected members come from the category strings here, not from fsm/uprops.py)
GC_SHORT = ["L", "Lu", "Ll", "Lt", "Lm", "Lo", "LC", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
            "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So",
            "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf", "Cs", "Co", "Cn"]


def _in_gc(name: str, ch: str) -> bool:
    cat = unicodedata.category(ch)
    if name == "LC":
        return cat in ("Lu", "Ll", "Lt")
    return cat.startswith(name) if len(name) == 1 else cat == name


@functools.lru_cache(maxsize=1)
def _gc_samples() -> list[str]:
    """Both sides of every place where the category changes, all of Latin-1 and the
    combining diacritics, plane ends and random code points of every plane (no
    surrogates: they have no UTF-8 form; tests below check them apart)."""
    rng = random.Random(1)
    cats = [unicodedata.category(chr(c)) for c in range(0x110000)]
    picks = {c for e in range(1, 0x110000) if cats[e] != cats[e - 1] for c in (e - 1, e)}
    picks |= set(range(0x300)) | set(range(0x300, 0x370))
    picks |= {0xD7FF, 0xE000, 0xF8FF, 0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0x1D49C, 0x20000,
              0xE0001, 0xF0000, 0x10FFFD, 0x10FFFF}
    picks |= {rng.randrange(0x110000) for _ in range(2000)}
    return [chr(c) for c in sorted(picks) if not 0xD800 <= c <= 0xDFFF]


def _accepted(dfa, chars) -> list[bool]:
    return [bool(dfa.accepting[dfa.walk(dfa.start, ch.encode())]) for ch in chars]


@pytest.mark.parametrize("name", GC_SHORT)
def test_property_escapes_agree_with_unicodedata(name):
    chars = _gc_samples()
    want = [_in_gc(name, ch) for ch in chars]
    for pattern, expect in ((rf"\p{{{name}}}", want), (rf"\P{{{name}}}", [not w for w in want]),
                            (rf"\p{{gc={name}}}", want), (rf"[^\p{{General_Category={name}}}]", [not w for w in want])):
        got = _accepted(byte_dfa(pattern), chars)
        bad = [f"U+{ord(ch):04X}" for ch, g, w in zip(chars, got, expect) if g != w]
        assert not bad, (pattern, bad[:10])


@pytest.mark.parametrize("long,short", [
    ("Letter", "L"), ("Uppercase_Letter", "Lu"), ("Lowercase_Letter", "Ll"), ("Cased_Letter", "LC"),
    ("Mark", "M"), ("Combining_Mark", "M"), ("Nonspacing_Mark", "Mn"), ("Number", "N"),
    ("Decimal_Number", "Nd"), ("digit", "Nd"), ("Punctuation", "P"), ("punct", "P"),
    ("Symbol", "S"), ("Currency_Symbol", "Sc"), ("Separator", "Z"), ("Space_Separator", "Zs"),
    ("Other", "C"), ("Control", "Cc"), ("cntrl", "Cc"), ("Unassigned", "Cn"), ("Private_Use", "Co"),
])
def test_property_long_names_are_the_short_ones(long, short):
    tb = TermBuilder()
    for fmt in (r"\p{%s}", r"\P{%s}", r"[x\p{gc=%s}]", r"\p{General_Category=%s}"):
        assert regex_to_term(tb, fmt % long) is regex_to_term(tb, fmt % short), (fmt, long)


@pytest.mark.parametrize("pattern,oracle", [
    (r"[\p{L}_0-9]", lambda c: _in_gc("L", c) or c == "_" or "0" <= c <= "9"),
    (r"[^\p{L}]", lambda c: not _in_gc("L", c)),
    (r"[\P{L}x]", lambda c: not _in_gc("L", c) or c == "x"),
    (r"[^\P{Lu}\d]", lambda c: _in_gc("Lu", c) and not _in_gc("Nd", c)),
    (r"[\p{L}\p{M} '-]", lambda c: _in_gc("L", c) or _in_gc("M", c) or c in " '-"),
    (r"[-\p{Nd}]", lambda c: _in_gc("Nd", c) or c == "-"),
    (r"[\p{Sc}-]", lambda c: _in_gc("Sc", c) or c == "-"),
    (r"[]\p{Zs}]", lambda c: _in_gc("Zs", c) or c == "]"),
    (r"\p{Lu}|\p{Nd}", lambda c: _in_gc("Lu", c) or _in_gc("Nd", c)),
])
def test_property_escapes_in_classes(pattern, oracle):
    chars = _gc_samples()
    got = _accepted(byte_dfa(pattern), chars)
    bad = [f"U+{ord(ch):04X}" for ch, g in zip(chars, got) if g != oracle(ch)]
    assert not bad, (pattern, bad[:10])


def test_property_escapes_in_sequences_and_flags():
    dfa = byte_dfa(r"^\p{Lu}\p{Ll}+(?:[\s-]\p{Lu}\p{Ll}+)*$")
    for text, ok in (("Élodie", True), ("Jean-Luc", True), ("Ωmega Σx", True), ("élodie", False),
                     ("É", False), ("Ab1", False), ("Ab\u0301", False), ("𝐀b", True)):  # (U+1D400: Lu)
        assert dfa_fullmatch(dfa, text) == ok, text
    # IGNORECASE: the class of the property's members, case-closed as re does for classes
    assert dfa_fullmatch(byte_dfa(r"\p{Lu}+", re.IGNORECASE), "aBé")
    assert not dfa_fullmatch(byte_dfa(r"\p{Lu}+"), "aBé")
    # VERBOSE: a comment's `[` opens no class (the \p{Nd} after it is outside one), and a
    # `#` inside a class is a member
    for flags, pattern in ((re.VERBOSE, "\\p{L} # [ not a class\n \\p{Nd} [#\\p{Zs}]"),
                           (0, "(?x) \\p{L} # [ not a class\n \\p{Nd} [#\\p{Zs}]")):
        dfa = byte_dfa(pattern, flags)
        assert [dfa_fullmatch(dfa, t) for t in ("a1#", "π٣\u3000", "a1 ", "a #", "1a#")] == \
            [True, True, True, False, False]
    # surrogates (Cs) have no UTF-8 form: \p{Cs} matches nothing, \P{Cs} every character
    tb = TermBuilder()
    assert regex_to_term(tb, r"\p{Cs}") is tb.nothing
    assert regex_to_term(tb, r"[\p{Cs}a]") is regex_to_term(tb, "a")
    assert all(_accepted(byte_dfa(r"\P{Cs}"), ["\ud7ff", "\ue000", "a", "\U0010ffff"]))
    assert not dfa_fullmatch(byte_dfa(r"\P{Cs}"), "ab")


def test_property_escapes_compile_to_token_automata():
    vocab = small_vocab([b"A", b"b", b"\xce", b"\xa9", b"1", "é".encode(), "Ω".encode()])
    a = fsm.compile_regex(r"\p{Lu}\p{Ll}*", vocab)
    s = a.start
    allowed = set(a.allowed_tokens(s).tolist())
    assert {0, 2, 6} <= allowed and not allowed & {1, 4, 5}  # A, Ω's lead byte, Ω; not b, 1, é


@pytest.mark.parametrize("pattern,pos,message", [
    (r"\p{Script=Greek}", 0, "script property"), (r"ab\p{sc=Grek}", 2, "script property"),
    (r"[a\p{scx=Grek}]", 2, "script property"), (r"x\p{Alphabetic}", 1, "binary property"),
    (r"\P{White_Space}", 0, "binary property"), (r"(a)\p{Foo}", 3, r"unknown Unicode property \\p{Foo}"),
    (r"\p{letter}", 0, r"unknown Unicode property \\p{letter}"), (r"\p{gc=Greek}", 0, "unknown"),
    (r"\pL", 0, "bad Unicode property escape"), (r"ab\p{L", 2, "bad Unicode property escape"),
    (r"[a-\p{L}]", 3, "range endpoint"), (r"[\p{L}-z]", 1, "range endpoint"),
    (r"[\d\p{L}-\p{N}]", 3, "range endpoint"),
    # later errors keep their place in the pattern as written
    (r"\p{L}(", 5, "missing \\)"), (r"[\p{L}]{2,1}x", 8, "min repeat greater than max"),
    (r"\p{L}+a*+", 8, "possessive"), (r"(?:\p{Lu}\b)+x", 9, "word boundary or `\\$` inside a repeat"),
    (r"\p{L}(?:a$|bc)*x", 9, "inside a repeat"),
    (r"(?x:a)\p{L}", 0, "scoped verbose"),
])
def test_property_escape_errors_name_position(pattern, pos, message):
    with pytest.raises(fsm.RegexError, match=message) as err:
        byte_dfa(pattern)
    assert err.value.pos == pos, str(err.value)
