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
from oracles import REGEX_ATOMS as ATOMS
from oracles import dfa_fullmatch, patterns, small_vocab, strings_near

from structgen import fsm
from structgen.fsm.core.dfa import LazyDFA, TermSource
from structgen.fsm.core.terms import TermBuilder
from structgen.fsm.regex.syntax import regex_to_term


def byte_dfa(pattern, flags=0):
    tb = TermBuilder()
    return LazyDFA(TermSource(tb), regex_to_term(tb, pattern, flags))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns(), st.integers(0, 2**32 - 1))
def test_bytes_agree_with_re(pattern, seed):
    rng = np.random.default_rng(seed)
    dfa = byte_dfa(pattern)
    rx = re.compile(pattern)
    for text in strings_near(pattern, rng):
        assert dfa_fullmatch(dfa, text) == bool(rx.fullmatch(text)), (pattern, text)


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
    boundaries and anchors are exact; the only refusals are a lookahead of more than one
    character inside an unbounded repeat and a lookbehind of more than one character that
    would look before its group, each at its position (tests/fsm/regex/test_lookarounds.py
    has more)."""
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
    r"(?:(?i:(?!A)[a-b0]))+-",
    # boundaries, anchors and one-character lookarounds in repeats, or looking before their group
    r"(\b-|a)+", r"(?:a|(?:^b))+", r"(?:a$|bc)*0", r"(?<=a$)b", r"0(?:(?<=a)b)*", r"(?:a(?=b))*b",
    r"(?:a\b-?){0,9}", r"(?:\Ba|b\b)*-"])
def test_lookarounds_of_real_patterns(pattern):
    """Every string of up to 5 characters over the patterns' alphabet, against re (`a`,
    `b` and `0` are word characters, `-` is not)."""
    dfa, rx = byte_dfa(pattern), re.compile(pattern)
    for n in range(6):
        for t in map("".join, itertools.product("ab-0", repeat=n)):
            assert dfa_fullmatch(dfa, t) == bool(rx.fullmatch(t)), (pattern, t)


@pytest.mark.parametrize("pattern,construct,pos", [
    (r"(a)\1", "backreference", 3), ("(?:a(?=bc))*b", "lookahead inside a repeat", 4),
    ("x|a(?!c)b|(?:b(?!ab)){9}c", "lookahead inside a repeat of more than 8", 14),
    ("xa(?:b(?<!ab))*", "lookbehind that may look before", 6),
    ("(?<=a(?=bc))b", "lookahead inside a lookbehind", 0),
    ("(?P<x>a)(?P=x)", "backreference", 8), ("(a)?(?(1)b|c)", "conditional", 4),
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
    (r"\p{L}+a*+", 8, "possessive"), (r"(?:\p{Lu}(?=ab))+x", 9, "lookahead inside a repeat"),
    (r"\p{L}(?:a(?=bc)|bc)*x", 9, "inside a repeat"),
    (r"(?x:a)\p{L}", 0, "scoped verbose"),
])
def test_property_escape_errors_name_position(pattern, pos, message):
    with pytest.raises(fsm.RegexError, match=message) as err:
        byte_dfa(pattern)
    assert err.value.pos == pos, str(err.value)
