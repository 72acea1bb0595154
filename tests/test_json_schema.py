"""fsm.json_schema: keyword semantics against independent oracles (Decimal arithmetic,
re.search, jsonschema, Pydantic), canonical texts, whitespace, strict/lenient, limits."""
from __future__ import annotations

import itertools
import json
import random
import re
import time
import warnings
from decimal import Decimal

import jsonschema
import pytest

from structgen.fsm.core.errors import TooLargeError
from structgen.fsm.json.schema import SchemaError, SchemaWarning, canonical_json, schema_to_term
from structgen.fsm.json.source import JsonTermBuilder
from structgen.fsm.regex.syntax import regex_to_term
from structgen.fsm.core.terms import CONCAT
from .conftest import live_tokens_brute_force, small_vocab


def compiled(schema, **opts):
    cs = schema_to_term(schema, **opts)
    dfa = cs.dfa()
    return lambda text: cs.accepts(text, dfa), cs


def valid(schema, inst) -> bool:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).is_valid(inst)


# -- numbers --------------------------------------------------------------------------
NUMBER_TEXTS = ([str(i) for i in range(-40, 41)] + [f"{i}.0" for i in range(-5, 6) if i]
                + [f"{s}{i}.{f}" for s in ("", "-") for i in (0, 1, 2, 9, 10, 12) for f in
                   ("5", "25", "05", "50", "125", "99", "01", "1", "249", "251")]
                + ["1.2500", "12.000", "0.0", "0.000"])


@pytest.mark.parametrize("kw", [
    {"minimum": 3}, {"maximum": -7}, {"exclusiveMinimum": 0}, {"exclusiveMaximum": 0},
    {"minimum": -1.5, "exclusiveMaximum": 2.25}, {"exclusiveMinimum": -12.05, "maximum": 9.5},
    {"minimum": 0.25, "maximum": 0.25}, {"exclusiveMinimum": 1.249, "exclusiveMaximum": 1.251},
    {"minimum": -10, "maximum": -2}, {"minimum": 10, "maximum": 12.5},
])
@pytest.mark.parametrize("ty", ["number", "integer"])
def test_number_bounds_exact(kw, ty):
    schema = {"type": ty, **kw}
    acc, _ = compiled(schema)
    for text in NUMBER_TEXTS:
        v = Decimal(text)
        ok = v == v.to_integral_value() if ty == "integer" else True
        for k, b in kw.items():
            b = Decimal(str(b))
            ok &= {"minimum": v >= b, "maximum": v <= b, "exclusiveMinimum": v > b,
                   "exclusiveMaximum": v < b}[k]
        assert acc(text) == ok, (schema, text)


def test_number_intervals_random():
    """Random decimal bounds (either side, exclusive or not, crossing, equal) against
    Decimal comparisons, over random texts of the number universe (trailing zeros,
    -0 excluded); the interval term has no intersection (json_numbers.interval)."""
    from structgen.fsm.json.numbers import NumberTerms
    from structgen.fsm.core.terms import TermBuilder
    rng = random.Random(11)
    pool = ["0", "0.5", "1", "1.25", "2", "9.99", "10", "10.05", "0.001", "99", "100.5", "0.1", "7"]
    for _ in range(120):
        kw = {}
        for side in ("min", "max"):
            if rng.random() < 0.8:
                v = Decimal(rng.choice(pool)) * rng.choice((1, -1))
                kw[(("exclusiveMinimum" if side == "min" else "exclusiveMaximum") if rng.random() < 0.4
                    else ("minimum" if side == "min" else "maximum"))] = float(v) if v % 1 else int(v)
        if rng.random() < 0.1 and "minimum" in kw:
            kw["maximum"] = kw["minimum"]
        acc, _ = compiled({"type": "number", **kw})
        texts = {rng.choice(["", "-"]) + rng.choice(["0", "1", "2", "7", "9", "10", "99", "100", "101"])
                 + rng.choice(["", ".0", ".00", ".05", ".1", ".25", ".250", ".5", ".99", ".001", ".0001", ".999"])
                 for _ in range(60)} | {p.lstrip("-") for p in pool} | {"-" + p for p in pool if p != "0"}
        for text in texts:
            v = Decimal(text)
            ok = not (text.startswith("-") and v == 0)  # the universe has no negative zero
            for k, b in kw.items():
                b = Decimal(str(b))
                ok &= {"minimum": v >= b, "maximum": v <= b, "exclusiveMinimum": v > b,
                       "exclusiveMaximum": v < b}[k]
            assert acc(text) == ok, (kw, text)
    nt = NumberTerms(TermBuilder())
    t = nt.interval((Decimal("-1.25"), True), (Decimal("3.5"), False))
    assert not t.boolean and t.kind != 0


def test_number_universe():
    acc, _ = compiled({"type": "number"})
    for t in ["0", "-1", "1.5", "10.25", "0.001"]:
        assert acc(t)
    for t in ["01", "-0", "1.", ".5", "1e5", "+1", "--1", "1.5.2", ""]:
        assert not acc(t), t


@pytest.mark.parametrize("schema", [
    {"type": "integer", "multipleOf": 4}, {"type": "integer", "multipleOf": 25},
    {"type": "number", "multipleOf": 0.01}, {"type": "integer", "multipleOf": 7, "minimum": -50, "maximum": 80},
    {"type": "number", "multipleOf": 1.5, "minimum": 0, "maximum": 30},
    {"type": "integer", "multipleOf": 0.5},
    # unbounded, divisors of no power of ten: a residue automaton
    {"type": "integer", "multipleOf": 3}, {"type": "number", "multipleOf": 7}, {"type": "number", "multipleOf": 1.5},
    {"type": "number", "multipleOf": 0.0173}, {"type": "number", "multipleOf": 12.5, "exclusiveMinimum": -40},
    {"type": "integer", "multipleOf": 0.123456789}, {"type": "number", "multipleOf": 123456789},
    {"type": "integer", "multipleOf": 3, "minimum": 1, "maximum": 2},  # no multiple: empty
    {"not": {"type": "integer", "multipleOf": 3}}, {"type": "number", "not": {"multipleOf": 0.3}},
])
def test_multiple_of_exact(schema):
    """Every text of many numbers, accepted exactly when the value (Decimal arithmetic:
    the oracle) is a multiple within the bounds, under `not` too."""
    acc, _ = compiled(schema)
    inner = schema.get("not", schema)
    k = Decimal(str(inner["multipleOf"]))
    texts = [str(i) for i in range(-60, 120)] + [f"{i}.{f}" for i in range(-3, 12)
                                                for f in ("5", "25", "01", "10", "75", "0", "00", "3", "0173", "519")]
    texts += [str(k * n) for n in (2, 3, 17, -9, 1001)] + [str(k * n + 1) for n in (2, 17)] + ["123456789", "246913578.0"]
    for text in texts:
        v = Decimal(text)
        if v == 0 and text.startswith("-"):
            continue  # (outside the number universe)
        ok = v % k == 0 and (inner.get("type", "number") == "number" or v == v.to_integral_value())
        ok &= inner.get("minimum", v) <= v <= inner.get("maximum", v) and v > inner.get("exclusiveMinimum", v - 1)
        assert acc(text) == (ok if "not" not in schema else not ok), (schema, text)


def test_multiple_of_shortest_members_are_shortest():
    """The member each residue state gives for guesses and shortest lengths (emptiness
    checks rely on it being a shortest completion): by Decimal arithmetic it completes
    the prefix to a multiple, and no shorter text does, from prefixes of many divisors.
    (The residue term alone takes `[0-9]*(.[0-9]*)?`, an empty part worth 0: its users
    intersect it with the number universe.)"""
    import itertools

    from structgen.fsm.json.numbers import NumberTerms
    from structgen.fsm.core.terms import LAZY, NOTHING, TermBuilder

    def completes(text: str, d: Decimal) -> bool:
        got = re.fullmatch(r"([0-9]*)(?:\.([0-9]*))?", text)
        return bool(got) and Decimal((got[1] or "0") + "." + (got[2] or "0")) % d == 0
    for d in ("3", "7", "12", "1.5", "0.25", "0.07", "2.5", "0.3", "0.125", "9999"):
        tb = TermBuilder()
        x = Decimal(d)
        start = NumberTerms(tb).multiple_of(int(x.scaleb(-x.as_tuple().exponent)), -x.as_tuple().exponent)
        start = next(c for c in start.args if c.kind == LAZY)  # (after the optional sign)
        for prefix in ("", "1", "2", "5", "10", "13", "1.", "2.1", "0.0", "7.", "9.9", "12.5", "3.07", "0.01"):
            t = start
            for b in prefix.encode():
                t = tb.derive(t, b)
            if t.kind == NOTHING:  # no digits make it one
                assert not any(completes(prefix + "".join(w), x) for w in itertools.product("0123456789", repeat=4))
                continue
            w = tb.members[t.args[0]].decode()
            assert completes(prefix + w, x), (d, prefix, w)
            shorter = (prefix + "".join(c) for n in range(len(w)) for c in itertools.product("0123456789.", repeat=n))
            assert len(w) > 4 or not any(completes(u, x) for u in shorter), (d, prefix, w)


def test_multiple_of_masks_equal_token_walks(smol_vocab):
    """A residue automaton's states, at the token level: masks inside numbers equal
    token-by-token walks, with SmolLM2 (one digit a token) and with a vocabulary of
    digit runs, fractions and numbers followed by what comes after them."""
    from structgen.fsm.json.schema import build_automaton
    runs = small_vocab([bytes([b]) for b in range(256)] + [
        b"12", b"345", b"999", b"000", b"07", b"0.5", b"1.50", b".5", b".00", b"21,", b"5]", b"3.0,", b"-9", b"14]"])
    schema = {"type": "array", "items": {"anyOf": [{"type": "integer", "multipleOf": 7},
                                                   {"type": "number", "multipleOf": 1.5, "maximum": 1000}]}}
    for vocab in (smol_vocab, runs):
        auto = build_automaton(schema, vocab)
        eos = set(vocab.eos_ids)
        for prefix in [b"[", b"[1", b"[12", b"[123", b"[7,-", b"[7,-1", b"[1.", b"[1.5", b"[1.50", b"[999",
                       b"[99.", b"[3,45", b"[0"]:
            s = auto.dfa.walk(auto.start, prefix)
            assert s != 0, prefix
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), prefix


# -- strings --------------------------------------------------------------------------
def test_lengths_count_code_points():
    acc, _ = compiled({"type": "string", "minLength": 2, "maxLength": 3})
    assert acc('"éà"') and acc('"日本語"') and acc('"😀😀😀"') and acc('"a\\n"')
    assert not acc('"é"') and not acc('"abcd"') and not acc('"😀😀😀😀"')


@pytest.mark.parametrize("pattern", ["a+b", "^a+b", "a+b$", "^a|b$", "^(ab|cd)*$", "[0-9]{2,}", "x.y",
                                     "^[^a-c]*$", "\\d\\w", "(?:ab)?c", "\\\\", '"', "^\\s$",
                                     # anchors in a group or branch at either end (Python factors
                                     # `^a$|^b$` into `^(?:a$|b$)`: SchemaStore's webextension, clab...)
                                     "^ab$|^ac$|^d", "^(?:a$|b)", "(^a|^b)c", "^(\\d)(\\d)$|^(\\d)$",
                                     "(^x|^y)a((b$)|(c.+$))",
                                     # lookarounds (SchemaStore: `^(?!-)(?!.*--)[a-z0-9-]{1,32}(?<!-)$`...):
                                     # a lookahead sees the string to its end, a lookbehind from its start
                                     "^(?!ab)[a-d]+$", "^(?!(ab|ba)$)", "(?=.*\\d)a", "a(?!b)", "(?<=a)b",
                                     "^(?:(?!.*dd)[a-d]*[ab])?$", "^x(?<!ax)y", "(?<=a|b)c$", "(?<!\\s)\\d",
                                     "^(?=(.{1,3} )?.{1,3}$)", "^(?!-)(?!.*  )[a-d ]{1,5}(?<! )$",
                                     "^((?!ab|b\\d).)*$", "x((?!a).)+$",
                                     # word boundaries (ECMA's: ASCII word characters), anchors
                                     # inside (SchemaStore: hawkconfig's `\\b(?:high|low)\\b`,
                                     # yarnrc's `^(?:^[a-zA-Z]...:)?[^\\s]*$`)
                                     "\\bab", "b\\b", "\\ba\\w*\\b", "a\\B", "\\b(?:ab|c)\\b", "(?:^| )a\\b",
                                     "^(?:^a+0)?[^ ]*$", "a(?:b$|c)", "x^"])
def test_pattern_is_ecma_search(pattern):
    acc, _ = compiled({"type": "string", "pattern": pattern})
    rng = random.Random(pattern)
    alphabet = "abcdxy0123 \\\"\t\né"
    py = re.compile(pattern.replace("\\d", "[0-9]").replace("\\w", "[A-Za-z0-9_]")
                    .replace("\\s", "[ \\t\\n\\r\\f\\v\\u00a0\\ufeff]").replace("$", "\\Z"),  # ECMA $: the very end
                    re.ASCII)  # (ECMA's \b: ASCII word characters)
    for _ in range(300):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        assert acc(json.dumps(s, ensure_ascii=False)) == bool(py.search(s)), (pattern, s)


@pytest.mark.parametrize("pattern", ["^[^<>]*$", "^\\S+$", "^[a-z ]{2,6}$", "^é*$", "^[^a]+$", "^(ab)*$",
                                     "^.{3,}$"])
def test_length_bounds_with_class_runs(pattern):
    """minLength/maxLength beside an anchored run of one character class are one repeat
    of the class (StringTerms.bounded_run), not an intersection; either way the strings
    accepted are those Python's re and len accept (characters, not bytes: escapes and
    non-ASCII count one)."""
    rng = random.Random(pattern)
    py = re.compile(pattern.replace("\\S", "[^ \\t\\n\\r\\f\\v\\u00a0\\ufeff]").replace("$", "\\Z"),
                    re.DOTALL if pattern == "^é*$" else 0)
    alphabet = ["a", "b", "z", " ", "<", "é", "\n", '"', "日", "\x01"]
    for lo, hi in [(0, 3), (2, 5), (4, None), (0, 1), (3, 3)]:
        schema = {"type": "string", "pattern": pattern, "minLength": lo}
        if hi is not None:
            schema["maxLength"] = hi
        acc, cs = compiled(schema)
        run = pattern not in ("^(ab)*$",)
        assert (cs.term.boolean is False) == run, (pattern, lo, hi)  # (no AND/NOT left)
        for i in range(200):
            pool = alphabet if i % 2 else alphabet[:4]  # (half of them from letters most classes take)
            s = "".join(rng.choice(pool) for _ in range(rng.randint(0, 8)))
            ok = bool(py.search(s)) and lo <= len(s) and (hi is None or len(s) <= hi)
            assert acc(json.dumps(s, ensure_ascii=False)) == ok, (schema, s)


def test_string_escapes_canonical():
    acc, _ = compiled({"type": "string"})
    for s in ['a"b', "a\\b", "\n\t\x01", "\u2028", "\x7f", "日本"]:
        assert acc(json.dumps(s, ensure_ascii=False))
    assert not acc('"\\u0041"') and not acc('"\\/"') and not acc('"a\nb"')


def _leap_ok(hh, mm, sign, oh, om):
    utc = (hh * 60 + mm - sign * (oh * 60 + om)) % 1440
    return utc == 23 * 60 + 59


@pytest.mark.parametrize("fmt", ["time", "date-time"])
def test_leap_seconds_exhaustive_offsets(fmt):
    """Leap seconds against their arithmetic: whole texts, and which prefixes after
    ":60" stay alive (a prefix of the offsets that put hh:mm at 23:59 UTC), through the
    lazy pieces the relation loads in (json_formats._piece)."""
    acc, cs = compiled({"type": "string", "format": fmt})
    dfa = cs.dfa()
    rng = random.Random(fmt)
    for _ in range(1500):
        hh, mm, oh, om = rng.randrange(24), rng.randrange(60), rng.randrange(24), rng.randrange(60)
        sign = rng.choice((1, -1))
        if rng.random() < 0.5:  # aim at valid ones half the time
            o = (sign * (hh * 60 + mm - 1439)) % 1440
            oh, om = divmod(o, 60)
        date = f"{rng.randrange(1, 10000):04d}-0{rng.randrange(1, 10)}-{rng.randrange(10, 29)}T"
        head = (date if fmt == "date-time" else "") + f"{hh:02d}:{mm:02d}:60"
        tail = f"{'+' if sign > 0 else '-'}{oh:02d}:{om:02d}"
        assert acc(json.dumps(head + tail)) == _leap_ok(hh, mm, sign, oh, om), head + tail
        ends = {f"+{(hh * 60 + mm + 1) // 60 % 24:02d}:{(mm + 1) % 60:02d}",
                f"-{23 - hh:02d}:{59 - mm:02d}"} | ({"Z", "z"} if (hh, mm) == (23, 59) else set())
        for k in range(len(tail) + 1):
            live = dfa.walk(dfa.start, ('"' + head + tail[:k]).encode()) != 0
            assert live == any(e.startswith(tail[:k]) for e in ends), head + tail[:k]


@pytest.mark.parametrize("fmt,good,bad", [
    ("date", ["2024-02-29", "2000-02-29", "1999-12-31"], ["2023-02-29", "1900-02-29", "2024-04-31", "2024-1-01"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
    ("ipv4", ["0.0.0.0", "255.255.255.255"], ["256.1.1.1", "01.1.1.1"]),
    ("ipv6", ["::1", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4"], ["1:2:3", ":::", "1::2::3"]),
    ("email", ["a.b@example.com", '"x y"@e.org', "a@[127.0.0.1]", "a@[IPv6:::1]", "a@[IPv6:1:2:3:4:5:6:7:8]"],
     ["a..b@e.com", "@e.com", "a@[1.2.3]", "a@[::1]", "a@[IPv6:1.2.3.4]", "a@[127.0.0.1"]),
    ("duration", ["P1Y2M", "PT1M2S", "P2W"], ["P1Y2D", "PT", "P1W1D"]),
    ("uri", ["http://a.b/c?d#e", "urn:x:y"], ["/abc", "a b:c"]),
    # ucschar in the authority, path, query and fragment; iprivate in the query only; the
    # code points next to ucschar's ranges (C1 controls, U+FDD0, U+FFFE, U+E0001) out
    ("iri", ["http://ƒøø.ßår/?∂éœ=πîx#πîüx", "urn:例:子", "http://x/?q=\ue000\U0010fffd",
             "http://x/\U00010000", "http://u\ud7ff@x/\U000efffd", "http://[v1.a]/"],
     ["/abc", "âππ", "http://x/\ue000", "http://x/?#\U000f0000", "http://x/\ufdd0", "http://x/\x85",
      "http://x/\ufffe", "http://x/\U000e0001", "http://x/\U0001fffe", "http://[v1.é]/", "http://ƒøø.ßår/\n",
      "ü:b"]),
    ("iri-reference", ["âππ", "//ƒøø/x", "#ƒrägmênt", "?q=\U00100000", "", "/\uf900"],
     ["#ƒräg\\mênt", "ü:b", "#\ue000", "\ufff0", "\u0080", "a b"]),
    ("uri-template", ["", "http://example.com/{term:1}/{term}", "{+a,b.c*,d:9999}", "{=x}", "a%41b", "a😀b",
                      "x\ue000y", "{%41.b_1}", "a'b", "{#x}{;y}{?z}{&w}{/v}{.u}{,t}{!s}{@r}{|q}"],
     ["{}", "{a,,b}", "{v:0}", "{v:10000}", "{v:01}", "{a..b}", "{a.}", "{.}", "{ a}", "a b", "a<b", "%4g", "a%",
      "{a", "}", "{a}}", "a\x85b", "a\ufffeb", "{a*:3}", "{é}", "{++a}", "{a=b}", '"', "a\\b", "^", "{{a}}"]),
])
def test_formats(fmt, good, bad):
    acc, _ = compiled({"type": "string", "format": fmt})
    for s in good:
        assert acc(json.dumps(s, ensure_ascii=False)), s
    for s in bad:
        assert not acc(json.dumps(s, ensure_ascii=False)), s


# RFC 3987's ucschar and iprivate, as the RFC lists them (an oracle apart from the regexes)
_UCSCHAR = [(0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF), (0x10000, 0x1FFFD), (0x20000, 0x2FFFD),
            (0x30000, 0x3FFFD), (0x40000, 0x4FFFD), (0x50000, 0x5FFFD), (0x60000, 0x6FFFD), (0x70000, 0x7FFFD),
            (0x80000, 0x8FFFD), (0x90000, 0x9FFFD), (0xA0000, 0xAFFFD), (0xB0000, 0xBFFFD), (0xC0000, 0xCFFFD),
            (0xD0000, 0xDFFFD), (0xE1000, 0xEFFFD)]
_IPRIVATE = [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]
# random texts are joined from these: URI syntax, and code points at the ranges' edges
_IRI_PIECES = ["a", "x", ":", "/", "//", "?", "#", "@", "[", "]", "%41", "%", "1.2.3.4", "[v1.é]", "[::1]", "http:",
               " ", "\\", "é", "\xa0", "\x9f", "\ud7ff", "\uf8ff", "\uf900", "\ufdcf", "\ufdd0", "\ufdf0", "\uffef",
               "\ufff0", "\ue000", "\U0001fffd", "\U0001fffe", "\U000e0fff", "\U000e1000", "\U000f0000",
               "\U0010fffd", "\U0010ffff"]


def _in_ranges(c: str, ranges) -> bool:
    return any(a <= ord(c) <= b for a, b in ranges)


def _iri_as_uri(s: str):
    """RFC 3987 section 3.1: an IRI's URI, its ucschar (and iprivate, allowed in the
    query only) percent-encoded as UTF-8; None where a non-ASCII character is neither."""
    q, h = s.find("?"), s.find("#")
    query = range(q + 1, h if h >= 0 else len(s)) if q >= 0 and (h < 0 or q < h) else range(0)
    out = []
    for i, c in enumerate(s):
        if ord(c) >= 0x80:
            if not (_in_ranges(c, _UCSCHAR) or i in query and _in_ranges(c, _IPRIVATE)):
                return None
            c = "".join(f"%{b:02X}" for b in c.encode())
        out.append(c)
    return "".join(out)


@pytest.mark.parametrize("fmt", ["iri", "iri-reference"])
def test_iri_is_its_uri_mapping(fmt):
    """A text is an IRI (reference) iff it maps to a URI (reference) (RFC 3987 3.1), for
    random texts of URI syntax and non-ASCII code points at the edges of ucschar and
    iprivate, in every part."""
    acc, _ = compiled({"type": "string", "format": fmt})
    uri_acc, _ = compiled({"type": "string", "format": fmt.replace("iri", "uri")})
    rng = random.Random(fmt)
    seen = set()
    for _ in range(2000):
        s = "".join(rng.choice(_IRI_PIECES) for _ in range(rng.randint(0, 8)))
        if rng.random() < 0.5:
            s = "http://" + s
        u = _iri_as_uri(s)
        want = u is not None and uri_acc(json.dumps(u))
        assert acc(json.dumps(s, ensure_ascii=False)) == want, s
        seen.add((want, u is None))
    assert seen == {(True, False), (False, False), (False, True)}


def _uri_template_ok(s: str) -> bool:
    """RFC 6570 level 4, read by hand, with "'" among the literals (as the JSON Schema
    suite reads it: the RFC's ABNF leaves it out)."""
    varchars = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+"
    i = 0
    while i < len(s):
        c = s[i]
        if c == "{":
            end = s.find("}", i)
            if end < 0:
                return False
            body = s[i + 1:end]
            if body[:1] and body[0] in "+#./;?&=,!@|":
                body = body[1:]
            for spec in body.split(","):
                name, colon, n = spec.partition(":")
                if colon and not (re.fullmatch("[1-9][0-9]*", n) and int(n) < 10000):
                    return False
                name = name[:-1] if not colon and name.endswith("*") else name
                if not all(re.fullmatch(varchars, part) for part in name.split(".")):
                    return False
            i = end + 1
        elif c == "%":
            if not re.fullmatch("%[0-9A-Fa-f]{2}", s[i:i + 3]):
                return False
            i += 3
        else:
            if ord(c) >= 0x80 and not _in_ranges(c, _UCSCHAR + _IPRIVATE):
                return False
            if ord(c) < 0x80 and (ord(c) <= 0x20 or c in '\x7f"%<>\\^`{|}'):
                return False
            i += 1
    return True


def test_uri_template_against_a_hand_reader():
    """uri-template equals a reader written apart, on RFC 6570's level 1-4 examples
    (section 1.2, all valid) and random literals and expressions, often broken."""
    acc, _ = compiled({"type": "string", "format": "uri-template"})
    examples = ["{var}", "{hello}", "{+var}", "{+hello}", "{+path}/here", "here?ref={+path}", "X{#var}", "X{#hello}",
                "map?{x,y}", "{x,hello,y}", "{+x,hello,y}", "{+path,x}/here", "{#x,hello,y}", "{#path,x}/here",
                "X{.var}", "X{.x,y}", "{/var}", "{/var,x}/here", "{;x,y}", "{;x,y,empty}", "{?x,y}", "{?x,y,empty}",
                "?fixed=yes{&x}", "{&x,y,empty}", "{var:3}", "{var:30}", "{list}", "{list*}", "{keys}", "{keys*}",
                "{+path:6}/here", "{+list*}", "{#path:6}/here", "{#keys*}", "X{.var:3}", "X{.list*}", "{/var:1,var}",
                "{/list*,path:4}", "{/keys*}", "{;hello:5}", "{;list*}", "{?var:3}", "{?keys*}", "{&var:3}",
                "{&list*}", "{&keys*}", "http://example.com/~{username}/", "http://example.com/search{?q,lang}"]
    for s in examples:
        assert _uri_template_ok(s) and acc(json.dumps(s)), s
    literals = ["a", "/", "?", "&", "'", "%41", "%4", "%", " ", "é", "\x85", "\x7f", "\ue000", "\ufffe", "\U000e0fff",
                "<", "|", "{", "}"]
    names = ["a", "a", "_", "%41", "b.c", "..d", "%4", "é", ".", "", " "]
    modifiers = ["", "", "*", ":1", ":9999", ":0", ":01", ":10000", ":", "*:3", ":3*"]
    ops = ["", "+", "#", ".", "/", ";", "?", "&", "=", ",", "!", "@", "|", "++", "$", "{"]

    def expression() -> str:
        specs = ("".join(rng.choice(names) for _ in range(rng.randint(1, 2))) + rng.choice(modifiers)
                 for _ in range(rng.randint(1, 3)))
        return "{" + rng.choice(ops) + ",".join(specs) + rng.choice("}}}}}, ")
    rng = random.Random(6570)
    seen = set()
    for _ in range(3000):
        s = "".join(expression() if rng.random() < 0.5 else rng.choice(literals) for _ in range(rng.randint(0, 4)))
        want = _uri_template_ok(s)
        assert acc(json.dumps(s, ensure_ascii=False)) == want, s
        seen.add(want)
    assert seen == {True, False}


def test_iri_and_uri_template_masks_equal_token_walks(smol_vocab):
    """Masks of the formats with non-ASCII classes (ucschar, iprivate: UTF-8 byte ranges)
    equal token-by-token walks, inside a character's bytes too."""
    from structgen.fsm.json.schema import build_automaton
    eos = set(smol_vocab.eos_ids)
    for fmt, prefixes in [
            ("iri", ["", "http://", "http://ƒø", "http://x/?q=", "http://x/#a", "http://[v1.", b"http://\xf0"]),
            ("iri-reference", ["", "//ƒ", "#ƒ", b"?\xf3\xb0"]),
            ("uri-template", ["", "{", "{+a", "{a:", "{a:999", "{a.", "x😀", b"\xee"])]:
        schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}, "required": ["v"]}
        auto = build_automaton(schema, smol_vocab)
        for p in prefixes:
            s = auto.dfa.walk(auto.start, b'{"v":"' + (p if isinstance(p, bytes) else p.encode()))
            assert s != 0, p
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), (fmt, p)


def test_token_steps_equal_byte_walks(smol_vocab):
    """Walks derive a token's bytes past the DFA's known cells and register only the
    state it ends in (LazyDFA.walk): the state equals the byte-by-byte steps' (run after
    it on the same automaton: a state is its term), dead and alive, through
    intersections (a date-time's leap second, an email, `not`) and literals."""
    from structgen.fsm.json.schema import build_automaton
    rng = random.Random(3)
    data = smol_vocab.token_bytes
    for schema in [{"type": "string", "format": "date-time"}, {"type": "string", "format": "email"},
                   {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array"},
                    "name": {"not": {"const": "x"}}}, "required": ["id"]}]:
        auto = build_automaton(schema, smol_vocab)
        alive = dead = 0
        for _ in range(300):
            m = auto.matcher()
            for _ in range(rng.randrange(12)):  # a random reachable state
                ids = auto.allowed_tokens(m.state)
                ids = ids[ids < len(data)]
                if not len(ids) or not m.accept_token(int(rng.choice(ids))):
                    break
            s = m.state
            t = rng.randrange(len(data)) if rng.random() < 0.5 else int(rng.choice(auto.allowed_tokens(s)))
            if t >= len(data) or not data[t]:
                continue
            got, step = auto.dfa.walk(s, data[t]), s
            for b in data[t]:
                step = step and auto.dfa.step(step, b)
            assert got == step, (schema, s, data[t])
            alive, dead = alive + (got != 0), dead + (got == 0)
        assert alive > 50 and dead > 20, (alive, dead)


def test_dropped_automata_leave_no_cyclic_garbage(smol_vocab):
    """A compiled constraint dropped by its last user is freed by reference counting
    (TokenAutomaton.owns_source): nothing of it waits for the cyclic collector, whose
    full collection would traverse it inside some later decoding step (SchemaStore's
    azure-pipelines: ~470k objects, 0.3-0.9 s). A JSON Schema with deferred pieces (an
    enum, formats), optional keys and walked states; a regex; a choice; a Lark grammar
    (parser stacks)."""
    import gc

    from structgen import fsm
    from structgen.fsm.json.schema import build_automaton
    schema = {"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"}, "mail": {"type": "string", "format": "email"},
        "kind": {"enum": [f"k{i}" for i in range(40)]}, "n": {"type": "integer", "minimum": 3},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}}, "x": {"not": {"const": 1}},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "pattern": "^[0-9]+(m|Mi)?$"}}},
        "required": ["when", "kind"]}
    text = b'{"when":"2024-02-29T23:59:60-00:00","kind":"k17","n":12,"tags":["ab"]}'
    makers = [lambda: build_automaton(schema, smol_vocab),
              lambda: fsm.compile_regex(r"[a-z]+(-[0-9]{2,4})*", smol_vocab),
              lambda: fsm.compile_choice(["yes", "no", "maybe"], smol_vocab),
              lambda: fsm.compile_grammar('start: "[" (start ("," start)*)? "]" | /[a-z]+/', smol_vocab)]
    for i, make in enumerate(makers):
        before = set(smol_vocab._cache.get("compiled", ()))
        auto = make()
        cache = smol_vocab._cache.get("compiled", {})
        for k in set(cache) - before:  # (the cache's reference: not the last one)
            del cache[k]
        m = auto.matcher()
        m = getattr(m, "inner", m)  # (stepped by bytes: the automaton's own matcher, not the keys' tracker)
        for b in (text if i == 0 else b"ab-12" if i == 1 else b"maybe" if i == 2 else b"[ab,[c]]"):
            auto.mask(m.state)
            m.state = auto.dfa.walk(m.state, bytes([b]))
            assert m.state, (i, b)
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            del auto, m
            gc.collect()
            kinds = {type(o).__name__ for o in gc.garbage}
        finally:
            gc.garbage.clear()
            gc.set_debug(0)
        assert not kinds, (i, kinds)
    # what is left of a released builder says why it cannot build a deferred piece
    from structgen.fsm.core.terms import LAZY
    auto = build_automaton({"enum": [f"v{i}" for i in range(30)]}, smol_vocab)
    tb = auto.dfa.source.tb
    deferred = [tb._interned[(LAZY, (name,))] for name in tb._deferred]
    assert deferred
    del auto
    with pytest.raises(RuntimeError, match="released"):
        tb.body(deferred[0])


def _hostname_prefix_ok(p: str) -> bool:
    """Whether p starts some hostname (RFC 1123 LDH labels of 1-63 bytes, no hyphen at a
    label's ends, none at both positions 3 and 4, 253 bytes in all): an oracle
    written apart from the format's term."""
    labels = p.split(".")
    ldh = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")

    def shape_ok(x: str) -> bool:
        return set(x) <= ldh and x[:1] != "-" and x[2:4] != "--"
    for x in labels[:-1]:
        if not (1 <= len(x) <= 63 and shape_ok(x) and x[-1] != "-"):
            return False
    last = labels[-1]
    need = 1 if last == "" or last.endswith("-") else 0  # bytes still needed to end
    return shape_ok(last) and len(last) + need <= 63 and len(p) + need <= 253


def test_format_entry_masks_read_the_loaded_format(smol_vocab):
    """A later schema's format is a lazy program; at its first character the mask reads
    the loaded term where the program is small (automaton._loaded_head: a uuid's hex
    run), and it equals a token-by-token walk."""
    from structgen.fsm.core.automaton import LOADED_HEAD_MAX, _loaded_head
    from structgen.fsm.json.schema import build_automaton
    from structgen.fsm.core.terms import TermBuilder
    whole = small_vocab([bytes([b]) for b in range(256)] + [  # tokens past a whole value
        b'1.2.3.4"}', b'1.2.3.4"', b'a@b.co"}', b'123e4567-e89b-12d3-a456-426614174000"}'])
    for vocab in (smol_vocab, whole):
        eos = set(vocab.eos_ids)
        for fmt in ("uuid", "date-time", "email", "ipv4"):
            schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}, "required": ["v"]}
            build_automaton(schema, vocab)  # the format's program, for the next schema
            auto = build_automaton(schema, vocab)
            s = auto.dfa.walk(auto.start, b'{"v":"')
            key = auto.dfa.keys[s]
            # (every format's program is small: date-time's leap-second relation is in
            # lazy pieces of its own)
            assert _loaded_head(key, auto.dfa.source.tb) is not key, fmt
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), fmt
    tb = TermBuilder()  # a big program stays lazy: its rows load saved, step by step
    other = TermBuilder()
    big = tb.lazy("test:big", other.export(other.words(b"%d" % i for i in range(LOADED_HEAD_MAX))))
    assert _loaded_head(big, tb) is big


def test_pydantic_email_masks_equal_token_walks(smol_vocab):
    """Pydantic's EmailStr (email-validator's reading: a period in the domain, its last
    label ending with a letter, no special-use name, 254 characters): masks at the
    points that decide it equal token-by-token walks."""
    from pydantic import EmailStr

    from structgen.fsm.json.schema import build_automaton
    auto = build_automaton(EmailStr, smol_vocab)
    eos = set(smol_vocab.eos_ids)
    for prefix in [b'"', b'"a', b'"a.', b'"a@', b'"a@b', b'"a@b.', b'"a@b.c', b'"a@b.c1', b'"a@x.tes', b'"a@x.test',
                   b'"a@x.local', b'"a@x.localh', b'"' + b"x" * 200 + b"@b.c", b'"' + b"x" * 240 + b"@b.", b'"a@b-']:
        s = auto.dfa.walk(auto.start, prefix)
        if s:
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), prefix
    assert auto.dfa.walk(auto.start, b'"a@b.co"') and auto.dfa.accepting[auto.dfa.walk(auto.start, b'"a@b.co"')]


def test_hostname_prefixes_and_masks_near_the_bounds(smol_vocab):
    """A hostname's labels (1-63 bytes) and whole length (253) are length bounds beside
    unbounded shapes (TokenAutomaton._bounded_words, TermSource.bound_is_empty): which
    prefixes live equals an oracle written apart, near both bounds; masks equal
    token-by-token walks there, with SmolLM2 and with a vocabulary of long hyphen runs,
    and in an email's domain (TokenAutomaton._branch_words)."""
    from structgen.fsm.json.schema import build_automaton
    rng = random.Random(7)
    auto = build_automaton({"type": "string", "format": "hostname"}, smol_vocab)
    edges = ["a" * 61 + "-", "a" * 62 + "-", "a" * 63 + "-", "a" * 63 + "a", "ab--", "ab-", "a.-"]
    for _ in range(4000):
        parts = [rng.choice(["a" * rng.choice([1, 3, 20, 61, 62, 63, 64]), "ab-", "a--", "ab--c", "-a", "9", "",
                             rng.choice(edges)]) for _ in range(rng.randint(1, 6))]
        p = ".".join(parts)
        cut = rng.choice([5, 70, 200, 252, 253, 254, 300])
        p = p[:cut - 1] + rng.choice("a-.") if rng.random() < 0.3 and len(p) >= cut else p[:cut]
        assert (auto.dfa.walk(auto.start, b'"' + p.encode()) != 0) == _hostname_prefix_ok(p), p
    runs = small_vocab([bytes([b]) for b in range(256)] + [b"-" * k for k in range(2, 65, 3)] + [
        b"a" * 40, b"a" * 40 + b'"', b"ab." * 9, b'b"'])
    for vocab in (runs, smol_vocab):
        auto = build_automaton({"type": "string", "format": "hostname"}, vocab)
        eos = set(vocab.eos_ids)
        near = [("a" * 63 + ".") * 2 + "a" * k for k in range(50, 64)]  # 253 - the longest token - radius
        for p in ["a", "a" * 20, "a" * 50, "a" * 60, "a" * 62, "a-", "a" * 61 + "-", ("a" * 63 + ".") * 2,
                  ("a" * 63 + ".") * 3 + "a" * 40, ("a" * 63 + ".") * 3 + "a" * 60] + near[:: 1 if vocab is runs else 4]:
            s = auto.dfa.walk(auto.start, b'"' + p.encode())
            assert s != 0, p
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), p
        # an email's domain: a hostname or an address literal, masked branch by branch
        auto = build_automaton({"type": "string", "format": "email"}, vocab)
        taken = 0
        for p in ["x@", "x.y@", "x@" + "a" * 58, "x@ab.", "x@[", "x@[1.2", "x@[IPv6:"]:
            s = auto.dfa.walk(auto.start, b'"' + p.encode())
            assert s != 0, p
            taken += auto._branch_words(auto.dfa.keys[s]) is not None
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), p
        assert taken == 2  # right after "@"


# -- objects ----------------------------------------------------------------------------
def test_object_declared_order_optional_and_extra():
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
              "required": ["a"]}
    acc, cs = compiled(schema)
    assert cs.key_order == ["b", "a"]
    assert acc('{"b":1,"a":"x"}') and acc('{"a":"x"}') and acc('{"a":"x","zz":[1,{"q":null}]}')
    assert not acc('{"a":"x","b":1}')  # declared order
    assert not acc('{"b":1}')  # required
    assert not acc('{"a":"x","a":"y"}')  # a declared key twice
    assert not acc('{"a":"x","b":1}')
    # other keys only after the declared ones: a small model cannot open the object with
    # made-up keys and wander off before the required ones (it did when they could)
    assert not acc('{"zz":1,"a":"x"}') and not acc('{"zz":1,"b":1,"a":"x"}')
    assert canonical_json({"zz": 1, "a": "x", "b": 2}, cs.key_order) == '{"b":2,"a":"x","zz":1}'


def test_key_exclusion_tries_exact():
    """StringTerms.not_in (other keys of an object, a trie of deferred nodes): a string
    content is accepted iff it is none of the words, for words and contents mixing
    ASCII, non-ASCII, escaped and control characters; deferred terms refuse export."""
    from structgen.fsm.core.dfa import LazyDFA, TermSource
    from structgen.fsm.json.strings import StringTerms, encode_string
    from structgen.fsm.core.terms import LAZY, TermBuilder
    rng = random.Random(1)
    alphabet = ["a", "b", "é", '"', "\\", "\x01", "\x7f", " ", "z", "~", "日"]
    for _ in range(120):
        words = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
                 for _ in range(rng.randint(0, 5))}
        tb = TermBuilder()
        t = StringTerms(tb).not_in(words)
        dfa = LazyDFA(TermSource(tb), t)
        for _ in range(40):
            w = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
            assert bool(dfa.accepting[dfa.walk(dfa.start, encode_string(w))]) == (w not in words), (words, w)
        for raw in (b"\x01", b'"', b"\\"):  # never contents as such
            assert not dfa.accepting[dfa.walk(dfa.start, raw)]
        # a node's derivative by a plain byte is taken without its body
        # (StringTerms._not_in_step): it must be the body's, term for term
        todo, seen = [t], set()
        while todo:
            x = todo.pop()
            if x.kind != LAZY or x.id in seen:
                continue
            seen.add(x.id)
            for b in range(0x20, 0x80):
                d = tb.derive(x, b)
                assert d is tb.derive(tb.body(x), b), (words, x, chr(b))
                todo.append(d)
    with pytest.raises(ValueError, match="deferred"):
        tb.export(t)


def test_deferred_enums_and_ranges_keep_masks_exact(smol_vocab):
    """Scalar enums and digit ranges are built when the output reaches them (deferred
    terms; masks read an enum's words through it): masks at and inside them equal a
    token-by-token walk, and the compile leaves them unbuilt."""
    from structgen.fsm.json.schema import build_automaton
    words = [f"country-{i}" for i in range(30)] + ["c", "", "é"]
    schema = {"type": "object", "properties": {
        "c": {"enum": words + [1, 2.5, True, None]}, "n": {"type": "integer", "enum": list(range(100, 120))},
        "x": {"type": "number", "minimum": -2.5, "exclusiveMaximum": 1000}, "i": {"type": "integer", "maximum": 42}},
        "required": ["c", "n", "x", "i"], "additionalProperties": False}
    # tokens that run past a whole enum value (SmolLM2 has few): the value's tail too
    crafted = small_vocab([bytes([b]) for b in range(256)] + [
        b'"c","', b'"country-1"', b'"country-12","n', b'null,"n":1', b'1,', b'2.5,"', b'true,"n":10',
        b'"",', b'"\xc3\xa9",', b'101,"x":-', b'119,', b'-2.5', b'1000', b'42}', b'-0,', b'0.0,"i":4'])
    for vocab in (smol_vocab, crafted):
        auto = build_automaton(schema, vocab)
        tb = auto.dfa.source.tb
        assert not [k for k in tb._loaded if isinstance(k, tuple) and k[0] in ("json:enum", "json:range")]
        eos = set(vocab.eos_ids)
        for prefix in [b'{"c":', b'{"c":"', b'{"c":"country-', b'{"c":"country-1', b'{"c":tr', b'{"c":2',
                       b'{"c":null,"n":', b'{"c":null,"n":1', b'{"c":null,"n":11', b'{"c":1,"n":100,"x":',
                       b'{"c":1,"n":100,"x":-', b'{"c":1,"n":100,"x":-2.', b'{"c":1,"n":100,"x":999.9,"i":',
                       b'{"c":1,"n":100,"x":0,"i":-']:
            s = auto.dfa.walk(auto.start, prefix)
            assert s != 0, prefix
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), prefix


def test_bounded_string_masks_equal_token_walks(smol_vocab):
    """Along a string with maxLength below the longest token, the tokens with a quote or
    an escape are split into the string's characters and what follows its quote, the
    latter walked once per string (TokenAutomaton._split_walk): masks at every count
    (minLength too) equal token-by-token walks, with SmolLM2 and with a vocabulary of
    long tokens that end the string, escape or stay in it."""
    from structgen.fsm.json.schema import build_automaton
    longs = small_vocab([bytes([b]) for b in range(256)] + [b"a" * k + b'"' for k in (3, 8, 15, 20)] + [
        b"a" * 12 + b'","b', b'\\n' * 6, b"ab\\t" * 4, b"x" * 18, b'"}', b'","', b"\\u00", b'a\\"b' * 3])
    for vocab in (longs, smol_vocab):
        eos = set(vocab.eos_ids)
        for lo, hi in ((0, 16), (2, 12)):
            schema = {"type": "object", "properties": {"a": {"type": "string", "minLength": lo, "maxLength": hi},
                                                       "b": {"type": "integer"}}, "required": ["a"]}
            auto = build_automaton(schema, vocab)
            for n in range(hi + 1):
                s = auto.dfa.walk(auto.start, b'{"a":"' + b"a" * n)
                if vocab is smol_vocab and n % 4:
                    continue
                assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), (lo, hi, n)
            assert auto._rest_lives, (lo, hi)  # the split was taken


def test_alternative_string_runs_masks_equal_token_walks(smol_vocab, monkeypatch):
    """Two object variants alike up to a string with different maxLength (snapcraft's
    oneOf at `summary`): the state is an alternation of two runs, whose chain is followed
    by its structure (automaton._class_successor), not its rows; masks at every count
    equal token-by-token walks, past the shorter bound too."""
    import structgen.fsm.core.automaton as automaton
    from structgen.fsm.json.schema import build_automaton
    used = []
    real = automaton._class_successor
    monkeypatch.setattr(automaton, "_class_successor", lambda *a: used.append(r := real(*a)) or r)
    longs = small_vocab([bytes([b]) for b in range(256)] + [b"a" * k for k in (5, 9, 16, 23)] + [
        b"a" * 12 + b'","t', b'a","u":', b"aaaa\\n", b'a"}', b"\\u00e9a"])
    variants = [{"type": "object", "properties": {"s": {"type": "string", "maxLength": hi}, key: {"type": kind}},
                 "required": ["s", key], "additionalProperties": False}
                for hi, key, kind in ((6, "t", "integer"), (14, "u", "boolean"))]
    for vocab in (longs, smol_vocab):
        eos = set(vocab.eos_ids)
        auto = build_automaton({"oneOf": variants}, vocab)
        for n in range(16):
            s = auto.dfa.walk(auto.start, b'{"s":"' + b"a" * n)
            assert (s == 0) == (n > 14)
            if s and not (vocab is smol_vocab and n % 3):
                assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), n
    assert any(x is not None for x in used)


def test_string_runs_count_escapes_exactly(smol_vocab):
    """A JSON string's tokens with escapes count member by member (`\\n` is one
    character, `\\u00` one begun) and those with the closing quote go on into what
    follows (TokenAutomaton._split_walk): masks equal token-by-token walks at every
    count of short bounds, minLength too, with a vocabulary of escapes and quotes."""
    from structgen.fsm.json.schema import build_automaton
    escapes = small_vocab([bytes([b]) for b in range(256)] + [
        b"\\n", b"\\n\\n", b"a\\nb", b'\\"', b'\\"",', b"\\\\", b"\\u00e9", b"\\u00", b"\\u", b"\\q", b"\\/",
        b"\\u0041", b"\\u001f", b"ab\\t", b"\\t\\t\\t\\t", b"\xc3\xa9\\n", b"\\", b'\\"}', b"x\\", b'a"}',
        b'ab",', b'\\n",', b'",', b'"', b'"x', b'\\t"}'])
    for vocab in (escapes, smol_vocab):
        eos = set(vocab.eos_ids)
        for lo, hi in ((0, None), (0, 1), (0, 2), (2, 4)):
            string = {"type": "string", "minLength": lo} if hi is None else \
                {"type": "string", "minLength": lo, "maxLength": hi}
            auto = build_automaton({"type": "object", "properties": {"s": string}, "required": ["s"]}, vocab)
            for prefix in [b'{"s":"', b'{"s":"a', b'{"s":"\\n', b'{"s":"ab', b'{"s":"ab\\t']:
                s = auto.dfa.walk(auto.start, prefix)
                if s == 0:
                    continue
                assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), (lo, hi, prefix)
            assert auto._rest_lives, (lo, hi)


def test_max_length_over_characters_of_several_bytes(smol_vocab):
    """maxLength beside a pattern over every character (escapes, non-ASCII): the bound
    counts characters of several bytes (dfa.char_bound). Which prefixes live equals
    arithmetic on characters; masks equal token-by-token walks far from the bound
    (where clip_repeats drops it) and near it."""
    from structgen.fsm.core.automaton import clip_repeats
    from structgen.fsm.json.schema import build_automaton
    from structgen.fsm.core.terms import LAZY
    longest = len(smol_vocab.columns.count)
    hi = 100 + longest  # far enough to clip at the first counts
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "[0-9]{3}", "maxLength": hi}},
              "required": ["s"]}
    auto = build_automaton(schema, smol_vocab)
    for n in range(hi - 5, hi + 2):  # one-byte characters (first: no search has met these states)
        for text, need in [("a" * n, 3), ("a" * (n - 2) + "77", 1)]:
            assert (auto.dfa.walk(auto.start, ('{"s":"' + text).encode()) != 0) == (n + need <= hi), (n, need)
    rng = random.Random(5)
    units = ["a", "é", "\\n", "日", "7", "7", " ", "\\u0001"]  # (JSON texts of one character)
    for _ in range(300):
        chars = [rng.choice(units) for _ in range(rng.choice([rng.randint(0, 12), rng.randint(hi - 6, hi + 1)]))]
        text = "".join("7" if c == "7" else "." for c in chars)
        need = 0 if "777" in text else 3 - (len(text) - len(text.rstrip("7")))
        live = auto.dfa.walk(auto.start, ('{"s":"' + "".join(chars)).encode()) != 0
        assert live == (len(chars) + need <= hi), (len(chars), text[-4:])
    # what the bound and A's radius rest on: a JSON character's shortest text is one
    # byte, and "\u" needs 4 more (a smaller radius would drop bounds that matter)
    from structgen.fsm.core.dfa import TermSource
    from structgen.fsm.json.formats import format_term
    from structgen.fsm.json.source import JsonTermBuilder
    from structgen.fsm.json.strings import StringTerms
    tb = JsonTermBuilder()
    lazy, src = StringTerms(tb).any_char, TermSource(tb)  # (a later builder's: the lazy program)
    assert lazy.kind == LAZY and src.minlen(lazy) == 1 and src.radius(lazy) >= 4
    format_term(StringTerms(JsonTermBuilder()), "uuid")  # (its program, for the next builder)
    uuid = format_term(StringTerms(tb), "uuid")  # a lazy program: minlen exact, not a lower bound
    assert uuid.kind == LAZY and src.minlen(uuid) == 36 == src.radius(uuid)
    eos, clipped = set(smol_vocab.eos_ids), 0
    for k in [0, 3, 40, hi - longest - 3, hi - longest - 2, hi - 60, hi - 20, hi - 3, hi - 1]:
        for text in ["é" * k, "7" + "\\n" * (k - 1) if k else ""]:
            s = auto.dfa.walk(auto.start, ('{"s":"' + text).encode())
            if s == 0:
                continue
            key = auto.dfa.keys[s]
            clipped += clip_repeats(key, auto.dfa.source, len(smol_vocab.columns.count)) is not key
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), (k, text[:3])
    assert clipped >= 4  # (the fast path is taken far from the bound)


def test_min_chars_equal_shortest_completions():
    """TermSource.min_chars (the fewest JSON characters that complete a term, from a
    character boundary or part way through one: an escape's backslash, a UTF-8 lead
    byte) equals a search for the shortest completion with `re`, over texts of a, b, é,
    a newline, a quote and U+0001 (encodings of one, two and six bytes)."""
    import itertools
    from structgen.fsm.core.dfa import CHAR_START, TermSource, char_step
    from structgen.fsm.json.source import JsonTermBuilder
    from structgen.fsm.json.strings import StringTerms, encode_string
    alphabet = ["a", "b", "é", "\n", '"', "\x01"]
    patterns = ["(ab|é\n)*b", "a*\"\"b|é{3}", "(é|\n){2,4}a?", "[ab]*é[^b]\n", "a{0,3}b\"{2}|\n*é",
                "\x01{2}a|b\x01*é"]
    rng = random.Random(3)
    for pattern in patterns:
        tb = JsonTermBuilder()
        st, src = StringTerms(tb), TermSource(tb)
        t = st.fullmatch(pattern)
        completions = [""] + ["".join(w) for k in range(1, 6) for w in itertools.product(alphabet, repeat=k)]
        for _ in range(25):
            prefix = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
            nxt = rng.choice(alphabet)
            cut = rng.randint(0, len(encode_string(nxt)) - 1)  # bytes of the next character
            data = encode_string(prefix) + encode_string(nxt)[:cut]
            x, lex = t, CHAR_START
            for b in data:
                x, lex = tb.derive(x, b), char_step(lex, b)
            heads = [prefix] if cut == 0 else [prefix + c for c in alphabet
                                                if encode_string(c).startswith(encode_string(nxt)[:cut])]
            want = min((len(w) for h in heads for w in completions if re.fullmatch(pattern, h + w)), default=None)
            got = src.min_chars(x, lex)
            if want is None:
                assert got >= 6, (pattern, data)  # (dead, or longer than the search)
            else:
                assert got == want, (pattern, data, got, want)


def test_format_within_max_length_masks_equal_token_walks(smol_vocab, monkeypatch):
    """An email within maxLength: the bound counts JSON characters of several bytes
    (dfa.char_bound; a quoted local part's `\\"` is one), tokens too short to reach
    it take the format's mask, the longer ones are checked by the characters they need
    (TokenAutomaton._need, TermSource.min_chars) and, where many are, those that keep
    the format where it is (the local part's letters) by one test (_loop_class). Masks
    near the bound equal token-by-token walks, with SmolLM2 and with a vocabulary of
    long local-part runs, escapes, dots and domain ends; the fast path must be taken."""
    import structgen.fsm.core.automaton as am
    from structgen.fsm.json.schema import build_automaton
    loops = []
    loop_class = am.TokenAutomaton._loop_class
    monkeypatch.setattr(am.TokenAutomaton, "_loop_class",
                        lambda self, a, chars: loops.append(loop_class(self, a, chars)) or loops[-1])
    runs = small_vocab([bytes([b]) for b in range(256)] + [b"a" * k for k in (5, 9, 14, 20, 26)] + [
        b"ab.c" * 4, b"a@b.c", b'@x.io"}', b'\\"ab' * 3, b'\\"@y.z', b"a\\" * 3, b".a" * 7, b"x.y" * 5,
        b"ab-c" * 4, b'a"}', b"a" * 11 + b"@", b"\\u0041" * 2])
    eos = set(smol_vocab.eos_ids)
    hi = 40
    schema = {"type": "object", "properties": {"m": {"type": "string", "format": "email", "maxLength": hi}},
              "required": ["m"]}
    for vocab, checked, least in ((runs, 8, 30), (smol_vocab, am.BOUNDED_MAX_CHECKED, 3)):
        monkeypatch.setattr(am, "BOUNDED_MAX_CHECKED", checked)  # (few runs: by one test too)
        auto = build_automaton(schema, vocab)
        taken = 0
        for first, unit in [(b"", b"a"), (b'\\"', b"a\\\\"), (b"ab.", b"c."), (b"a@b", b"c")]:
            text = first
            while len(text) < hi + 6:
                s = auto.dfa.walk(auto.start, b'{"m":"' + text)
                if s == 0:
                    break
                if vocab is runs or len(text) > hi - 24 and len(text) % 3 == 0:
                    taken += auto._bounded_words(auto.dfa.keys[s]) is not None
                    assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), (first, text)
                text += unit
        assert taken >= least, taken
    assert sum(x is not None for x in loops) >= 6


def test_pattern_within_max_length_masks_equal_token_walks(smol_vocab):
    """A plain ASCII pattern within maxLength: tokens too short to reach the bound take
    the mask of the pattern alone (one for every count), the longer ones are checked by
    the bound they need (TokenAutomaton._bounded_words). Masks at every count equal
    token-by-token walks, with SmolLM2 and with a vocabulary of long runs of the
    pattern's bytes, some leaving the string; the fast path must be taken (but by runs of
    one class, which are a repeat, no intersection: their masks are checked alike)."""
    from structgen.fsm.json.schema import build_automaton
    runs = small_vocab([bytes([b]) for b in range(256)] + [b"-" * k for k in (8, 16, 24, 31, 40, 64)] + [
        b"a" * k for k in (9, 17, 33)] + [b"ab-" * 5, b'a"', b'ab"}', b'-a",', b"a" * 20 + b'"}', b"9" * 12,
        b"-" * 20 + b'a"}', b"1-" * 9])
    cases = [  # pattern, minLength, maxLength, first bytes, the unit walked after them
        ("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", 0, 63, b"n", b"a"),
        ("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", 0, 45, b"1", b"-a"),
        ("^[a-z]+-[0-9]{3}$", 0, 40, b"q", b"a"),  # radius 4
        ("^[a-z-]*$", 1, 50, b"", b"ab-"),  # a class run: one repeat (StringTerms.bounded_run)
        ("^[a-zé]+$", 0, 30, b"\xc3\xa9", b"a\xc3\xa9"),  # one too, and not one byte per character
    ]
    runs_of_a_class = {"^[a-z-]*$", "^[a-zé]+$"}
    eos = set(smol_vocab.eos_ids)
    for vocab in (runs, smol_vocab):
        for pattern, lo, hi, first, unit in cases:
            schema = {"type": "object", "properties": {"s": {
                "type": "string", "pattern": pattern, "minLength": lo, "maxLength": hi}}, "required": ["s"]}
            auto = build_automaton(schema, vocab)
            text, taken = first, 0
            while len(text) <= hi:
                s = auto.dfa.walk(auto.start, b'{"s":"' + text)
                if s == 0:  # too long for the rest of a member (4 bytes at most)
                    assert len(text) > hi - 4, (pattern, text)
                    break
                if vocab is runs or len(text) % 5 == 0 or len(text) > hi - 12:
                    taken += auto._bounded_words(auto.dfa.keys[s]) is not None
                    assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), (pattern, len(text))
                text += unit
            assert bool(taken) == (pattern not in runs_of_a_class), pattern


def test_open_object_key_masks_equal_token_walks(smol_vocab):
    """At key positions of open objects, a key other than the object's own ones is
    masked as any string content minus the own keys' continuations
    (TokenAutomaton._cofinite_words): every mask must equal a token-by-token walk,
    mid-key and at own-key ends too (`kind":"` must die: kind is an integer)."""
    from structgen.fsm.json.schema import build_automaton
    schema = {"type": "object", "properties": {
        "kind": {"type": "integer"}, "name": {"type": "string"},
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "app": {"enum": ["x"]}}}}}
    auto = build_automaton(schema, smol_vocab)
    eos = set(smol_vocab.eos_ids)
    data = smol_vocab.token_bytes
    for prefix in [b'{"', b'{"k', b'{"kin', b'{"kind', b'{"kinds', b'{"x', b'{"kind":1,"', b'{"kind":1,"na',
                   b'{"kind":1,"spec":{"', b'{"kind":1,"spec":{"ap', b'{"kind":1,"spec":{"app',
                   b'{"kind":1,"spec":{"replicas":2,"', b'{"kind":1,"\\u0001', b'{"\xc3\xa9']:
        s = auto.dfa.walk(auto.start, prefix)
        assert s != 0, prefix
        assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), prefix
    m = auto.matcher()  # an own key's end: the token that closes it as another key dies
    for t in [b'{"', b"kind"]:
        assert m.accept_token(data.index(t)), t
    assert data.index(b'":"') not in set(auto.allowed_tokens(m.state).tolist())


def test_additional_properties_false_and_schema():
    acc, _ = compiled({"properties": {"a": {}}, "additionalProperties": False})
    assert acc('{"a":1}') and acc("{}") and not acc('{"b":1}')
    acc, _ = compiled({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}})
    assert acc('{"a":"s","b":1}') and not acc('{"a":1,"b":"s"}') and not acc('{"b":1,"a":1}')
    # keys known elsewhere are other keys in an object that does not declare them (no
    # keyword intersects objects): after its own keys, in any order, wherever they come
    # in the key order
    d = {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}
    acc, cs = compiled({"properties": {"b": {}, "d": d, "a": {}, "c": {}}})
    assert cs.key_order == ["b", "d", "a", "c"]
    assert acc('{"d":{"a":1,"c":2,"b":3}}') and acc('{"d":{"c":2,"b":3}}') and acc('{"d":{"b":3,"c":2}}')
    assert not acc('{"d":{"b":2,"a":1}}') and not acc('{"d":{"a":1,"a":2}}') and not acc('{"d":{"a":1,"c":"s"}}')
    assert cs.canonical({"c": 0, "d": {"c": 2, "b": 3, "a": 1}, "b": 4}) == '{"b":4,"d":{"a":1,"b":3,"c":2},"c":0}'
    assert cs.canonical({"d": {"b": 3, "a": 1}}, indent=1) == '{\n "d": {\n  "a": 1,\n  "b": 3\n }\n}'
    # with an allOf whose objects intersect, every known key has its place
    acc, _ = compiled({"properties": {"d": d, "a": {}, "b": {}, "c": {}},
                       "allOf": [{"required": ["d"], "minProperties": 1},
                                 {"if": {"required": ["a"]}, "then": {"required": ["b"]}}]})
    assert acc('{"d":{"a":1,"b":3,"c":2}}') and not acc('{"d":{"a":1,"c":2,"b":3}}')
    # a type list merges per type (_type_split): an object that intersects nothing, or null
    acc, _ = compiled({"properties": {"d": d, "a": {}, "b": {}, "c": {}},
                       "allOf": [{"required": ["d"], "minProperties": 1}, {"type": ["object", "null"]}]})
    assert acc('{"d":{"a":1,"b":3,"c":2}}') and acc('{"d":{"a":1,"c":2,"b":3}}') and acc("null")
    assert not acc("{}") and not acc('"s"')
    # one that merges into one object intersects nothing: own keys first
    acc, _ = compiled({"properties": {"d": d, "a": {}, "b": {}, "c": {}},
                       "allOf": [{"required": ["d"], "minProperties": 1}]})
    assert acc('{"d":{"a":1,"b":3,"c":2}}') and acc('{"d":{"a":1,"c":2,"b":3}}') and not acc('{}')
    # an allOf that only says which keys are present intersects nothing: own keys first
    acc, _ = compiled({"properties": {"d": d, "a": {}, "b": {}, "c": {}}, "allOf": [{"required": ["d"]}]})
    assert acc('{"d":{"a":1,"b":3,"c":2}}') and acc('{"d":{"a":1,"c":2,"b":3}}') and not acc('{"a":1}')


def test_canonical_text_follows_the_schema():
    """CompiledSchema.canonical puts an object's own keys first where objects slot only
    their own keys: under each anyOf branch in turn, the first arrangement accepted."""
    schema = {"anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"properties": {"b": {"$ref": "#/$defs/o"}}, "required": ["b"]}],
              "$defs": {"o": {"properties": {"c": {}}}}}
    acc, cs = compiled(schema)
    assert cs.own_slots is not None
    for inst, text in [({"b": 2, "a": 1}, '{"a":1,"b":2}'),  # both branches: the first one's
                       ({"b": 2, "a": "x"}, '{"b":2,"a":"x"}'),  # the second branch only
                       ({"a": "x", "b": {"a": 1, "c": 2}}, '{"b":{"c":2,"a":1},"a":"x"}')]:
        assert cs.canonical(inst) == text and acc(text) == valid(schema, inst), inst
    assert not acc('{"a":"x","b":2}')  # the second branch's own key comes first there
    for inst in [{"a": "x"}, {"c": {}}]:  # invalid: written under the first branch
        assert cs.canonical(inst) == json.dumps(inst, separators=(",", ":")) and not acc(cs.canonical(inst))


def test_objects_beside_each_other_keep_the_key_order():
    """Two parts of one schema that may both hold objects are intersected: their objects
    then slot every known key, in key order (own keys only would disagree)."""
    for schema, text in [({"type": "object", "properties": {"a": {}}, "anyOf": [{"properties": {"b": {}}}]},
                          '{"a":1,"b":2}'),
                         ({"type": "array", "items": {"properties": {"a": {}}},
                           "anyOf": [{"items": {"properties": {"b": {}}}}]}, '[{"a":1,"b":2}]'),
                         ({"properties": {"b": {}, "a": {}}, "const": {"b": 1, "a": 2}}, '{"b":1,"a":2}')]:
        acc, cs = compiled(schema)
        assert acc(text) and cs.canonical(json.loads(text)) == text, schema


def test_allow_extra_properties_false_option():
    acc, _ = compiled({"properties": {"a": {"type": "integer"}}}, allow_extra_properties=False)
    assert acc('{"a":1}') and not acc('{"a":1,"b":2}')


def test_min_max_properties_pattern_properties_names():
    schema = {"patternProperties": {"^x": {"type": "integer"}}, "propertyNames": {"maxLength": 3},
              "minProperties": 1, "maxProperties": 2}
    acc, _ = compiled(schema)
    for inst in [{}, {"x1": 1}, {"x1": "s"}, {"abcd": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, {"xa": 1, "y": None}]:
        assert acc(canonical_json(inst, [])) == valid(schema, inst), inst


def test_dependent_required_and_schemas():
    schema = {"properties": {"a": {}, "b": {}, "c": {}}, "dependentRequired": {"a": ["b"]},
              "dependentSchemas": {"c": {"properties": {"a": {"type": "integer"}}, "required": ["a"]}}}
    acc, cs = compiled(schema)
    for inst in [{}, {"a": 1}, {"a": 1, "b": 2}, {"c": 1}, {"c": 1, "a": 1, "b": 0}, {"c": 1, "a": "s", "b": 0}, {"b": 1}]:
        assert acc(cs.canonical(inst)) == valid(schema, inst), inst


# -- arrays ------------------------------------------------------------------------------
def test_arrays_prefix_items_contains():
    schema = {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": {"type": "boolean"},
              "minItems": 1, "maxItems": 4, "contains": {"const": True}, "maxContains": 1}
    acc, _ = compiled(schema)
    for inst in [[], ["a"], ["a", 1], ["a", 1, True], ["a", 1, True, True], ["a", 1, False, True], [1],
                 ["a", 1, True, False, False]]:
        assert acc(canonical_json(inst, [])) == valid(schema, inst), inst


def _stepped_along(dfa, text: bytes) -> int:
    """The state after `text`, every byte's successor of each state along it made first
    (the states a mask's walk meets: their emptiness checks run)."""
    s = dfa.start
    for b in text:
        for c in range(256):
            dfa.step(s, c)
        s = dfa.step(s, b)
    return s


@pytest.mark.parametrize("array, holds", [
    # no item can hold the contains: types apart, or each item's intersection empty
    ({"type": "array", "items": {"type": "object"}, "contains": {"const": 0}}, False),
    ({"type": "array", "items": {"type": "object", "properties": {"d": {}}, "required": ["d"],
                                 "additionalProperties": False}, "contains": {"enum": [True, {"k": 1}]}}, False),
    ({"type": "array", "items": {"type": "object"}, "contains": {"const": 0}, "minContains": 0, "maxContains": 1},
     True),
    # more contained items than the array may hold
    ({"type": "array", "items": {}, "maxItems": 1, "contains": {"enum": [True, 1]}, "minContains": 2}, False),
    # only a prefix item can hold it (_Compiler._prefix_count_list)
    ({"type": "array", "prefixItems": [{"type": ["null", "string"]}, {}], "items": {
        "type": "object", "properties": {"d": {}}, "required": ["d"], "additionalProperties": False},
      "contains": {"enum": [True, {"k": 1}, "a"]}, "maxContains": 1}, False),
])
def test_contains_no_item_can_hold(array, holds):
    """`contains` that no item can hold, or more contained items than maxItems: the array
    is nothing where minContains asks for one (every array where it does not); one that
    only prefix items can hold is counted over them alone. Decided when compiling
    (_Compiler._holders). As an optional property's schema, the first mask where its
    key may come (or, for the prefix, a mask past it) used to search every array of
    objects for an item that holds it: TooLargeError (after ~20 s at the default
    max_states, ~2 s at the 20k given here). Instances agree with jsonschema."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "arr": array}, "required": ["n"]}
    cs = schema_to_term(schema)
    dfa = cs.dfa(max_states=20_000)
    check = jsonschema.Draft202012Validator(schema)
    pool = [{"n": 1}, {"n": 1, "arr": []}, {"n": 1, "arr": [{}]}, {"n": 1, "arr": [{"d": 1}, {"d": 2}]},
            {"n": 1, "arr": [0]}, {"n": 1, "arr": [True, 1]}, {"n": "x"}, {"n": 1, "arr": ["a", {"d": 1}]},
            {"n": 1, "arr": [None, {"d": 1}]}, {"n": 1, "arr": ["a"]}, {"n": 1, "arr": ["b", True, {"d": 1}]},
            {"n": 1, "arr": ["a", True]}, {"n": 1, "arr": [None, True, {"d": 2}, {"d": 3}]}]
    for inst in pool:
        assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), inst
    assert cs.accepts(cs.canonical({"n": 1, "arr": [{}]}), dfa) == holds
    for text in (b'{"n":1,"arr":', b'{"n":1,"arr":[null,{"d":1},'):
        _stepped_along(dfa, text)


def test_contains_in_a_short_array_counts_place_by_place():
    """An array of at most CONTAINS_COUNTED_PLACES items counts `contains` place by
    place: once an object begun as no `{"k": 1}` leaves no place for one, the state is
    nothing at once. Before, deciding it searched every object that item could still
    become (TooLargeError mid-output, ~1 s at the 20k given here). Instances agree with
    jsonschema."""
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}, "e": {
        "type": "array", "items": {"type": "object"}, "maxItems": 2, "contains": {"enum": [{"k": 1}]},
        "minContains": 1, "maxContains": 1}}}
    cs = schema_to_term(schema)
    dfa = cs.dfa(max_states=20_000)
    check = jsonschema.Draft202012Validator(schema)
    for inst in [{"n": 1}, {"n": 1, "e": []}, {"n": 1, "e": [{"k": 1}]}, {"n": 1, "e": [{"x": 1}]},
                 {"n": 1, "e": [{"x": 1}, {"k": 1}]}, {"n": 1, "e": [{"k": 1}, {"k": 1}]}, {"n": 1, "e": [{"k": 2}]},
                 {"n": 1, "e": [{"k": 1}, {}]}]:
        assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), inst
    for text, alive in ((b'{"n":1,"e":[{"x', True), (b'{"n":1,"e":[{"x":1},{"y', False), (b'{"n":1,"e":[{"k":1', True)):
        assert (_stepped_along(dfa, text) != 0) == alive, text


def test_unique_items_finite_domain_exact():
    schema = {"type": "array", "items": {"enum": ["a", "b", 1]}, "uniqueItems": True}
    acc, _ = compiled(schema)
    for inst in [[], ["a"], ["a", "b", 1], ["a", "a"], [1, "b", 1], ["b", "a"]]:
        assert acc(canonical_json(inst, [])) == valid(schema, inst), inst
    with pytest.raises(SchemaError, match="uniqueItems"):
        schema_to_term({"type": "array", "items": {"type": "number", "maximum": 9}, "uniqueItems": True})


# -- unevaluatedProperties beside applicators -----------------------------------------------
_DEFS = {"base": {"properties": {"a": {"type": "string"}}, "required": ["a"]},
         "pat": {"patternProperties": {"^x-": {"type": "integer"}}}}


@pytest.mark.parametrize("schema", [
    {"allOf": [{"$ref": "#/$defs/base"}, {"properties": {"b": {}}}], "unevaluatedProperties": False},
    {"$ref": "#/$defs/base", "properties": {"c": {"type": "integer"}}, "unevaluatedProperties": {"type": "boolean"}},
    {"anyOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]},
               {"properties": {"b": {"type": "string"}}, "required": ["b"]}], "unevaluatedProperties": False},
    {"oneOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"$ref": "#/$defs/pat"}],
     "properties": {"c": {}}, "unevaluatedProperties": False},
    {"if": {"properties": {"a": {"const": "s"}}, "required": ["a"]}, "then": {"properties": {"b": {}}},
     "else": {"properties": {"c": {}}}, "unevaluatedProperties": False},
    {"if": {"patternProperties": {"^x-": {"type": "integer"}}}, "unevaluatedProperties": False},
    {"properties": {"a": {}}, "dependentSchemas": {"a": {"properties": {"b": {}}}}, "unevaluatedProperties": False},
    {"allOf": [{"properties": {"a": {}}, "unevaluatedProperties": True}], "properties": {"b": {"type": "integer"}},
     "unevaluatedProperties": False},
    {"allOf": [{"properties": {"a": {}}}], "not": {"properties": {"b": {"const": 1}}, "required": ["b"]},
     "unevaluatedProperties": {"type": "integer"}},
    {"allOf": [{"$ref": "#/$defs/base"}, {"oneOf": [{"properties": {"b": {}}, "required": ["b"]},
                                                     {"properties": {"c": {}}, "required": ["c"]}]}],
     "unevaluatedProperties": False},
])
def test_unevaluated_properties_beside_applicators_match_jsonschema(schema):
    """unevaluatedProperties over allOf, $ref, anyOf (overlapping branches: the keys of
    every branch that holds count), oneOf, if/then/else (if without then/else too),
    dependentSchemas, a nested one, not: every object of up to three keys from a pool
    (values of two types) is accepted exactly when jsonschema validates it."""
    import itertools
    schema = {**schema, "$defs": _DEFS}
    cs = schema_to_term(schema)
    dfa = cs.dfa()
    keys, values = ["a", "b", "c", "x-1", "z"], ["s", 1, True]
    seen = {True: 0, False: 0}
    for n in range(4):
        for ks in itertools.combinations(keys, n):
            for vs in itertools.product(values, repeat=n):
                inst = dict(zip(ks, vs))
                ok = valid(schema, inst)
                seen[ok] += 1
                assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert seen[True] and seen[False]


@pytest.mark.parametrize("schema", [
    {"allOf": [{"prefixItems": [{"type": "integer"}]}], "unevaluatedItems": False},
    {"prefixItems": [{"type": "string"}], "anyOf": [{"prefixItems": [True, {"type": "integer"}]},
                                                    {"prefixItems": [True, True, {"const": True}]}],
     "unevaluatedItems": {"type": "boolean"}},
    {"oneOf": [{"prefixItems": [{"type": "integer"}]}, {"items": {"type": "string"}}], "unevaluatedItems": False},
    {"if": {"prefixItems": [{"const": 1}]}, "then": {"prefixItems": [True, True]}, "unevaluatedItems": False},
    {"contains": {"type": "integer"}, "unevaluatedItems": {"type": "boolean"}},
    {"allOf": [{"contains": {"const": 1}}, {"contains": {"const": "s"}}], "unevaluatedItems": False},
    {"$ref": "#/$defs/tuple", "unevaluatedItems": {"type": "integer"}, "$defs": {"tuple": {"prefixItems": [True]}}},
    {"allOf": [{"prefixItems": [True], "unevaluatedItems": True}], "prefixItems": [{"type": "integer"}],
     "unevaluatedItems": False},
    {"type": ["array", "object"], "properties": {"a": {}}, "dependentSchemas": {"a": {"contains": {"const": 1}}},
     "allOf": [{"properties": {"b": {}}}], "unevaluatedProperties": False, "unevaluatedItems": False},
])
def test_unevaluated_items_beside_applicators_match_jsonschema(schema):
    """unevaluatedItems over allOf (contains too: an item matched by one is evaluated),
    anyOf, oneOf, if/then, $ref, a nested one, and beside unevaluatedProperties (a
    dependent schema's contains does not count for arrays): every array of up to four
    items from a pool (and a few objects) is accepted exactly when jsonschema validates it."""
    import itertools
    cs = schema_to_term(schema)
    dfa = cs.dfa()
    seen = {True: 0, False: 0}
    insts = [list(x) for n in range(5) for x in itertools.product([1, "s", True], repeat=n)]
    insts += [{}, {"a": 1}, {"a": 1, "b": 2}, {"c": 1}, {"b": [1]}]
    for inst in insts:
        ok = valid(schema, inst)
        seen[ok] += 1
        assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert seen[True] and seen[False]


def test_unevaluated_properties_refused_where_branches_nest():
    """A oneOf branch with a oneOf of its own (the test suite's "dynamic evaluation inside
    nested refs"): refused, naming the keyword and the place; lenient mode drops it."""
    schema = {"properties": {"v": {"oneOf": [{"oneOf": [{"properties": {"a": {}}, "required": ["a"]},
                                                        {"properties": {"b": {}}, "required": ["b"]}]},
                                             {"properties": {"c": {}}, "required": ["c"]}],
                                   "unevaluatedProperties": False}}}
    with pytest.raises(SchemaError) as e:
        schema_to_term(schema)
    assert e.value.keyword == "unevaluatedProperties" and e.value.pointer == "#/properties/v"
    with pytest.warns(SchemaWarning, match="unevaluatedProperties"):
        cs = schema_to_term(schema, strict=False)
    assert cs.accepts('{"v":{"a":1,"z":2}}')


# -- composition ----------------------------------------------------------------------------
@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "integer"}, {"minimum": 2}]},
    {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "string", "pattern": "^a"}]},
    {"allOf": [{"minimum": 1}, {"maximum": 5}], "type": "integer"},
    {"not": {"type": "object", "properties": {"a": {"type": "string"}}}},
    {"if": {"type": "integer"}, "then": {"minimum": 3}, "else": {"type": "string"}},
    {"type": "array", "items": {"not": {"const": 2}}},
])
def test_composition_matches_jsonschema(schema):
    acc, cs = compiled(schema)
    insts = [None, True, 0, 1, 2, 3, 7, 2.5, "", "a", "ab", "ba", [], [1], [2], [1, 2], {}, {"a": "x"}, {"a": 1}]
    for inst in insts:
        assert acc(cs.canonical(inst)) == valid(schema, inst), (schema, inst)


_KINDS = {"anyOf": [{"properties": {"kind": {"pattern": "^a$", "doNotSuggest": True}, "x": {"type": "integer"}},
                     "required": ["kind", "x"]},
                    {"properties": {"kind": {"pattern": "^b$"}, "y": {"type": "string"}}, "required": ["kind"]},
                    {"properties": {"kind": {"pattern": "^c"}}}]}


@pytest.mark.parametrize("schema", [
    # an object beside an anyOf of objects (azure-pipelines' tasks): a union of merged objects
    {"type": "object", "properties": {"kind": {"enum": ["a", "b", "cc", 3]}, "x": {}, "y": {}, "z": {"type": "null"}},
     "additionalProperties": False, **_KINDS},
    # the same with a oneOf whose branches are disjoint (told apart by kind)
    {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {}, "y": {}},
     "additionalProperties": False, "oneOf": [{"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                                               "required": ["kind", "x"]},
                                              {"properties": {"kind": {"const": "b"}}, "required": ["kind"]}]},
    # a $ref beside vendor keys only is its target; beside `enum` a type filters the values
    {"properties": {"kind": {"$ref": "#/$defs/s", "ignoreCase": "value", "enum": ["a", 1, "b", None]},
                    "x": {"$ref": "#/$defs/i", "doNotSuggest": True}}, "$defs": {"s": {"type": "string"},
                                                                              "i": {"type": "integer"}}},
    # no type in common: nothing, without compiling either branch's other types
    {"properties": {"x": {"allOf": [{"type": "string"}, {"type": "object", "properties": {"a": {}}}]}},
     "required": ["x"]},
])
def test_merges_instead_of_intersections(schema):
    """Schemas that are unions or merges of plain schemas compile without an
    intersection (no AND/NOT in the term): an object beside an anyOf (or a disjoint
    oneOf) of objects as a union of merged objects (_Compiler._union_distributed), a
    $ref beside vendor keys as its target, an enum beside a $ref to a type as the
    values of that type, an allOf whose branches share no type as nothing; the
    same instances as jsonschema accepts, over a pool of objects."""
    import itertools
    acc, cs = compiled(schema)
    assert not cs.term.boolean
    pool = [("kind", ["a", "b", "cc", "c", 3, None]), ("x", [1, "s"]), ("y", ["s", 2]), ("z", [None, 0])]
    seen = {True: 0, False: 0}
    for n in range(4):
        for group in itertools.combinations(pool, n):
            for vals in itertools.product(*[v for _, v in group]):
                inst = dict(zip([k for k, _ in group], vals))
                ok = valid(schema, inst)
                seen[ok] += 1
                assert acc(cs.canonical(inst)) == ok, inst
    assert seen[False] > 10 and (seen[True] > 10 or "allOf" in json.dumps(schema)), seen



def test_union_distribution_is_bounded(monkeypatch):
    """An object beside an anyOf is distributed only while branches x properties stays
    within MAX_UNION_SLOTS (each branch copies the properties); above, the intersection
    as before, with the same instances accepted."""
    import itertools

    from structgen.fsm.json.schema import _Compiler
    schema = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {}, "y": {}},
              "anyOf": [{"properties": {"kind": {"const": "a"}}, "required": ["x"]},
                        {"properties": {"kind": {"const": "b"}}}]}
    for most, boolean in ((6, False), (5, True)):
        monkeypatch.setattr(_Compiler, "MAX_UNION_SLOTS", most)
        acc, cs = compiled(schema)
        assert cs.term.boolean == boolean
        for kind, x in itertools.product([None, "a", "b", "c"], [None, 1]):
            inst = {k: v for k, v in (("kind", kind), ("x", x)) if v is not None}
            assert acc(cs.canonical(inst)) == valid(schema, inst), (most, inst)

def test_allof_branches_take_the_types_in_common():
    """An allOf branch without a type, beside one that has one, is compiled for that
    type only where it merges with it (_Compiler._narrowed): `{"pattern": p}` beside a
    string enum, under an object with many keys, builds no open object of every key
    (the canonical universe below an intersection slots every key of the document)."""
    props = {f"k{i}": {"type": "integer"} for i in range(150)}
    props["name"] = {"allOf": [{"anyOf": [{"enum": ["ab"]}, {"enum": ["ba"]}, {"enum": ["x"]}]},
                               {"pattern": "^[ab]+$", "ignoreCase": "value"}]}
    schema = {"type": "object", "properties": props}
    acc, cs = compiled(schema)
    assert len(cs.tb) < 20_000, len(cs.tb)
    for name, ok in (("ab", True), ("ba", True), ("x", False), ("abc", False)):
        assert acc(cs.canonical({"name": name, "k3": 1})) == ok == valid(schema, {"name": name, "k3": 1})


@pytest.mark.parametrize("schema", [
    {"type": "integer", "enum": [1, 2.0, 2.5, "1", None, True, [1]]},
    {"type": ["string", "null"], "enum": ["a", 1, None, {"a": 1}], "title": "t"},
    {"type": "number", "enum": [0, -1.5, 1e2, False]},
    {"type": ["array", "object"], "enum": [[1, "a"], {"a": [1]}, "x"]},
    {"type": "boolean", "enum": [1, "true"]},   # nothing of that type: no value at all
])
def test_typed_enum_keeps_the_values_of_its_types(schema):
    """`type` + `enum` filters the values (fsm/json_schema.py) instead of intersecting."""
    acc, cs = compiled(schema)
    insts = [None, True, False, 0, 1, 2, -1.5, 2.5, 100, "a", "x", "1", "true", [1], [1, "a"],
             {"a": 1}, {"a": [1]}]
    for inst in insts:
        assert acc(cs.canonical(inst)) == valid(schema, inst), (schema, inst)
    for text in ["1.0", "2.00", "-1.50", "100.0"]:  # the other texts of a number (no exponents)
        assert acc(text) == valid(schema, json.loads(text)), (schema, text)


@pytest.mark.parametrize("schema", [
    {"enum": [1, 10, 12, -3, 2.5, 100, 7.0, "1", "10", "a\"b", "é", "", [1], None]},
    {"type": ["integer", "string"], "enum": [3, 30, 31, 300, "3", "30", "3\n"]},
])
def test_enum_tries_match_jsonschema(schema):
    """Enum values are factored into tries (strings; integers before their shared
    optional zero fraction): the same texts as one constant per value."""
    acc, cs = compiled(schema)
    insts = [1, 10, 12, 120, -3, 3, 30, 31, 300, 2.5, 100, 7, 11, "1", "10", "3", "30", "3\n",
             'a"b', "é", "", "a", [1], None, 0]
    for inst in insts:
        assert acc(cs.canonical(inst)) == valid(schema, inst), (schema, inst)
    for text in ["10.0", "12.00", "-3.0", "2.50", "7.00", "300.0", "1.5", "100.5"]:  # no exponents
        assert acc(text) == valid(schema, json.loads(text)), (schema, text)


def test_enum_with_malformed_type_is_refused():
    with pytest.raises(SchemaError, match="type"):
        schema_to_term({"type": "strng", "enum": ["a"]})


def test_refs_and_recursion():
    schema = {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "properties": {"n": {"$ref": "#/$defs/pos"}}}
    acc, _ = compiled(schema)
    assert acc('{"n":3}') and not acc('{"n":0}')
    tree = {"$defs": {"t": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {
        "type": "array", "items": {"$ref": "#/$defs/t"}}}, "required": ["v"], "additionalProperties": False}},
        "$ref": "#/$defs/t"}
    with pytest.raises(SchemaError, match="recursive") as e:
        schema_to_term(tree, recursion="refuse")
    assert e.value.keyword == "$ref"
    # default: exact, as lazy terms (else through the grammar path), at any depth
    acc, cs = compiled(tree)
    assert cs.recursion is not None
    deep = '{"v":0,"kids":[' * 30 + '{"v":1}' + "]}" * 30
    assert acc(deep) and acc('{"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]}')
    assert not acc('{"v":1,"kids":[{"v":"x"}]}') and not acc('{"kids":[]}') and not acc(deep[:-1])
    # explicit unrolling
    acc, _ = compiled(tree, max_recursion_depth=2)
    assert acc('{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}')
    assert not acc('{"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[{"v":4,"kids":[{"v":5}]}]}]}]}')


def test_draft04_identifiers():
    """In draft-04 a schema's URI is its `id`; a `$id` there is no keyword (SchemaStore's
    cryproj writes JSON pointers into `$id`s), so its references resolve as jsonschema's
    Draft4Validator resolves them. In 2020-12 the same `$id`s name resources, inside which
    the reference points nowhere: refused."""
    schema = {"definitions": {"c": {"enum": ["a", "b"]}}, "type": "object", "properties": {"x": {
        "$id": "/properties/x", "type": "array", "items": {"$id": "/properties/x/items", "$ref": "#/definitions/c"}}}}
    old = dict(schema, **{"$schema": "http://json-schema.org/draft-04/schema#"})
    cs = schema_to_term(old)
    for inst in [{"x": ["a", "b"]}, {"x": ["c"]}, {"x": []}, {"x": "a"}]:
        assert cs.accepts(canonical_json(inst, cs.key_order)) == jsonschema.Draft4Validator(old).is_valid(inst), inst
    with pytest.raises(SchemaError, match="points nowhere"):
        schema_to_term(schema)


@pytest.mark.parametrize("draft,check", [("http://json-schema.org/draft-04/schema#", jsonschema.Draft4Validator),
                                         ("http://json-schema.org/draft-07/schema#", jsonschema.Draft7Validator),
                                         (None, jsonschema.Draft202012Validator)])
def test_draft04_integers_have_no_fraction(draft, check):
    """Draft-04's integer is a number written without a fraction: 2.0 is none (jsonschema's
    Draft4Validator), where from draft-06 on it is one (SchemaStore's WordPress theme, a
    draft-04 schema, let walks write `"version":2.0`). Enums and consts keep their
    values' every text: 1.0 equals 1 in all drafts."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": -3}, "e": {"enum": [1, "x"]},
                                               "m": {"type": ["integer", "string"], "multipleOf": 2},
                                               "t": {"type": "integer", "enum": [2, 3.0]},  # (filtered, or met)
                                               "a": {"allOf": [{"type": ["integer", "string"]},  # (merged)
                                                               {"enum": [2, "x", 3.0]}]}}}
    if draft:
        schema["$schema"] = draft
    cs = schema_to_term(schema)
    for text in ['{"n":2}', '{"n":2.0}', '{"n":-3.00}', '{"n":2.5}', '{"e":1.0}', '{"e":1}', '{"m":4.0}',
                 '{"m":4}', '{"m":"4.0"}', '{"n":0}', '{"t":2}', '{"t":2.0}', '{"t":3}', '{"t":3.0}', '{"a":2}',
                 '{"a":2.0}', '{"a":3}', '{"a":3.0}', '{"a":"x"}']:
        assert cs.accepts(text) == check(schema).is_valid(json.loads(text)), (draft, text)


def test_long_objects_compile():
    """An object of 1000 required members (concatenations re-nest in a loop: 200 passed
    Python's stack), and a recursive union of two objects that share 400 leading members,
    as lazy terms and on the grammar path (which merges them one member a rule: the
    rules are made by a worklist, not nested calls, as in argo-workflows' Kubernetes
    definitions)."""
    keys = {f"k{i}": {"type": "string"} for i in range(1000)}
    cs = schema_to_term({"type": "object", "properties": keys, "required": list(keys)})
    body = ",".join(f'"k{i}":"x"' for i in range(1000))
    assert cs.accepts("{" + body + "}") and not cs.accepts("{" + body[:-8] + "}")
    keys = {f"k{i}": {"type": "string"} for i in range(3000)}  # (optional: rows and derivatives
    # along 3000 nullable members, made in a loop; megalinter's configuration passed the stack)
    cs = schema_to_term({"type": "object", "properties": keys, "additionalProperties": False})
    assert cs.accepts('{"k2999":"x"}') and cs.accepts('{"k7":"x","k5":"y"}') is False and cs.accepts("{}")
    assert cs.tb.matches(cs.term, b'{"k1":"x","k2998":"y"}')
    keys = {f"k{i}": {"type": "string"} for i in range(400)}
    node = {"anyOf": [{"type": "object", "properties": {**keys, side: {"$ref": "#/$defs/node"}}, "required": list(keys),
                       "additionalProperties": False} for side in "ab"]}
    schema = {"$defs": {"node": node}, "$ref": "#/$defs/node"}
    for recursion in ("auto", "grammar"):
        cs = schema_to_term(schema, recursion=recursion)
        assert cs.recursion == ("lazy" if recursion == "auto" else "grammar")
        leaf = {k: "x" for k in keys}
        for inst in [leaf, dict(leaf, a=leaf), dict(leaf, a=dict(leaf, b=leaf)), dict(leaf, a={"k0": "x"}),
                     {"k0": "x"}]:
            assert cs.accepts(canonical_json(inst, cs.key_order)) == valid(schema, inst)


@pytest.mark.parametrize("schema, instances", [
    # adonisrc's metaFiles: a uniqueItems beside a oneOf that takes no array says nothing
    ({"type": "array", "items": {"uniqueItems": True, "maxItems": 1, "oneOf": [
        {"type": "string"}, {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}]}},
     [["a", {"pattern": "x"}], [["a"]], [{}], ["a", "a"]]),
    ({"minLength": 2, "anyOf": [{"type": "integer"}, {"$ref": "#/$defs/t"}], "$defs": {"t": {"enum": [True, "ab"]}}},
     [1, "ab", "a", True, None]),
])
def test_keywords_of_types_the_applicators_exclude(schema, instances):
    """Keywords of a type that the schema's applicators exclude (its oneOf, $ref, enum)
    say nothing: no refusal for them, and the texts jsonschema accepts."""
    cs = schema_to_term(schema)
    for inst in instances:
        assert cs.accepts(canonical_json(inst, cs.key_order)) == valid(schema, inst), inst


@pytest.mark.parametrize("instance", [
    {}, {"room": {"on": "always", "rooms": ["a:b"]}}, {"room": {"rooms": []}}, {"room": {"on": "x"}},
    {"room": {"other": 1}}, {"room": {"on": "never"}, "tag": {"name": "x"}}, {"tag": {"name": 1}},
    {"deep": {"to": {"on": "always"}}}, {"deep": {"to": {"on": 5}}}])
def test_refs_into_places_that_are_no_keyword(instance):
    """A JSON pointer may reach a schema under a key that is no keyword (travis'
    `#/definitions/notificationObject/slack`): its object keys count as any other
    schema's (they were missing from the key order, so such an object took `{}` only)."""
    schema = {"definitions": {"notification": {"slack": {
        "type": "object", "additionalProperties": False, "properties": {
            "on": {"enum": ["always", "never"]}, "rooms": {"type": "array", "items": {"type": "string"}}}}}},
        "x-tags": {"tag": {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": False}},
        "type": "object", "additionalProperties": False, "properties": {
            "room": {"$ref": "#/definitions/notification/slack"}, "tag": {"$ref": "#/x-tags/tag"},
            "deep": {"type": "object", "properties": {"to": {"$ref": "#/x-tags/chain"}}}}}
    schema["x-tags"]["chain"] = {"$ref": "#/definitions/notification/slack"}  # (a target found through another)
    cs = schema_to_term(schema)
    for whitespace in ("compact", "flexible"):
        cs = schema_to_term(schema, whitespace=whitespace)
        text = canonical_json(instance, cs.key_order, indent=None if whitespace == "compact" else 1)
        assert cs.accepts(text) == valid(schema, instance), text


def test_refs_to_other_documents_match_jsonschema(smol_vocab):
    """$ref into documents the user passes (documents={uri: schema}): relative and
    absolute URIs, references relative to a document's own URI, from one document into
    another, a recursion through two documents; acceptance equals jsonschema's over a
    registry of the same documents. Without them: refused, naming the URI."""
    import itertools

    import referencing

    from structgen.fsm.json.schema import compile_json_schema
    defs = {"$id": "https://example.com/defs.json", "$defs": {
        "money": {"type": "number", "multipleOf": 0.5, "minimum": 0},
        "item": {"type": "object", "properties": {"price": {"$ref": "#/$defs/money"}, "code": {"$ref": "code.json"},
                                                  "parts": {"type": "array", "items": {"$ref": "root.json"}}},
                 "required": ["price"], "additionalProperties": False}}}
    docs = {"https://example.com/defs.json": defs, "https://example.com/code.json": {"type": "string", "maxLength": 2},
            "https://example.com/root.json": {"$ref": "defs.json#/$defs/item"},
            "local.json": {"$ref": "https://example.com/defs.json#/$defs/money"}}
    schema = {"type": "object", "properties": {
        "total": {"$ref": "local.json"},
        "items": {"type": "array", "items": {"$ref": "https://example.com/defs.json#/$defs/item"}, "maxItems": 2}},
        "required": ["total"], "additionalProperties": False}
    registry = referencing.Registry().with_resources(
        (uri, referencing.Resource.from_contents(doc, referencing.jsonschema.DRAFT202012)) for uri, doc in docs.items())
    v = jsonschema.Draft202012Validator(schema, registry=registry)
    with pytest.raises(SchemaError, match="documents=.*local.json") as e:
        schema_to_term(schema)
    assert e.value.keyword == "$ref" and e.value.pointer == "#/properties/total"
    cs = schema_to_term(schema, documents=docs)
    assert cs.recursion is not None  # (the recursion through root.json)
    dfa = cs.dfa()
    items = [{"price": p, **extra} for p in (1, 1.5, 1.25, -1) for extra in
             ({}, {"code": "ab"}, {"code": "abc"}, {"parts": [{"price": 2}]}, {"parts": [{"price": 2, "code": 7}]})]
    seen = {True: 0, False: 0}
    for total, its in itertools.product((0, 2.5, 2.25), [[]] + [[x] for x in items] + [items[:2], items[5:8]]):
        inst = {"total": total, "items": its}
        ok = v.is_valid(inst)
        seen[ok] += 1
        assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert seen[True] > 10 and seen[False] > 10
    for bad in ({"x.json#frag": {}}, {"": {}}, {**docs, "https://example.com/defs.json#": {}}):
        with pytest.raises(SchemaError, match="documents"):
            schema_to_term(schema, documents=bad)
    # cached by the documents' texts too
    a = compile_json_schema(schema, smol_vocab, documents=docs)
    assert compile_json_schema(schema, smol_vocab, documents=docs) is a
    assert compile_json_schema(schema, smol_vocab, documents={**docs, "https://example.com/code.json": {}}) is not a


_LIST = {"$id": "list", "type": "array", "items": {"$dynamicRef": "#item"}, "maxItems": 2,
         "$defs": {"default": {"$dynamicAnchor": "item"}}}
_TREE = {"$id": "https://example.com/tree", "$dynamicAnchor": "node", "type": "object", "properties": {
    "data": {"type": "integer"}, "children": {"type": "array", "items": {"$dynamicRef": "#node"}, "maxItems": 2}}}


@pytest.mark.parametrize("name, schema, documents", [
    # one generic list, its item type set by each resource that refers to it
    ("lists", {"$id": "https://example.com/root", "type": "object", "additionalProperties": False, "properties": {
        "nums": {"$ref": "numlist"}, "strs": {"$ref": "strlist"}, "any": {"$ref": "list"}},
        "$defs": {"list": _LIST,
                  "numlist": {"$id": "numlist", "$ref": "list", "$defs": {"t": {"$dynamicAnchor": "item", "type": "number"}}},
                  "strlist": {"$id": "strlist", "$ref": "list", "$defs": {"t": {"$dynamicAnchor": "item", "type": "string"}}}}},
     None),
    # a tree made strict by the resource that refers to it: the recursion goes through the strict root
    ("strict tree", {"$id": "https://example.com/strict", "$dynamicAnchor": "node", "$ref": "tree",
                     "unevaluatedProperties": False}, {"https://example.com/tree": _TREE}),
    ("strict tree, one document", {"$id": "https://example.com/strict", "$dynamicAnchor": "node", "$ref": "tree",
                                   "unevaluatedProperties": False, "$defs": {"tree": _TREE}}, None),
    # not bookended (the target has an $anchor only), and a pointer: plain references
    ("plain", {"$id": "https://example.com/p", "type": "object", "properties": {
        "a": {"$ref": "inner"}, "b": {"$dynamicRef": "#/$defs/n"}},
        "$defs": {"n": {"$dynamicAnchor": "x", "type": "number"}, "s": {"$dynamicAnchor": "data", "type": "string"},
                  "inner": {"$id": "inner", "type": "object", "properties": {"data": {"$dynamicRef": "#data"}},
                            "$defs": {"d": {"$anchor": "data", "type": "integer"}}}}}, None),
    # a scope left behind (the `if`'s) is not used; the `then`'s is
    ("left scope", {"$id": "https://example.com/main", "if": {"$id": "first", "$defs": {
        "t": {"$dynamicAnchor": "t", "type": "number"}}}, "then": {"$id": "second", "$ref": "start", "$defs": {
            "t": {"$dynamicAnchor": "t", "type": ["null", "object"]}}},
        "$defs": {"start": {"$id": "start", "type": "object", "properties": {"data": {"$dynamicRef": "inner#t"}}},
                  "inner": {"$id": "inner", "$defs": {"t": {"$dynamicAnchor": "t", "type": "string"}}}}}, None),
])
def test_dynamic_refs_match_jsonschema(name, schema, documents):
    """$dynamicRef resolved by the dynamic scope where the compiler walks (copies per
    scope: fsm/json_dynamic.py): a generic list whose items each referrer sets (two
    referrers in one document), a tree made strict by its referrer (recursive, in one
    document and across two), references that are plain (no bookend, a pointer), a scope
    that evaluation has left; every instance of a pool of values (up to three keys,
    nested) is accepted exactly when jsonschema (with the same documents) validates it."""
    import itertools

    import referencing
    registry = referencing.Registry().with_resources(
        (uri, referencing.Resource.from_contents(doc, referencing.jsonschema.DRAFT202012))
        for uri, doc in (documents or {}).items())
    v = jsonschema.Draft202012Validator(schema, registry=registry)
    cs = schema_to_term(schema, documents=documents)
    dfa = cs.dfa()
    leaves = [1, 2.5, "s", None, [1], ["s", 2], [], {"data": 1}, {"data": "s"}, {"x": 1}]
    trees = [{"data": 1, "children": [{"data": 2}]}, {"children": [{"data": 2, "x": 3}]},
             {"children": [{"children": [{"data": 3}]}, {}]}, {"children": [{"children": [{"daat": 3}]}]}]
    keys = ["data", "children", "x", "a", "b", "nums", "strs", "any"]
    seen = {True: 0, False: 0}
    for n in range(3):
        for ks in itertools.combinations(keys, n):
            for vs in itertools.product(leaves + trees + [[x] for x in trees] + [[{}, trees[0]]], repeat=n):
                inst = dict(zip(ks, vs))
                ok = v.is_valid(inst)
                seen[ok] += 1
                assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert seen[True] >= 10 and seen[False] >= 10, seen
    with pytest.raises(SchemaError, match="must be a string") as e:
        schema_to_term({"properties": {"a": {"$dynamicRef": 3}}})
    assert e.value.keyword == "$dynamicRef" and e.value.pointer == "#/properties/a"


# -- whitespace, limits -----------------------------------------------------------------------
def test_flexible_whitespace_bounded():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    acc, cs = compiled(schema, whitespace="flexible")
    inst = {"a": [1, 2]}
    assert acc(canonical_json(inst, cs.key_order)) and acc(canonical_json(inst, cs.key_order, indent=2))
    assert acc(json.dumps(inst, indent=4)) and acc(' { "a" : [ 1 , 2 ] } ')
    assert not acc("{" + " " * 21 + '"a":[]}')
    acc_c, _ = compiled(schema)
    assert not acc_c(json.dumps(inst))  # compact by default: no spaces


def test_large_bounds_compile_fast():
    t0 = time.perf_counter()
    acc, _ = compiled({"type": "object", "properties": {
        "s": {"type": "string", "minLength": 5000, "maxLength": 10000},
        "xs": {"type": "array", "items": {"type": "integer"}, "maxItems": 1000}}})
    assert time.perf_counter() - t0 < 1.0
    assert acc('{"s":"' + "x" * 6000 + '"}')
    assert not acc('{"s":"' + "x" * 10001 + '"}')
    assert acc('{"xs":[' + ",".join(["1"] * 1000) + "]}")
    assert not acc('{"xs":[' + ",".join(["1"] * 1001) + "]}")


def test_max_depth_bounds_free_values():
    acc, _ = compiled({}, max_depth=3)
    assert acc("[[[1]]]") and not acc("[[[[1]]]]")


def test_unsupported_keywords_name_pointer():
    with pytest.raises(SchemaError) as e:
        schema_to_term({"properties": {"p": {"type": "string", "pattern": "(a)\\1"}}})
    assert e.value.keyword == "pattern" and e.value.pointer == "#/properties/p"
    with pytest.raises(SchemaError, match="format"):
        schema_to_term({"type": "string", "format": "idn-hostname"})
    with pytest.raises(SchemaError, match="reference"):
        schema_to_term({"$ref": "http://example.com/x.json"})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        schema_to_term({"type": "string", "format": "idn-hostname"}, strict=False)
    assert any(issubclass(x.category, SchemaWarning) for x in w)


def test_many_pattern_properties_partitioned_by_their_overlaps():
    """Past MAX_PATTERN_PROPERTIES_PARTITION (5) patternProperties, only the sets of
    patterns a key can match together are compiled (appsettings' 8 names, pyrseas' 6
    prefixes: more than 5 was refused): 7 patterns, two of which overlap, exact
    against jsonschema on random objects; patterns that all overlap past
    MAX_PATTERN_SUBSETS ways are refused naming the keyword and place."""
    from structgen.fsm.json.schema import MAX_PATTERN_SUBSETS
    pats = {"^a": {"type": "integer"}, "^ab": {"minimum": 5}, "^c$": {"type": "string"},
            "^d": {"type": "boolean"}, "^e": {"type": "null"}, "^f": {"type": "string", "maxLength": 1},
            "^g": {"type": "array"}}
    schema = {"type": "object", "properties": {"z": {"type": "integer"}}, "patternProperties": pats,
              "additionalProperties": False}
    acc, cs = compiled(schema)
    v = jsonschema.Draft202012Validator(schema)
    rng = random.Random(11)
    values = [1, 7, "x", "xy", True, None, [], 2.5]
    seen = {True: 0, False: 0}
    for _ in range(400):
        keys = rng.sample(["a", "ab1", "abc", "c", "cc", "d1", "e", "f", "g", "h", "z"], rng.randint(0, 3))
        inst = {k: rng.choice(values) for k in keys}
        ok = v.is_valid(inst)
        seen[ok] += 1
        assert acc(cs.canonical(inst)) == ok, inst
    assert min(seen.values()) > 50, seen
    wide = {f"^{'x' * i}": {"type": "integer"} for i in range(1, 8)}  # (each a prefix of the next: 128 ways)
    with pytest.raises(SchemaError, match=f"more than {MAX_PATTERN_SUBSETS} combinations") as e:
        schema_to_term({"type": "object", "properties": {"q": {"patternProperties": wide}}})
    assert e.value.keyword == "patternProperties" and e.value.pointer == "#/properties/q"


def test_custom_formats_refused_or_annotations():
    """A format the specification does not define (SchemaStore's color, cron,
    mime-type...) is refused naming it and the option; custom_formats='ignore' reads it
    as an annotation (any string, and the other keywords still hold), while a standard
    format it cannot enforce (idn-hostname) is still refused, and known ones still
    hold. Against jsonschema, which asserts no format."""
    schema = {"type": "object", "properties": {"c": {"type": "string", "format": "color", "maxLength": 4},
                                               "d": {"type": "string", "format": "date"}}, "required": ["c"]}
    with pytest.raises(SchemaError, match="'color' is not supported .*custom_formats='ignore'") as e:
        schema_to_term(schema)
    assert e.value.pointer == "#/properties/c"
    with pytest.raises(SchemaError, match="'idn-hostname' is not supported \\(strict"):
        schema_to_term({"type": "string", "format": "idn-hostname"}, custom_formats="ignore")
    with pytest.raises(SchemaError, match="custom_formats must be"):
        schema_to_term(schema, custom_formats="yes")
    acc, cs = compiled(schema, custom_formats="ignore")
    v = jsonschema.Draft202012Validator(schema)
    for inst in [{"c": "red"}, {"c": "#fff"}, {"c": "blue!"}, {"c": 3}, {"d": "2024-01-01"},
                 {"c": "", "d": "2024-01-01"}]:
        assert acc(cs.canonical(inst)) == v.is_valid(inst), inst
    assert not acc('{"c":"red","d":"2024-13-01"}')  # (date still asserted)
    acc, cs = compiled({"format": "color"}, custom_formats="ignore")
    assert acc('"red"') and acc("1") and acc("{}")


def test_closed_objects_reopen_under_not():
    # with allow_extra_properties=False a missing additionalProperties reads as false, but
    # not under `not` (its complement would accept invalid instances)
    schema = {"$defs": {"o": {"type": "object", "properties": {"a": {"type": "integer"}}}},
              "properties": {"x": {"$ref": "#/$defs/o"}, "y": {"not": {"$ref": "#/$defs/o"}}}}
    acc, cs = compiled(schema, allow_extra_properties=False)
    assert acc('{"x":{"a":1}}') and not acc('{"x":{"a":1,"b":2}}')
    assert not acc('{"y":{"a":1,"b":2}}')  # valid under o, so invalid under not o
    assert acc('{"y":{"a":"s"}}') and acc('{"y":3}')


@pytest.mark.parametrize("schema", [
    {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"properties": {"b": {"type": "string"}}, "additionalProperties": False}]},
    {"allOf": [{"properties": {"a": {"minimum": 2}}, "additionalProperties": {"type": "string"}},
               {"properties": {"a": {"maximum": 5}, "b": {"maxLength": 1}}}], "required": ["b"]},
    {"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
     "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {"type": "string"}}}]},
])
def test_all_of_objects_merged_exact(schema):
    acc, cs = compiled(schema)
    insts = [{}, {"a": 1}, {"a": 3}, {"a": 1, "b": "s"}, {"a": 3, "b": "s"}, {"a": 3, "b": "st"}, {"b": "s"},
             {"a": 1, "c": "x"}, {"a": 3, "b": "s", "c": 2}, {"id": 1}, {"id": 1, "name": "n"}, {"name": "n"},
             {"id": "x"}, 5, "s", None]
    for inst in insts:
        assert acc(cs.canonical(inst)) == valid(schema, inst), (schema, inst)


def _presence_schema(rng: random.Random, depth: int = 0):
    """A random schema that only says which of the keys a-d an object has."""
    pick = rng.random()
    if depth >= 2 or pick < 0.35:
        return {"required": rng.sample("abcd", rng.randint(1, 2))}
    if pick < 0.5:
        return {"not": _presence_schema(rng, depth + 1)}
    kw = rng.choice(["anyOf", "oneOf", "allOf"])
    return {kw: [_presence_schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]}


def test_presence_parts_are_variants():
    """anyOf / oneOf / not / allOf parts of an object schema that only say which of its
    keys are present are written as variants of the object (keys required or forbidden:
    no intersection, no complement in the term, and objects keep their own slots);
    every set of keys is accepted exactly when jsonschema validates it. Without `type`,
    other values are accepted where the parts hold on them (every `required` does)."""
    import itertools
    rng = random.Random(7)
    for case in range(90):
        schema = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcd"}}
        if case % 3 == 0:
            schema["additionalProperties"] = False
        if case % 3 == 1:
            del schema["type"]
        for kw in rng.sample(["anyOf", "oneOf", "not", "allOf"], rng.randint(1, 3)):
            sub = _presence_schema(rng)
            schema[kw] = sub if kw == "not" else [sub, _presence_schema(rng)]
        cs = schema_to_term(schema)
        assert not cs.term.boolean and cs.own_slots is not None, schema  # nothing meets
        dfa = cs.dfa()
        check = jsonschema.Draft202012Validator(schema)
        for n in range(5):
            for keys in itertools.combinations("abcd", n):
                inst = {k: i for i, k in enumerate(keys)}
                assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), (schema, inst)
        for other in ("x", [], None, 1.5):
            assert cs.accepts(cs.canonical(other), dfa) == check.is_valid(other), (schema, other)


def test_pattern_named_groups():
    """ECMA named groups `(?<name>...)` (a semver pattern's parts) are plain groups;
    error positions are the pattern's own (a lookbehind that would look before the repeat
    it stands in: refused)."""
    cs = schema_to_term({"type": "string", "pattern": r"^(?<major>0|[1-9]\d*)\.(?<minor>0|[1-9]\d*)$"})
    dfa = cs.dfa()
    assert [cs.accepts(t, dfa) for t in ('"1.2"', '"10.0"', '"01.2"', '"1."', '"[(?<x]"')] == \
        [True, True, False, False, False]
    cs = schema_to_term({"type": "string", "pattern": r"^[(?<x]\(?<y$"})  # not groups
    assert cs.accepts('"x<y"') and cs.accepts('"?(<y"') and not cs.accepts('"xy"')
    for pattern, pos in ((r"(?<a>x)(", 7), (r"(?<a>x)((?<=y)z)*", 8)):
        with pytest.raises(SchemaError, match=f"at position {pos}\n"):
            schema_to_term({"type": "string", "pattern": pattern})


def _regex_module_validator(schema):
    """jsonschema, with `pattern` read by the `regex` module (jsonschema's re refuses \\p;
    regex has its own Unicode tables: an engine and data apart from ours)."""
    regex = pytest.importorskip("regex")

    def pattern(validator, patrn, instance, _schema):
        if validator.is_type(instance, "string") and not regex.search(patrn, instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator, patterns, instance, _schema):
        if validator.is_type(instance, "object"):
            for patrn, sub in patterns.items():
                for k, v in instance.items():
                    if regex.search(patrn, k):
                        yield from validator.descend(v, sub, path=k, schema_path=patrn)
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, {
        "pattern": pattern, "patternProperties": pattern_properties})(schema)


def test_pattern_unicode_property_escapes():
    """ECMA `\\p{...}` (General_Category) in pattern and patternProperties: against jsonschema
    with the regex module's \\p on chosen texts, against unicodedata on random ones."""
    import unicodedata
    schema = {"type": "string", "pattern": "^\\p{Letter}+$"}
    acc, cs = compiled(schema)
    check = _regex_module_validator(schema)
    texts = ["Hello", "π", "123", "", "a1", "été", "e\u0301", "中文", "ǅx", "ʰ", "𝒜𝒷", "a b", "Ωmega", "x_y"]
    for s in texts:
        assert acc(cs.canonical(s)) == check.is_valid(s), s
    rng = random.Random(3)
    for _ in range(300):
        s = "".join(chr(rng.choice([rng.randrange(0x80), rng.randrange(0x3000), rng.randrange(0x110000)]))
                    for _ in range(rng.randrange(1, 4)))
        if any(0xD800 <= ord(c) <= 0xDFFF for c in s):
            continue
        assert acc(cs.canonical(s)) == all(unicodedata.category(c)[0] == "L" for c in s), [hex(ord(c)) for c in s]
    schema = {"type": "object", "patternProperties": {"^\\p{Lu}": {"type": "number"}, "[\\P{L}]": {"type": "null"}}}
    acc, cs = compiled(schema)
    check = _regex_module_validator(schema)
    for inst in ({"Éa": 1}, {"Éa": "x"}, {"é": "x"}, {"É1": 1}, {"É1": None}, {"1": None}, {"a": True}):
        assert acc(cs.canonical(inst)) == check.is_valid(inst), inst
    with pytest.raises(SchemaError, match=r"script property \\p\{sc=Latn\} is not supported .* at position 2\n"):
        schema_to_term({"type": "string", "pattern": "^a\\p{sc=Latn}"})


def test_recursion_under_intersection_names_the_place():
    """A recursive reference under an intersection or complement cannot take the grammar
    path: the error names the keyword, the schema holding it and the recursive one."""
    node = {"type": "object", "properties": {"c": {"not": {"$ref": "#/$defs/n"}}}}
    with pytest.raises(SchemaError, match=r"not intersects the recursive reference to #/\$defs/n") as e:
        schema_to_term({"$defs": {"n": node}, "$ref": "#/$defs/n"})
    assert (e.value.keyword, e.value.pointer) == ("not", "#/$defs/n/properties/c")
    node = {"type": "object", "properties": {"c": {"oneOf": [{"$ref": "#/$defs/n"}, {"required": ["a"]}]}}}
    with pytest.raises(SchemaError, match="oneOf intersects") as e:
        schema_to_term({"$defs": {"n": node}, "$ref": "#/$defs/n"})
    assert e.value.pointer == "#/$defs/n/properties/c"


def test_dependent_schemas_of_required_keys_are_dependent_required():
    """A dependentSchemas / dependencies entry that only requires keys is a
    dependentRequired one: object variants, no intersection in the term."""
    import itertools
    for deps, validator in (
            ({"dependentSchemas": {"a": {"required": ["b"]}, "c": {"required": ["a", "d"]}}},
             jsonschema.Draft202012Validator),
            ({"dependencies": {"a": {"required": ["b"]}, "c": ["d"]}}, jsonschema.Draft7Validator)):
        schema = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcd"}, **deps}
        cs = schema_to_term(schema)
        assert not cs.term.boolean, schema
        dfa, check = cs.dfa(), validator(schema)
        for n in range(5):
            for keys in itertools.combinations("abcd", n):
                inst = {k: i for i, k in enumerate(keys)}
                assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), (schema, inst)


def test_type_beside_a_ref_it_already_has():
    """`type` beside a $ref whose target has that type is the target alone: a recursive
    reference stays exact (lazy terms) instead of under an intersection."""
    node = {"type": "object", "properties": {"c": {"type": "object", "$ref": "#/$defs/n"}},
            "additionalProperties": False}
    cs = schema_to_term({"$defs": {"n": node}, "$ref": "#/$defs/n"})
    assert cs.recursion is not None
    dfa = cs.dfa()
    assert cs.accepts('{"c":{"c":{"c":{}}}}', dfa) and not cs.accepts('{"c":1}', dfa)
    other = {"properties": {"x": {"type": "string", "$ref": "#/$defs/o"}}, "$defs": {"o": {"type": "object"}}}
    cs = schema_to_term(other)  # a type the target does not have: still their intersection
    assert cs.accepts('{}') and not cs.accepts('{"x":{}}') and not cs.accepts('{"x":"s"}')


def _condition_schema(rng):
    """An object schema with 1-2 if/then/else parts that test the value of `kind`."""
    kind = rng.choice([{"enum": ["a", "b", "c"]}, {"type": "boolean"}, {"type": "string", "maxLength": 1}])
    schema = {"type": "object", "properties": {"kind": kind, "x": {"type": "integer"}, "y": {"type": "integer"}}}
    if rng.random() < 0.3:
        schema["additionalProperties"] = False
    if rng.random() < 0.4:
        del schema["type"]  # then non-objects pass every `if`
    values = kind.get("enum", [True, False] if kind.get("type") == "boolean" else ["a", "b"])
    branches = [True, {}, {"required": ["x"]}, {"required": ["y"]}, {"properties": {"y": {"maximum": 1}}},
                {"required": ["x"], "properties": {"x": {"minimum": 2}}}, {"properties": {"x": {"minimum": 3}}}, False]
    conds = []
    for _ in range(rng.randint(1, 2)):
        test = rng.choice([{"const": rng.choice(values)}, {"enum": rng.sample(values, 2)}])
        c = {"if": {"properties": {"kind": test}}}
        if rng.random() < 0.5:
            c["if"]["required"] = ["kind"]
        for k in rng.sample(["then", "else"], rng.randint(1, 2)):
            c[k] = rng.choice(branches)
        conds.append(c)
    if rng.random() < 0.4:
        schema.update(conds.pop())
    if conds:
        schema["allOf"] = conds
    return schema, values


def test_value_conditions_are_variants():
    """if/then/else parts whose `if` tests one property's value are written as one
    object variant per outcome (the test and `then`, or the other values and `else`):
    where the property lists its values there is no intersection or complement in the
    term at all; every instance is accepted exactly when jsonschema validates it."""
    import itertools
    rng = random.Random(11)
    for _ in range(80):
        schema, values = _condition_schema(rng)
        cs = schema_to_term(schema)
        if "maxLength" not in schema["properties"]["kind"]:
            assert not cs.term.boolean, schema
        dfa = cs.dfa()
        check = jsonschema.Draft202012Validator(schema)
        for kind, x, y in itertools.product([None, *values, "zz", 7], [None, 1, 2, 3], [None, 0, 3]):
            inst = {k: v for k, v in (("kind", kind), ("x", x), ("y", y)) if v is not None}
            assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), (schema, inst)
        for inst in ([], "s", 0):
            assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), (schema, inst)



def test_value_conditions_on_one_required_key_hold_one_at_a_time():
    """github-issue-forms' form items: five `if`s on the value of a required `type`, each
    for another value: one outcome per value and one for none (six variants, no
    intersection), where 2^5 combinations were too many and the schema fell back to an
    intersection (an emptiness search past 200k states). Tests that share a value, or
    a key that may be absent, still combine freely (and agree with jsonschema too)."""
    import itertools
    kinds = ["md", "text", "input", "drop", "box"]
    extra = {"md": {"required": ["x"]}, "text": {"properties": {"x": {"maximum": 1}}}, "input": {"required": ["y"]},
             "drop": {"properties": {"y": {"const": 0}}}, "box": False}
    for overlap, required, typed in ((False, True, True), (True, True, True), (False, False, True), (False, True, False)):
        conds = [{"if": {"properties": {"type": {"const": k} if not overlap or i else {"enum": ["md", "text"]}}},
                  "then": extra[k], "else": {"properties": {"z": {"type": "integer"}}} if k == "text" else True}
                 for i, k in enumerate(kinds[:5 if required and typed else 4])]
        schema = {"type": "object", "properties": {"type": {"enum": kinds + ["other"]}, "x": {"type": "integer"},
                                                   "y": {"type": "integer"}, "z": {}},
                  "required": ["type"] if required else [], "allOf": conds}
        if not typed:  # (then every `if` holds on other values: they combine)
            del schema["type"]
        cs = schema_to_term(schema)
        if required and not overlap and typed:
            assert not cs.term.boolean
        dfa = cs.dfa()
        check = jsonschema.Draft202012Validator(schema)
        seen = {True: 0, False: 0}
        for t, x, y, z in itertools.product([None, *kinds, "other", "zz"], [None, 1, 2], [None, 0, 3], [None, 1, "s"]):
            inst = {k: v for k, v in (("type", t), ("x", x), ("y", y), ("z", z)) if v is not None}
            ok = check.is_valid(inst)
            seen[ok] += 1
            assert cs.accepts(cs.canonical(inst), dfa) == ok, (overlap, required, inst)
        for inst in ([], "s", 1):
            assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), (overlap, required, typed, inst)
        assert min(seen.values()) > 20, seen

def test_all_of_merges_an_object_with_pattern_properties():
    """allOf of an object with patternProperties and open objects is one object (no
    intersection): its patterns meet every key, and its additionalProperties a key that
    only another branch declares where no pattern matches it. Random branches and
    instances against jsonschema; a second patterned or a closed branch is not merged
    (an intersection), and agrees with jsonschema too."""
    from structgen.fsm.core.terms import AND
    rng = random.Random(13)
    values = [1, "s", True, None, 2.5, -3]
    keys = ["a", "b", "c", "x1", "x2", "ab", "zz", "xb"]
    schemas = [{}, {"type": "integer"}, {"type": "string"}, {"enum": [1, "s"]}, False]
    merged = 0
    for _ in range(40):
        c = {"type": "object", "patternProperties": {"^x": rng.choice(schemas[:-1]), "b$": rng.choice(schemas)},
             "properties": {k: rng.choice(schemas[:-1]) for k in rng.sample(["a", "b", "x1"], rng.randint(0, 2))}}
        if rng.random() < 0.6:
            c["additionalProperties"] = rng.choice([True, False, {"type": "integer"}])
        d = {"properties": {k: rng.choice(schemas[:-1]) for k in rng.sample(["a", "c", "x2", "ab"], rng.randint(1, 3))}}
        if rng.random() < 0.2:
            d["additionalProperties"] = rng.choice([False, {"type": "string"}])  # (not merged)
        e = {"required": rng.sample(["a", "c"], rng.randint(0, 1))}
        schema = {"allOf": [c, d, e]}
        acc, cs = compiled(schema)
        merged += cs.term.kind != AND  # (the pattern's complement for other keys stays inside)
        v = jsonschema.Draft202012Validator(schema)
        for _ in range(40):
            inst = {k: rng.choice(values) for k in rng.sample(keys, rng.randint(0, 4))}
            assert acc(cs.canonical(inst)) == v.is_valid(inst), (schema, inst)
    assert merged >= 10, merged


def test_all_of_merges_values_arrays_and_carried_keywords():
    """allOf of value lists is their common values; of array schemas, one array of the
    items' allOf; of object schemas, one object that carries a branch's oneOf / if
    (flattening nested allOf, through $ref with notes beside it): no intersection left,
    and the same instances as jsonschema."""
    import itertools
    defs = {"item": {"$ref": "#/$defs/obj", "description": "notes only"},
            "obj": {"type": "object", "properties": {"a": {"enum": [1, 2, 3]}, "b": {}, "c": {}},
                    "additionalProperties": False,
                    "allOf": [{"required": ["a"]}, {"oneOf": [{"required": ["b"]}, {"required": ["c"]}]}]}}
    cases = [
        ({"allOf": [{"enum": [1, 2, "x", True]}, {"enum": [2, 1.0, "x", 1]}, {"description": "d"}]},
         [1, 2, "x", True, 1.0, 3]),
        ({"$defs": defs, "type": "array", "maxItems": 2,
          "allOf": [{"items": {"$ref": "#/$defs/item"}, "minItems": 0},
                    {"items": {"properties": {"a": {"enum": [2, 3, 4]}}}, "minItems": 1, "maxItems": 3}]},
         [[], [{"a": 2, "b": 0}], [{"a": 1, "b": 0}], [{"a": 3, "c": 0}, {"a": 2, "b": 1}],
          [{"a": 2, "b": 0, "c": 0}], [{"a": 2}], [{"a": 2, "b": 0}] * 3, {"a": 2}]),
    ]
    for schema, instances in cases:
        cs = schema_to_term(schema)
        assert not cs.term.boolean, schema
        check = jsonschema.Draft202012Validator(schema)
        for inst in instances:
            assert cs.accepts(cs.canonical(inst)) == check.is_valid(inst), (schema, inst)
    obj = {"$defs": defs, "allOf": [{"$ref": "#/$defs/item"}, {"properties": {"a": {"enum": [2, 3]}}}]}
    cs, check = schema_to_term(obj), jsonschema.Draft202012Validator(obj)
    assert not cs.term.boolean
    for a, b, c in itertools.product([None, 1, 2], [None, 0], [None, 0]):
        inst = {k: v for k, v in (("a", a), ("b", b), ("c", c)) if v is not None}
        assert cs.accepts(cs.canonical(inst)) == check.is_valid(inst), inst


def test_recursion_through_a_merged_all_of():
    """A recursive $ref beside more constraints in an allOf (`items: {allOf: [{$ref:
    node}, {required: [v]}]}`) is merged into one schema; the recursion then comes back
    to that allOf, which becomes the rule: the same trees as jsonschema accepts."""
    schema = {"$defs": {"n": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/n"}, {"required": ["v"]}]}},
        "v": {"type": "integer"}}}}, "$ref": "#/$defs/n"}
    cs = schema_to_term(schema)
    dfa = cs.dfa()
    check = jsonschema.Draft202012Validator(schema)
    rng = random.Random(5)

    def tree(depth):
        t = {}
        if rng.random() < 0.8:
            t["v"] = rng.randint(0, 9)
        if depth and rng.random() < 0.7:
            t["kids"] = [tree(depth - 1) for _ in range(rng.randint(0, 2))]
        return t
    seen = set()
    for _ in range(300):
        inst = tree(3)
        seen.add(check.is_valid(inst))
        assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), inst
    assert seen == {True, False}




def test_all_of_shared_ancestors_merge_once():
    """cloudify's node types inherit through allOf chains whose branches share their
    ancestors: flattened, a branch met twice is taken once (allOf is idempotent), not
    once per path (here 2^24 paths to the base: the compile would not end). The merged
    object requires every level's key, an integer, and allows others (by hand: jsonschema
    walks every path too)."""
    defs = {"l0": {"type": "object", "properties": {"k0": {"type": "integer"}}, "required": ["k0"]}}
    for i in range(1, 25):
        side = {"properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"], "allOf": [{"$ref": f"#/$defs/l{i - 1}"}]}
        defs[f"s{i}"] = side
        defs[f"l{i}"] = {"allOf": [{"$ref": f"#/$defs/l{i - 1}"}, {"$ref": f"#/$defs/s{i}"}]}
    schema = {"$defs": defs, "$ref": "#/$defs/l24"}
    acc, cs = compiled(schema)
    full = {f"k{i}": i for i in range(25)}
    for inst, ok in [(full, True), ({k: v for k, v in full.items() if k != "k7"}, False),
                     (dict(full, k3="x"), False), (dict(full, extra=1), True)]:
        assert acc(cs.canonical(inst)) == ok, inst


def test_recursive_grammar_size_is_limited(monkeypatch):
    """A recursive schema's grammar has at most _RecursiveRules.MAX_RULES nonterminals:
    past it, a SchemaError says so (OpenAPI 3.1's unions of objects passed 400k in a
    minute, with no end in sight), not a compile that does not end."""
    from structgen.fsm.json.recursive import _RecursiveRules
    props = {f"p{i}": {"type": "array", "items": {"$ref": "#/$defs/n"}} for i in range(30)}
    schema = {"$defs": {"n": {"type": "object", "properties": props, "additionalProperties": False}},
              "$ref": "#/$defs/n"}
    assert len(schema_to_term(schema, recursion="grammar").rules.rules) > 30
    monkeypatch.setattr(_RecursiveRules, "MAX_RULES", 20)
    with pytest.raises(SchemaError, match="grammar passes 20 nonterminals"):
        schema_to_term(schema, recursion="grammar")


def _recursive_with_oracle(schema, seed: int):
    """schema compiled (recursive, exact), its DFA, jsonschema's validator of
    it and a seeded random generator, for tests that check random instances."""
    cs = schema_to_term(schema)
    assert cs.recursion is not None
    return cs, cs.dfa(), jsonschema.Draft202012Validator(schema), random.Random(seed)


def _agrees_on(pool, cs, dfa, check, least: int) -> None:
    """Each instance of pool's canonical text is accepted exactly when jsonschema's
    `check` validates it; at least `least` valid and `least` invalid among them."""
    seen = {True: 0, False: 0}
    for inst in pool:
        ok = check.is_valid(inst)
        seen[ok] += 1
        assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert min(seen.values()) >= least, seen

def test_recursion_through_a_ref_beside_keywords():
    """A $ref beside other keywords (2020-12: both hold) merges with them into one
    schema, as an allOf would (_Compiler._conjunction): `{type: object, properties:
    {...}, $ref: base}` where base recurses to the root compiles exactly as a recursive schema instead
    of being refused as an intersection; the $ref of a nested `allOf` branch too. The
    same trees as jsonschema accepts; the canonical writer follows the merged schema."""
    base = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2},
                                             "v": {"type": "integer"}}, "required": ["v"]}
    for schema in ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}},
                    "$ref": "#/$defs/base", "$defs": {"base": base}},
                   {"properties": {"name": {"enum": ["a", "b"]}}, "allOf": [{"properties": {"z": {"type": "null"}}}],
                    "$ref": "#/$defs/base", "$defs": {"base": base}}):
        cs, dfa, check, rng = _recursive_with_oracle(schema, seed=3)

        def tree(depth):
            t = {}
            for k, vals in (("v", [1, "x"]), ("name", ["a", "abcd", 2]), ("z", [None, 0]), ("q", [1])):
                if rng.random() < (0.8 if k == "v" else 0.3):
                    t[k] = rng.choice(vals)
            if depth and rng.random() < 0.7:
                t["kids"] = [tree(depth - 1) for _ in range(rng.randint(0, 3))]
            return t
        seen = {True: 0, False: 0}
        for _ in range(300):
            inst = tree(3)
            ok = check.is_valid(inst)
            seen[ok] += 1
            assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
        assert min(seen.values()) >= 20, seen


def test_recursion_inside_large_item_bounds():
    """maxItems above MAX_REPEAT_UNROLL around a recursive reference (mergify's condition
    lists: maxItems 500) takes a chain of rules, linear in the bound: arrays of every
    length around both bounds, of leaves and of subtrees, as jsonschema says."""
    schema = {"$defs": {"n": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"},
                                                              "minItems": 2, "maxItems": 100}]}},
              "$ref": "#/$defs/n"}
    cs = schema_to_term(schema)
    assert cs.recursion is not None
    dfa = cs.dfa()
    check = jsonschema.Draft202012Validator(schema)
    seen = {True: 0, False: 0}
    for n in (0, 1, 2, 3, 50, 99, 100, 101, 130):
        for inst in ([7] * n, [[1, 2]] * n, [1, [2] * n], [[1] * n, 3], [[[1, 2], [3, 4]]] * (n % 5)):
            ok = check.is_valid(inst)
            seen[ok] += 1
            assert cs.accepts(cs.canonical(inst), dfa) == ok, (n, inst)
    assert seen[True] > 10 and seen[False] > 10, seen


def test_recursive_oneof_of_objects_apart_by_their_keys():
    """circle-ci's logic statements: a oneOf of scalars, a closed object of one operator
    key (minProperties 1) whose values recurse, and an object whose propertyNames allow
    no operator key. No object is in both (json_disjoint._apart), so the oneOf is a union
    and compiles exactly as a recursive schema; a `not` of presence parts beside a vendor key
    (markdownDescription) is presence variants, not a complement. Trees as jsonschema
    says."""
    ops = ["and", "or", "not"]
    logic = {"oneOf": [
        {"markdownDescription": "a value", "anyOf": [{"type": "boolean"}, {"type": "integer"}]},
        {"type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False, "properties": {
            "and": {"type": "array", "items": {"$ref": "#/$defs/logic"}, "minItems": 1, "maxItems": 2},
            "or": {"type": "array", "items": {"$ref": "#/$defs/logic"}, "minItems": 1, "maxItems": 2},
            "not": {"$ref": "#/$defs/logic"}}},
        {"type": "object", "propertyNames": {"not": {"pattern": "^(and|or|not)$"}},
         "additionalProperties": {"type": "integer"}}]}
    schema = {"$defs": {"logic": logic}, "type": "object", "properties": {"when": {"$ref": "#/$defs/logic"},
                                                                       "unless": {"$ref": "#/$defs/logic"}},
              "not": {"markdownDescription": "not both", "allOf": [{"required": ["when"]}, {"required": ["unless"]}]}}
    cs, dfa, check, rng = _recursive_with_oracle(schema, seed=11)

    def stmt(depth):
        r = rng.random()
        if depth == 0 or r < 0.3:
            return rng.choice([True, 3, "s"])
        if r < 0.8:
            op = rng.choice(ops)
            body = stmt(depth - 1) if op == "not" else [stmt(depth - 1) for _ in range(rng.randint(0, 3))]
            return {op: body, **({"x": 1} if rng.random() < 0.1 else {})}
        return {k: rng.choice([1, "v"]) for k in rng.sample(["x", "y", "and"], rng.randint(0, 2))}
    seen = {True: 0, False: 0}
    for _ in range(400):
        inst = {k: stmt(3) for k in rng.sample(["when", "unless"], rng.randint(0, 2))}
        ok = check.is_valid(inst)
        seen[ok] += 1
        assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert min(seen.values()) >= 40, seen


@pytest.mark.parametrize("typed", [False, True])
def test_oneof_told_apart_by_properties_holds_on_other_types(typed):
    """A oneOf whose branches a required property's values tell apart is a union only
    where objects alone count: untyped, both branches hold on 5, "x" and [] (a oneOf
    refuses those), which the union accepted before. With `type: object`, also values
    one branch lists and the other's `not` excludes, and a branch wrapped in a oneOf of
    one (gitlab-ci's jobs and steps), around a recursion: exact, no
    intersection. Instances against jsonschema."""
    job = {"type": "object", "additionalProperties": False, "properties": {
               "k": {}, "s": {}, "steps": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/step"}}},
           "oneOf": [{"properties": {"k": {"const": 1}}, "required": ["k", "s"]},
                     {"properties": {"k": {"not": {"enum": [1]}}}}]}
    step = {"oneOf": [{"type": "object", "additionalProperties": False, "required": ["n"],
                       "properties": {"n": {"type": "integer"}}},
                      {"oneOf": [{"type": "object", "additionalProperties": False, "required": ["run"],
                                  "properties": {"run": {"type": "array", "items": {"$ref": "#/$defs/step"},
                                                         "maxItems": 2}, "n": {}}}]}]}
    if typed:
        schema = {"type": "object", "properties": {"job": job}, "$defs": {"step": step}}
        jobs = [{}, {"k": 1}, {"k": 2}, {"k": 1, "s": 0}, {"s": 0}, {"k": 2, "s": 1}, {"x": 1}]
        steps = [[], [{"n": 1}], [{"run": []}], [{"run": [{"n": 1}], "n": 2}], [{"run": [{"run": [{"n": "x"}]}]}],
                 [{"n": 1, "run": []}], [{"run": [{"run": [{"n": 3}]}]}]]
        pool = [5, {}] + [{"job": {**j, "steps": st}} for j in jobs for st in steps]
    else:
        schema = {"oneOf": [{"required": ["k"], "properties": {"k": {"const": 1}}},
                            {"required": ["k"], "properties": {"k": {"const": 2}}}]}
        pool = [5, "x", [], None, {}, {"k": 1}, {"k": 2}, {"k": 3}, {"j": 1}]
    cs = schema_to_term(schema)
    dfa = cs.dfa()
    check = jsonschema.Draft202012Validator(schema)
    _agrees_on(pool, cs, dfa, check, least=2)
    if typed:
        assert cs.recursion is not None and not cs.relaxed


@pytest.mark.parametrize("overlap", [False, True])
def test_oneof_of_unions_apart_branch_by_branch(overlap):
    """snapcraft's root: a oneOf of two oneOfs of closed objects, where every object of
    one side requires `base`, which the other side does not allow. No value holds both
    sides (json_disjoint._branches), so the oneOf is a union: around a recursion it
    compiles exactly as a recursive schema (refused before). Where a branch of the second side is open
    (it holds {base: a, name: n} too), the sides overlap and the oneOf keeps its
    complement, no recursion: values of both sides refused. Instances against
    jsonschema."""
    def closed(key, value, recurse):
        props = {key: {"const": value}, "name": {"type": "string"}}
        if recurse:
            props["parts"] = {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/p"}}
        return {"type": "object", "required": [key], "additionalProperties": False, "properties": props}
    second = closed("build", "y", not overlap) if not overlap else {"type": "object", "required": ["name"]}
    p = {"oneOf": [{"oneOf": [closed("base", "a", not overlap), closed("base", "b", not overlap)]},
                   {"title": "second", "oneOf": [closed("build", "x", not overlap), second]}]}
    schema = {"$defs": {"p": p}, "$ref": "#/$defs/p"}
    leaves = [{"base": "a"}, {"base": "b", "name": "n"}, {"build": "x"}, {"build": "y", "name": "m"},
              {"base": "a", "name": "n"}, {"base": "c"}, {"name": "n"}, {"build": "x", "base": "a"}, {}]
    if overlap:
        cs = schema_to_term(schema)
        assert cs.recursion is None and not cs.relaxed
        pool = leaves + [{"name": "n", "other": 1}, {"base": "a", "name": 3}]
        _agrees_on(pool, cs, cs.dfa(), jsonschema.Draft202012Validator(schema), least=4)
        return
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    pool = leaves + [{**a, "parts": [b]} for a in leaves[:5] for b in leaves] + [
        {"base": "a", "parts": [{"build": "x", "parts": [{"base": "b", "parts": []}, {"base": "z"}]}]}]
    _agrees_on(pool, cs, dfa, check, least=10)


def test_oneof_complements_only_branches_that_share_types():
    """circle-ci's orbs: a oneOf of two string patterns (which may overlap) and an object
    whose values recurse. Exactly one branch holds iff exactly one of those sharing its
    types does (json_disjoint.overlaps): the patterns take complements of each other, the
    object none, so the recursion compiles exactly as a recursive schema (refused before). Instances
    against jsonschema, strings matching both patterns among them."""
    schema = {"$defs": {"orb": {"oneOf": [
        {"type": "string", "pattern": "^[a-z]+@[0-9]+$"}, {"type": "string", "pattern": "^a"},
        {"type": "object", "properties": {"jobs": {"type": "object", "additionalProperties": {"$ref": "#/$defs/orb"}}},
         "additionalProperties": False}]}}, "$ref": "#/$defs/orb"}
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    pool = ["ab@1", "b@2", "ax", "b", "", 3, {}, {"jobs": {}}, {"jobs": {"x": "b@2"}}, {"jobs": {"x": "ab@1"}},
            {"jobs": {"x": {"jobs": {"y": "ax"}}}}, {"jobs": {"x": {"jobs": {"y": "a@1"}}}}, {"other": 1}]
    _agrees_on(pool, cs, dfa, check, least=4)


def test_oneof_apart_within_each_type_group():
    """avro's types: a oneOf of two strings that overlap (a name may be a primitive
    one) beside objects told apart by a required `type` whose fields recurse. Exactly one
    branch holds iff exactly one of its type group does (json_disjoint.overlapping):
    the strings take complements of each other, the objects, apart among themselves,
    none, so the recursion compiles exactly as a recursive schema (refused before: the objects were
    complemented too). Instances against jsonschema, names of both strings among them."""
    field = {"type": "object", "required": ["name", "type"], "additionalProperties": False,
             "properties": {"name": {"type": "string", "maxLength": 3}, "type": {"$ref": "#/$defs/t"}}}
    t = {"oneOf": [
        {"enum": ["int", "null"]},
        {"type": "string", "pattern": "^[a-z]{1,4}$"},
        {"type": "object", "required": ["type"], "properties": {
            "type": {"const": "record"}, "fields": {"type": "array", "maxItems": 2, "items": field}}},
        {"type": "object", "required": ["type", "items"], "properties": {
            "type": {"const": "array"}, "items": {"$ref": "#/$defs/t"}}},
        {"type": "object", "required": ["type"], "properties": {"type": {"enum": ["int", "null"]}}}]}
    schema = {"$defs": {"t": t}, "$ref": "#/$defs/t"}
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    leaves = ["int", "null", "abc", "Abc", "abcde", 3, {"type": "int"}, {"type": "null", "x": 1}, {"type": "bad"}]
    pool = leaves + [{"type": "array", "items": x} for x in leaves] + [
        {"type": "record", "fields": [{"name": "a", "type": x}]} for x in leaves] + [
        {"type": "record"}, {"type": "record", "fields": [{"name": "abcd", "type": "int"}]},
        {"type": "array", "items": {"type": "record", "fields": []}, "fields": 1}, {"type": "array"}]
    _agrees_on(pool, cs, dfa, check, least=10)


def test_oneof_branch_that_holds_a_whole_type_needs_no_search():
    """A oneOf branch that asserts nothing of a type (an untyped schema of object
    keywords, or a `not` of integers, holds every array, string...) leaves no value of
    that type to another branch alone, and two such branches none to either
    (_Compiler._held_alone): the other branches lose that type before their complements
    are taken. The schemas below made an emptiness search prove that no array of free
    objects (or no string, integer) lies outside the untyped branch: TooLargeError after
    ~15 s at the default max_states, ~1-2 s at the 20k given here. Instances agree with
    jsonschema."""
    n = {"properties": {"a": {"type": "array", "maxItems": 2, "items": {"enum": ["a", 1, None]}}}}
    schemas = [
        {"$defs": {"n": n}, "oneOf": [{"type": ["integer", "string"], "$ref": "#/$defs/n"},
                                      {"type": "array", "maxItems": 2, "items": {"type": "object"}},
                                      {"anyOf": [{"$ref": "#/$defs/n"}]}]},
        {"oneOf": [{"type": "array", "items": {"type": "object"}}, n, {"type": "string", "maxLength": 1}]},
        {"oneOf": [{"enum": ["a", 1, None]}, {"const": "b"}, {}], "type": ["null", "number"]},
        # a `not` that holds no array takes every array (_idle_of); so does a oneOf one of
        # whose branches does, the others holding none
        {"oneOf": [{"type": "array", "items": {"type": "object"}}, {"not": {"type": "integer"}}]},
        {"oneOf": [{"type": "array", "items": {"type": "object"}, "minItems": 1},
                   {"oneOf": [{}, {"type": "integer", "multipleOf": 3}]}]},
    ]
    pool = [None, True, 1, 2, 0, -7, 1.5, "", "a", "b", "xy", [], [{}], [{}, {"a": []}], [1], [{}, {}, {}], {},
            {"a": []}, {"a": ["a", 1]}, {"a": ["x"]}, {"a": [1, 1, 1]}, {"b": [{}]}]
    for schema in schemas:
        cs = schema_to_term(schema)
        _agrees_on(pool, cs, cs.dfa(max_states=20_000), jsonschema.Draft202012Validator(schema), least=3)


def test_one_type_list_reads_as_that_type():
    """`type: ["object"]` is `type: "object"`: object branches merge (AllOfMerges.
    _merged_objects) and a number keyword in a `then` asserts nothing of them. Read as a
    list, the `if`s' outcomes below were intersected, and an emptiness search over
    `a`'s free values ran out (TooLargeError after ~20 s at the default max_states).
    Instances agree with jsonschema, and both forms accept the same texts."""
    def node(ty):
        return {"type": ty, "properties": {"a": {}, "t": {"enum": ["x", "y"]}}, "allOf": [
            {"if": {"properties": {"t": {"const": "x"}}}, "then": {"properties": {"a": {"type": "null"}}, "minimum": 2}},
            {"if": {"properties": {"t": {"const": "y"}}}, "then": {"properties": {"a": {}}, "minimum": 2}}]}
    pool = [{}, {"t": "x"}, {"t": "y"}, {"a": 2}, {"a": None, "t": "x"}, {"a": 5, "t": "x"}, {"a": [1], "t": "y"},
            {"t": "z"}, 3, None]
    for ty in (["object"], "object"):
        cs = schema_to_term(node(ty))
        _agrees_on(pool, cs, cs.dfa(max_states=20_000), jsonschema.Draft202012Validator(node(ty)), least=3)


def test_shared_heads_leave_intersections_as_they_were():
    """JsonTermBuilder._shared_head writes `V R1 & ~(V R2)` (and `V R1 & V R2`) as one
    term `V (...)` only where no string splits two ways, by `extenders`. Over random
    regexes on a 3-byte alphabet, every string up to 6 bytes is a member exactly where
    Python's re says it is in both concatenations (or in the first and not the second);
    and some of the pairs are taken out."""
    pieces = ["a", "b", ",", "a*", "b?", "(ab)*", "(a|ab)", "(b|a,)", "a+b", "(,a|,)", "[ab]{1,2}", "a?,", "a+b?",
              "(a|a*b)", "(,|b*,a)"]
    rng, factored = random.Random(5), 0
    words = [bytes(w) for n in range(7) for w in itertools.product(b"ab,", repeat=n)]
    # a head (not a concatenation: those nest to the right) that goes on where its tail
    # starts (a* a; a+ then b, or not), or whose alternatives start alike (a | a*b)
    chosen = [("(a*a|,)", "a", "aa"), ("(a+b?|,)", "a", "aa"), ("(a+b?|,)", "b", "bb"), ("(a|a*b)", "b", "bb"),
              ("(a*b?a|,)", "a", "aa"), ("(b|ab?){2}", "a", "aa")]
    for i in range(300):
        v, r1, r2 = chosen[i] if i < len(chosen) else \
            ("".join(rng.choice(pieces) for _ in range(rng.randint(1, 3))) for _ in range(3))
        tb = JsonTermBuilder()
        head, t1, t2 = (regex_to_term(tb, x) for x in (v, r1, r2))
        for neg in (True, False):
            second = tb.concat(head, t2)
            t = tb.intersect([tb.concat(head, t1), tb.complement(second) if neg else second])
            factored += t.kind == CONCAT
            for w in words:
                in1 = re.fullmatch(f"(?:{v})(?:{r1})", w.decode()) is not None
                in2 = re.fullmatch(f"(?:{v})(?:{r2})", w.decode()) is not None
                assert tb.matches(t, w) == (in1 and in2 != neg), (v, r1, r2, neg, w)
    assert factored >= 150, factored


def test_oneof_of_open_objects_takes_their_shared_value_out():
    """Two open objects in a oneOf overlap: at a key neither declares, both take the same
    value (any JSON), then each its own rest. `A & ~B` there paired every position
    inside that value with the rests, and proving such a state empty searched them all:
    TooLargeError mid-output (schema_fuzz seed 2, after ~5 s at the default max_states;
    0.65 s at the 20k given here). The shared value is taken out of the intersection
    (JsonTermBuilder._shared_head) and the search decides such a state by its tail
    (JsonTermSource._tail_empty). Instances agree with jsonschema."""
    schema = {"oneOf": [
        {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 3}}, "maxProperties": 3},
        {"type": "object", "properties": {"b": {"type": "string", "maxLength": 2}}}]}
    cs = schema_to_term(schema)
    dfa = cs.dfa(max_states=20_000)
    for text in (b'{"x":', b'{"x":[{"y":[1,', b'{"a":3,"x":{"q":'):
        assert _stepped_along(dfa, text) != 0, text  # (four keys: only B holds)
    pool = [{"x": 1}, {"x": 1, "y": 2, "z": 3, "w": 4}, {"a": 3, "x": 1}, {"a": 1, "x": [{"y": [1]}]},
            {"b": "abc", "x": {}}, {"b": "ab"}, {"a": 3, "b": "abc"}, {}, [], {"a": "s"},
            {"x": {"q": [1, 2]}, "y": None, "z": "s", "w": True}, {"a": 6, "x": [], "y": 1}]
    _agrees_on(pool, cs, dfa, jsonschema.Draft202012Validator(schema), least=4)


def test_searches_of_tails_are_bounded():
    """An emptiness search decides a state 'plain head, then tail' by searching the tail
    (JsonTermSource._tail_empty), and that search may meet such a state of its own: at
    most TAIL_SEARCHES_MAX are under way, then the tail is searched in place. Unbounded,
    an allOf of two objects (schema_fuzz seed 11) nested searches past Python's
    recursion limit: RecursionError. Bounded, the check ends as before shared heads:
    TooLargeError, a clear error, at the max_states given (0.5 s at the 20k here)."""
    half = {"type": "object", "properties": {
        "a": {"not": {"type": "integer"}}, "dd": {"type": "string", "pattern": "[0-9]{2}"},
        "c": {"type": "array", "items": {}, "maxItems": 1, "contains": {"enum": [[1], {"k": 1}, "b"]},
              "uniqueItems": True},
        "b": {"type": "number", "exclusiveMinimum": 0.25, "maximum": 100}}, "minProperties": 2}
    other = {"type": "object", "properties": {
        "c": {"type": "array", "items": {"type": "number", "multipleOf": 0.5},
              "contains": {"type": "string", "pattern": "^x.y$"}, "minContains": 1},
        "b": {"type": "array", "items": {"type": "string", "pattern": "^(ab|cd)*$"}, "minItems": 1}},
        "required": ["b"], "patternProperties": {"^x": {"const": "z"}}, "minProperties": 1}
    schema = {"type": "object", "properties": {"e": {"allOf": [half, other]}}, "required": ["e"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (lenient: uniqueItems beside contains is dropped)
        cs = schema_to_term(schema, strict=False)
    try:
        _stepped_along(cs.dfa(max_states=20_000), b'{"e":{')
    except TooLargeError:
        pass


def test_oneof_closed_branch_apart_from_one_requiring_a_key_it_lacks():
    """vega's field references: an open `{signal}` (required) beside closed `{datum}` and
    `{group, level}` objects whose values recurse. No value holds two: an object of a
    closed branch has no `signal` (json_disjoint._apart, one side closed; both closed
    before), so the oneOf is a union and compiles exactly as a recursive schema (refused before).
    Instances against jsonschema, objects with `signal` and `datum` both among them."""
    f = {"oneOf": [
        {"type": "string"},
        {"type": "object", "required": ["signal"], "properties": {"signal": {"type": "string"}}},
        {"type": "object", "required": ["datum"], "additionalProperties": False,
         "properties": {"datum": {"$ref": "#/$defs/f"}}},
        {"type": "object", "required": ["group"], "additionalProperties": False,
         "properties": {"group": {"$ref": "#/$defs/f"}, "level": {"type": "integer"}}}]}
    schema = {"$defs": {"f": f}, "$ref": "#/$defs/f"}
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    leaves = ["x", 3, {}, {"signal": "s"}, {"signal": 1}, {"signal": "s", "datum": "x"}, {"signal": "s", "z": None}]
    pool = leaves + [{"datum": x} for x in leaves] + [{"group": x, "level": 2} for x in leaves] + [
        {"group": {"datum": {"signal": "s"}}}, {"datum": "x", "level": 1}, {"group": "x", "level": "1"}]
    _agrees_on(pool, cs, dfa, check, least=10)


@pytest.mark.parametrize("recursive", [False, True])
def test_oneof_discriminator_required_beside_it(recursive):
    """cmake-presets' root: `required: [version]` beside a oneOf of closed, untyped
    branches, each listing its versions. Every object of the node has a version, which
    picks one branch (json_disjoint.disjoint reads node's required keys too), so the
    oneOf is a union; around a recursion it compiles exactly as a recursive schema (refused before).
    Non-objects hold every branch: the oneOf refuses them, and so does `type`."""
    kids = {"type": "array", "maxItems": 2, "items": {"$ref": "#"}} if recursive else {"type": "array"}
    schema = {"type": "object", "required": ["version"], "oneOf": [
        {"additionalProperties": False, "properties": {"version": {"enum": [1, 2]}, "a": {"type": "integer"}}},
        {"additionalProperties": False, "properties": {"version": {"const": 3}, "a": {}, "kids": kids}}]}
    cs = schema_to_term(schema)
    assert (cs.recursion is not None) == recursive and not cs.relaxed
    leaves = [{"version": v, **extra} for v in (1, 2, 3, 4) for extra in ({}, {"a": 1}, {"a": "s"}, {"kids": []})]
    pool = leaves + [{}, {"a": 1}, 3, "s"] + [{"version": 3, "kids": [x, y]} for x in leaves[:8] for y in leaves[8:]]
    _agrees_on(pool, cs, cs.dfa(), jsonschema.Draft202012Validator(schema), least=10)


@pytest.mark.parametrize("recursive", [False, True])
def test_presence_of_many_keys_is_variants(recursive):
    """comet's root: exactly one of eight keys, one of them not declared (a oneOf of
    `required` alone), beside properties whose values recurse; and tmLanguage's rules:
    dependencies that say which keys a rule has (`include` without `match` or `begin`,
    `begin` with `end` or `while`, `captures` with `match` or `begin`) beside more than
    five dependentRequired keys. Both are presence parts: variants, one per set of the
    keys they name that satisfies them (json_variants._presence_sets: 8 and 36 of 2^8
    and 2^10), not intersections (more than 6 keys, or a key of a branch's own, was
    refused around a recursion before). Every set of the keys against jsonschema."""
    import itertools
    kid = {"type": "array", "maxItems": 1, "items": {"$ref": "#"}} if recursive else {"type": "integer"}
    one = {"type": "object", "properties": {k: kid for k in "abcdefg"},
           "oneOf": [{"required": [k]} for k in "abcdefgh"]}
    keys = ["include", "match", "begin", "end", "while", "applyEnd", "captures", "beginCaptures", "endCaptures",
            "whileCaptures"]
    rule = {"type": "object", "additionalProperties": False,
            "properties": {**{k: {"type": "integer"} for k in keys}, "patterns": kid},
            "dependentSchemas": {"include": {"allOf": [{"not": {"required": ["match"]}},
                                                       {"not": {"required": ["begin"]}}]},
                                 "match": {"not": {"required": ["begin"]}},
                                 "begin": {"oneOf": [{"required": ["end"]}, {"required": ["while"]}]},
                                 "captures": {"oneOf": [{"required": ["match"]}, {"required": ["begin"]}]}},
            "dependentRequired": {"end": ["begin"], "while": ["begin"], "applyEnd": ["begin"],
                                  "beginCaptures": ["begin"], "endCaptures": ["end"], "whileCaptures": ["while"]}}
    for schema, names in ((one, "abcdefgh"), (rule, keys)):
        cs = schema_to_term(schema)
        assert (cs.recursion is not None) == recursive and not cs.relaxed
        dfa, check = cs.dfa(), jsonschema.Draft202012Validator(schema)
        seen = {True: 0, False: 0}
        for n in range(len(names) + 1):
            for have in itertools.combinations(names, n):
                inst = {k: ([] if recursive and k in "abcdefg" else 1) for k in have}
                ok = check.is_valid(inst)
                seen[ok] += 1
                assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
        assert seen[True] >= 8 and seen[False] >= 100, seen
        if recursive:  # (below: the same parts hold)
            deep = [{"a": [{"b": [{"h": 0}]}]}, {"a": [{"b": [{"h": 0, "c": []}]}]}] if schema is one else [
                {"match": 1, "patterns": [{"begin": 2, "end": 3}]}, {"match": 1, "patterns": [{"begin": 2}]}]
            got = [cs.accepts(cs.canonical(x), dfa) for x in deep]
            assert got == [check.is_valid(x) for x in deep] == [True, False]


@pytest.mark.parametrize("recursive", [False, True])
def test_value_conditions_whose_if_says_type_object(recursive):
    """yippee-ki-json's suppliers: an object with a required `name` (an enum beside a
    stray `additionalItems`, which asserts nothing of strings) and an allOf of `if:
    {type: object, properties: {name: {const: X}}}, then: X's schema`, reached through
    `allOf: [{$ref}, {description}]`. The objects-only node makes `type: object` in the
    `if` idle, so the `if`s are value conditions: variants, one per name (the required
    key takes one value: json_variants._condition, _Compiler._outcomes), not
    intersections; around a recursion exact (refused before)."""
    inner = {"allOf": [{"$ref": "#/$defs/any"}, {"description": "the source"}]} if recursive else {"type": "string"}
    defs = {
        "any": {"allOf": [
            {"type": "object", "required": ["name"],
             "properties": {"name": {"type": "string", "enum": ["conv", "static", "file"], "additionalItems": False}}},
            {"if": {"type": "object", "properties": {"name": {"type": "string", "const": "conv"}}},
             "then": {"$ref": "#/$defs/conv"}},
            {"if": {"type": "object", "properties": {"name": {"const": "static"}}},
             "then": {"$ref": "#/$defs/static"}}]},
        "conv": {"type": "object", "additionalProperties": False, "required": ["name", "source"],
                 "properties": {"name": {"const": "conv"}, "source": inner}},
        "static": {"type": "object", "additionalProperties": False, "required": ["name"],
                   "properties": {"name": {"const": "static"}, "value": {"type": "integer"}}}}
    schema = {"$defs": defs, "$ref": "#/$defs/any"}
    cs = schema_to_term(schema)
    assert (cs.recursion is not None) == recursive and not cs.relaxed
    leaves = [{"name": "static"}, {"name": "static", "value": 1}, {"name": "static", "value": "x"},
              {"name": "static", "source": "s"}, {"name": "file"}, {"name": "file", "other": [1]}, {"name": "zip"},
              {"value": 1}, {}, "static", 3]
    sources = leaves if recursive else ["s", 3]
    pool = leaves + [{"name": "conv", "source": x} for x in sources] + [
        {"name": "conv"}, {"name": "conv", "source": "s", "value": 1}]
    if recursive:
        pool += [{"name": "conv", "source": {"name": "conv", "source": x}} for x in leaves[:6]]
    _agrees_on(pool, cs, cs.dfa(), jsonschema.Draft202012Validator(schema), least=5)


@pytest.mark.parametrize("typed", [False, True])
def test_oneof_of_closed_objects_whose_keys_are_apart(typed):
    """GCP workflows' `except` (untyped: a closed step, or a closed `{as, steps}`) and
    snapcraft's grammar items (a string, or closed objects of one pattern key each:
    `^on\\s+.+$`, `^to\\s+.+$`, `^try$`), whose values recurse. No key is allowed by two
    branches (json_disjoint.keys_apart: declared keys, patterns' intersections), so
    they share `{}` at most, and every non-object where two are untyped: each branch
    is narrowed (minProperties 1, type object) and the oneOf is a union on the grammar
    path (refused before). Instances against jsonschema, `{}` and non-objects among
    them."""
    kids = {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/x"}}
    if typed:
        x = {"oneOf": [{"type": "string"}] + [
            {"type": "object", "additionalProperties": False, "patternProperties": {p: kids}}
            for p in (r"^on\s+.+$", r"^to\s+.+$", "^try$")]}
        leaves = ["s", 3, {}, {"on a": []}, {"on a": [], "to b": []}, {"try": ["s"]}, {"try": [], "else": []},
                  {"on": []}, {"to  x": ["s", {}]}]
    else:
        x = {"oneOf": [{"additionalProperties": False, "properties": {"call": {"type": "string"}, "next": kids}},
                       {"additionalProperties": False, "properties": {"as": {"type": "string"}, "steps": kids}}]}
        leaves = ["s", 3, None, {}, {"call": "c"}, {"as": "e"}, {"as": "e", "call": "c"}, {"steps": []},
                  {"next": [], "call": 1}, {"other": 1}]
    schema = {"$defs": {"x": x}, "$ref": "#/$defs/x"}
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    key = "try" if typed else "steps"
    good = [a for a in leaves if check.is_valid(a)]
    pool = leaves + [{key: [a, b]} for a in leaves for b in good] + [{key: [{key: [a]}]} for a in leaves]
    _agrees_on(pool, cs, dfa, check, least=15)


def test_absent_or_value_conditions_are_variants():
    """circle-ci's jobs of type build: `if: {anyOf: [{not: {required: [type]}},
    {required: [type], properties: {type: {const: build}}}]}` is the value condition
    `properties: {type: {const: build}}` (_absent_or): variants (with the presence parts
    of its `then`), no intersection or complement in the term; instances against
    jsonschema."""
    import itertools
    then = {"anyOf": [{"required": ["executor"]}, {"oneOf": [{"required": ["machine"]}, {"required": ["docker"]}]}]}
    schema = {"type": "object", "additionalProperties": False, "properties": {
                  "type": {"enum": ["build", "noop", "x"]}, **{k: {} for k in ("executor", "machine", "docker")}},
              "if": {"anyOf": [{"not": {"required": ["type"]}},
                               {"required": ["type"], "properties": {"type": {"const": "build"}}}]},
              "then": {"type": "object", **then}, "else": {"properties": {"type": {"const": "noop"}}}}
    cs = schema_to_term(schema)
    assert not cs.term.boolean
    dfa = cs.dfa()
    check = jsonschema.Draft202012Validator(schema)
    seen = {True: 0, False: 0}
    for t, keys in itertools.product([None, "build", "noop", "x"], itertools.product([0, 1], repeat=3)):
        inst = {k: 1 for k, on in zip(("executor", "machine", "docker"), keys) if on}
        if t is not None:
            inst["type"] = t
        ok = check.is_valid(inst)
        seen[ok] += 1
        assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert min(seen.values()) >= 5, seen


def test_recursive_rules_take_nullable_lazy_and_boolean_pieces():
    """A nullable piece beside a recursive reference becomes an optional terminal of its
    non-empty texts (_RecursiveRules._minus_empty): a deferred term (circle-ci's keys
    other than the known ones: the empty key among them) is read through its body, an
    intersection is intersected with the non-empty texts; the same non-empty texts."""
    from structgen.fsm.json.recursive import _RecursiveRules
    from structgen.fsm.json.source import JsonTermBuilder
    from structgen.fsm.json.strings import StringTerms
    tb = JsonTermBuilder()
    other = StringTerms(tb).not_in(["ab", "b"])
    both = tb.intersect([tb.star(tb.literal(b"a")), tb.star(tb.alt([tb.literal(b"a"), tb.literal(b"b")]))])
    rules = _RecursiveRules(tb, tb.empty, {}, {})
    for t in (other, both):
        assert t.nullable
        m = rules._minus_empty(t)
        assert not tb.matches(m, b"")
        for w in (b"a", b"aa", b"ab", b"b", b"ba", b"abc", b"x"):
            assert tb.matches(m, w) == tb.matches(t, w), (t, w)

def test_keyword_values_of_the_wrong_kind_name_keyword_and_pointer():
    """A keyword whose value has the wrong kind is refused naming it and its place,
    not read some other way (`required: "ab"` as keys a and b, `maxItems: 1.5` as 1,
    `anyOf: {}` as no constraint, a presence formula of an empty oneOf) or failing deep
    inside with a TypeError (`type: {...}`). Integral floats are integers."""
    bad = [({"properties": {"a": {"minimum": "x"}}}, "minimum", "#/properties/a"),
           ({"minItems": -1}, "minItems", "#"), ({"maxItems": 1.5}, "maxItems", "#"),
           ({"maxLength": True}, "maxLength", "#"), ({"maxLength": float("inf")}, "maxLength", "#"),
           ({"required": "ab"}, "required", "#"), ({"required": ["a", 1]}, "required", "#"),
           ({"multipleOf": 0}, "multipleOf", "#"), ({"minimum": float("nan")}, "minimum", "#"),
           ({"items": {"pattern": 3}}, "pattern", "#/items"), ({"patternProperties": []}, "patternProperties", "#"),
           ({"type": {"x": 1}}, "type", "#"), ({"properties": {"a": {"type": "int"}}}, "type", "#/properties/a"),
           ({"type": ["object", {"x": 1}]}, "type", "#"), ({"type": []}, "type", "#"),
           ({"allOf": 3}, "allOf", "#"), ({"anyOf": {}}, "anyOf", "#"), ({"not": {"oneOf": []}}, "oneOf", "#/not"),
           ({"not": {"required": "ab"}}, "required", "#/not"),
           ({"anyOf": [{"required": ["a"]}, {"properties": 3}]}, "properties", "#/anyOf/1")]
    for schema, keyword, pointer in bad:
        with pytest.raises(SchemaError) as e:
            schema_to_term(schema)
        assert (e.value.keyword, e.value.pointer) == (keyword, pointer), (schema, str(e.value))
    for schema in ({"maxItems": 2.0}, {"minLength": 1.0, "type": "string"}):
        schema_to_term(schema)
    with pytest.raises(SchemaError, match="not 'x' .a subschema of #/properties/b") as e:
        schema_to_term({"type": "object", "properties": {"b": {"items": "x"}}})
    assert e.value.pointer == "#/properties/b"  # (the schema holding it: a string has no place of its own)


def test_draft4_boolean_exclusive_bounds():
    """Draft-04's `exclusiveMinimum: true` makes `minimum` exclusive (it was ignored, so
    the bound itself was accepted); a bound merged from another allOf branch keeps its
    own kind. Oracle: jsonschema's Draft4Validator."""
    schemas = [{"type": "integer", "minimum": 5, "exclusiveMinimum": True, "maximum": 9, "exclusiveMaximum": True},
               {"type": "number", "minimum": 1.5, "exclusiveMinimum": True, "maximum": 2, "exclusiveMaximum": False},
               {"allOf": [{"minimum": 3, "exclusiveMinimum": True}, {"minimum": 5}]},
               {"allOf": [{"maximum": 3, "exclusiveMaximum": True}, {"maximum": 5}]}]
    values = [1, 1.5, 1.51, 2, 3, 4, 5, 6, 8, 9, 10]
    for schema in schemas:
        cs = schema_to_term(schema)
        dfa, v = cs.dfa(), jsonschema.Draft4Validator(schema)
        for x in values:
            assert cs.accepts(cs.canonical(x), dfa) == v.is_valid(x), (schema, x)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("schema", [
    # $refs that lead only to each other (no value at all), met by an allOf branch's keywords
    {"$defs": {"a": {"$ref": "#/$defs/b", "type": "object"}, "b": {"$ref": "#/$defs/a", "type": "object"}},
     "allOf": [{"$ref": "#/$defs/a", "properties": {"x": {"type": "integer"}}}, {"type": "object"}]},
    {"$defs": {"n": {"anyOf": [{"$ref": "#/$defs/n"}]}}, "allOf": [{"anyOf": [{"$ref": "#/$defs/n"}]}, {"type": "string"}]},
])
def test_reference_cycles_without_values_are_refused(schema, strict):
    """A schema whose references only lead to each other holds no value: its compile
    ends in a SchemaError (the grammar's start derives no text), in both modes, not a
    RecursionError (merging it once asked, forever, whether its merge meets)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(SchemaError, match="derives no finite string"):
            schema_to_term(schema, strict=strict).dfa()
