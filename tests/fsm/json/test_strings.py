"""JSON strings (fsm/json/strings.py): lengths in code points, escapes, `pattern` as an ECMA
search (named groups, Unicode property escapes), and masks along bounded strings and
character runs equal to token-by-token walks."""
from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest
from oracles import compiled, live_tokens_brute_force, small_vocab

from structgen.fsm.json.schema import SchemaError, schema_to_term


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


def test_pattern_named_groups():
    """ECMA named groups `(?<name>...)` (a semver pattern's parts) are plain groups;
    error positions are the pattern's own (a lookbehind of two characters that would look
    before the repeat it stands in: refused)."""
    cs = schema_to_term({"type": "string", "pattern": r"^(?<major>0|[1-9]\d*)\.(?<minor>0|[1-9]\d*)$"})
    dfa = cs.dfa()
    assert [cs.accepts(t, dfa) for t in ('"1.2"', '"10.0"', '"01.2"', '"1."', '"[(?<x]"')] == \
        [True, True, False, False, False]
    cs = schema_to_term({"type": "string", "pattern": r"^[(?<x]\(?<y$"})  # not groups
    assert cs.accepts('"x<y"') and cs.accepts('"?(<y"') and not cs.accepts('"xy"')
    for pattern, pos in ((r"(?<a>x)(", 7), (r"(?<a>x)((?<=yy)z)*", 8)):
        with pytest.raises(SchemaError, match=f"at position {pos}\n"):
            schema_to_term({"type": "string", "pattern": pattern})


def _regex_module_validator(schema):
    """jsonschema, with `pattern` read by the `regex` module (jsonschema's re refuses \\p;
    regex has its own Unicode tables: an engine and data apart from ours)."""
    import regex

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
    import structgen.fsm.core.walks as walks
    from structgen.fsm.json.schema import build_automaton
    monkeypatch.setattr(walks, "native", None)  # (chains are the numpy walks' path)
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
    from structgen.fsm.core.terms import LAZY
    from structgen.fsm.json.schema import build_automaton
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
