"""`format` (fsm/json/formats.py): dates and leap seconds, IRIs, URI templates, hostnames,
format regex and custom formats, against oracles written apart (RFC readers, Python's
re, an ECMA-262 pattern reader) and token-by-token walks."""
from __future__ import annotations

import json
import random
import re
import warnings

import jsonschema
import pytest
from oracles import compiled, live_tokens_brute_force, random_walks, small_vocab

from structgen.fsm.json.schema import SchemaError, SchemaWarning, schema_to_term


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
    from structgen.fsm.core.terms import TermBuilder
    from structgen.fsm.json.schema import build_automaton
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


def test_custom_formats_annotations_or_refused():
    """A format the specification does not define (SchemaStore's color, cron,
    mime-type...) is an annotation by default, with a SchemaWarning naming it and its
    pointer (custom_formats='ignore': silently); custom_formats='refuse' refuses it,
    naming it and the option. A standard format it cannot enforce (idn-hostname) is
    still refused, and known ones still hold. Against jsonschema, which asserts no format."""
    schema = {"type": "object", "properties": {"c": {"type": "string", "format": "color", "maxLength": 4},
                                               "d": {"type": "string", "format": "date"}}, "required": ["c"]}
    with pytest.raises(SchemaError, match="'color' is not supported .*custom_formats='annotate'") as e:
        schema_to_term(schema, custom_formats="refuse")
    assert e.value.pointer == "#/properties/c"
    with pytest.raises(SchemaError, match="'idn-hostname' is not supported \\(strict"):
        schema_to_term({"type": "string", "format": "idn-hostname"}, custom_formats="ignore")
    with pytest.raises(SchemaError, match="custom_formats must be"):
        schema_to_term(schema, custom_formats="yes")
    with pytest.warns(SchemaWarning, match="format 'color' at #/properties/c is not one the specification"):
        schema_to_term(schema)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        acc, cs = compiled(schema, custom_formats="ignore")
    v = jsonschema.Draft202012Validator(schema)
    for inst in [{"c": "red"}, {"c": "#fff"}, {"c": "blue!"}, {"c": 3}, {"d": "2024-01-01"},
                 {"c": "", "d": "2024-01-01"}]:
        assert acc(cs.canonical(inst)) == v.is_valid(inst), inst
    assert not acc('{"c":"red","d":"2024-13-01"}')  # (date still asserted)
    acc, cs = compiled({"format": "color"}, custom_formats="ignore")
    assert acc('"red"') and acc("1") and acc("{}")


# -- format regex -------------------------------------------------------------------------
_SYNTAX = set("^$\\.*+?()[]{}|/")


def _ecma_u_valid(p: str) -> bool:
    """Whether p is an ECMA-262 pattern in unicode mode (the `u` flag): a recursive-descent
    reader of the spec's Pattern grammar (lookbehind, named groups and \\k, \\p{...},
    backreferences within the group count, empty classes...), written apart from the
    automaton's subset to check it."""
    i, groups, names, refs, named = 0, 0, set(), [], []

    class Bad(Exception):
        pass

    def peek(k=0):
        return p[i + k] if i + k < len(p) else ""

    def take(s):
        nonlocal i
        if p.startswith(s, i):
            i += len(s)
            return True
        return False

    def digits():
        nonlocal i
        j = i
        while peek().isdigit() and peek().isascii():
            i += 1
        return p[j:i]

    def disjunction():
        alternative()
        while take("|"):
            alternative()

    def alternative():
        while i < len(p) and peek() not in "|)":
            term()

    def term():
        nonlocal groups
        if take("^") or take("$") or take("\\b") or take("\\B"):
            return quantifier(allowed=False)
        for look in ("(?=", "(?!", "(?<=", "(?<!"):
            if take(look):
                disjunction()
                if not take(")"):
                    raise Bad
                return quantifier(allowed=False)
        atom()
        quantifier(allowed=True)

    def quantifier(allowed):
        nonlocal i
        start = i
        if take("*") or take("+") or take("?"):
            pass
        elif peek() == "{":
            i += 1
            n = digits()
            if not n:
                raise Bad
            m = n
            if take(","):
                m = digits()
            if not take("}") or (m and int(n) > int(m)):
                raise Bad
        else:
            return
        if not allowed:
            raise Bad
        take("?")
        assert i > start

    def escape(in_class):
        nonlocal i
        c = peek()
        i += 1
        if c in "dDsSwWfnrtv" or (in_class and c in "b-"):
            return None if c in "dDsSwW" else c
        if c == "c" and peek().isascii() and peek().isalpha():
            i += 1
            return "c"
        if c == "0" and not peek().isdigit():
            return "\0"
        if c == "x" and len(h := p[i:i + 2]) == 2 and all(x in "0123456789abcdefABCDEF" for x in h):
            i += 2
            return chr(int(h, 16))
        if c == "u":
            if take("{"):
                h = ""
                while peek() and peek() in "0123456789abcdefABCDEF":
                    h += peek()
                    i += 1
                if not h or not take("}") or int(h, 16) > 0x10FFFF:
                    raise Bad
                return chr(int(h, 16))
            h = p[i:i + 4]
            if len(h) == 4 and all(x in "0123456789abcdefABCDEF" for x in h):
                i += 4
                return chr(int(h, 16))
            raise Bad
        if c in "pP" and take("{"):
            j = p.find("}", i)
            if j < 0 or not re.fullmatch(r"[A-Za-z_]+(?:=[A-Za-z_]+)?", p[i:j]):
                raise Bad
            i = j + 1
            return None
        if not in_class and c.isdigit() and c != "0":
            refs.append(int(c + digits()))
            return None
        if not in_class and c == "k":
            if not take("<"):
                raise Bad
            j = p.find(">", i)
            if j <= i:
                raise Bad
            named.append(p[i:j])
            i = j + 1
            return None
        if c in _SYNTAX:
            return c
        raise Bad

    def class_atom():
        nonlocal i
        if take("\\"):
            return escape(in_class=True), True
        c = peek()
        if not c:
            raise Bad
        i += 1
        return c, False

    def char_class():
        take("^")
        while not take("]"):
            a, escaped = class_atom()
            if peek() == "-" and peek(1) not in ("]", ""):
                i0 = i
                take("-")
                b, _ = class_atom()
                if a is None or b is None or ord(a) > ord(b):
                    raise Bad
                assert i > i0

    def atom():
        nonlocal i, groups
        c = peek()
        if c == "(":
            i += 1
            if take("?:"):
                pass
            elif take("?<"):
                j = p.find(">", i)
                name = p[i:j]
                if j < 0 or not re.fullmatch(r"[A-Za-z_$][\w$]*", name) or name in names:
                    raise Bad
                names.add(name)
                i = j + 1
                groups += 1
            elif peek() == "?":
                raise Bad
            else:
                groups += 1
            disjunction()
            if not take(")"):
                raise Bad
        elif c == "[":
            i += 1
            char_class()
        elif c == "\\":
            i += 1
            escape(in_class=False)
        elif c == "." or (c and c not in _SYNTAX) or c == "/":
            i += 1
        else:
            raise Bad

    try:
        disjunction()
        if i != len(p):
            raise Bad
    except (Bad, IndexError, ValueError):
        return False
    return all(r <= groups for r in refs) and all(n in names for n in named)


def test_format_regex_is_a_subset_both_readers_take():
    """format regex is a regular subset of ECMA-262 patterns (fsm/json_formats.py,
    _regex_syntax): random walks of its automaton all read as unicode-mode ECMA patterns
    (_ecma_u_valid, a reader of the spec's grammar) and compile with Python's re without
    a warning; texts that are no pattern (the test suite's, and more) are refused; the
    subset's own forms are taken; deeper nesting and the forms it leaves out are refused
    though valid (narrower, never wider)."""
    import warnings
    cs = schema_to_term({"type": "string", "format": "regex"})
    texts, dfa = random_walks(cs, n=400, max_len=60, seed=4)
    assert len(texts) > 300
    seen = set()
    for t in texts:
        p = json.loads(t)
        seen.add(p)
        assert _ecma_u_valid(p), p
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            re.compile(p)
    assert len(seen) > 150 and any("(" in p for p in seen) and any("[" in p for p in seen)
    assert any("{" in p for p in seen)
    take = ["([abc])+\\s+$", "(?:a|b)*?c{3}", "[a-z0-9_]+", "(((a)))", "^\\d{2,5}$", "a|", "()", "x(?=y)(?!z)",
            "\\x41\\u0042[\\-\\]]", "[^a-fA-F]{0,9}", "", "\\/\\.\\*", "\\bword\\B", "é+"]
    refuse_invalid = ["^(abc]", "\\a", "(?i)abc", "(?P<name>x)", "(?#comment)a", "a{2,1}", "[z-a]", "a**", "*a",
                      "(?=a)*", "\\b+", "{", "}", "]", "a{", "(a", "a)", "\\", "[a", "\\c", "\\x4", "\\u12",
                      "(?<n>a)(?<n>b)", "\\2(a)", "\\k<x>", "[\\d-a]"]
    refuse_valid = ["((((a))))", "(?<=a+)b", "(?<name>x)", "(a)\\1", "[]", "[^]", "\\cA", "\\p{L}", "a{10}", "\\0"]
    for p in take + refuse_invalid + refuse_valid:
        ok = _ecma_u_valid(p)
        assert ok == (p not in refuse_invalid), p  # (the reader itself, on known cases)
        assert cs.accepts(json.dumps(p, ensure_ascii=False), dfa) == (p in take), p
