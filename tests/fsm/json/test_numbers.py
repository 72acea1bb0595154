"""JSON numbers (fsm/json/numbers.py): exact decimal bounds, the number universe,
multipleOf, and the drafts' readings of integers and exclusive bounds, against Decimal
arithmetic and jsonschema."""
from __future__ import annotations

import json
import random
import re
from decimal import Decimal

import jsonschema
import pytest
from oracles import compiled, live_tokens_brute_force, small_vocab

from structgen.fsm.json.schema import schema_to_term

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
        # (an integer is written without a fraction: 2, never 2.0, a valid text of it too)
        ok = v == v.to_integral_value() and "." not in text if ty == "integer" else True
        for k, b in kw.items():
            b = Decimal(str(b))
            ok &= {"minimum": v >= b, "maximum": v <= b, "exclusiveMinimum": v > b,
                   "exclusiveMaximum": v < b}[k]
        assert acc(text) == ok, (schema, text)


def test_number_intervals_random():
    """Random decimal bounds (either side, exclusive or not, crossing, equal) against
    Decimal comparisons, over random texts of the number universe (trailing zeros,
    -0 excluded); the interval term has no intersection (json_numbers.interval)."""
    from structgen.fsm.core.terms import TermBuilder
    from structgen.fsm.json.numbers import NumberTerms
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
    the oracle) is a multiple within the bounds, under `not` too; integers (type integer,
    or multiples of an integer) written without a fraction, except under `not`, whose
    complement refuses every text of an integer."""
    acc, _ = compiled(schema)
    inner = schema.get("not", schema)
    k = Decimal(str(inner["multipleOf"]))
    integers = "not" not in schema and (inner.get("type") == "integer" or (k == k.to_integral_value() and k >= 1))
    texts = [str(i) for i in range(-60, 120)] + [f"{i}.{f}" for i in range(-3, 12)
                                                for f in ("5", "25", "01", "10", "75", "0", "00", "3", "0173", "519")]
    texts += [str(k * n) for n in (2, 3, 17, -9, 1001)] + [str(k * n + 1) for n in (2, 17)] + ["123456789", "246913578.0"]
    for text in texts:
        v = Decimal(text)
        if v == 0 and text.startswith("-"):
            continue  # (outside the number universe)
        ok = v % k == 0 and (inner.get("type", "number") == "number" or v == v.to_integral_value())
        ok &= inner.get("minimum", v) <= v <= inner.get("maximum", v) and v > inner.get("exclusiveMinimum", v - 1)
        ok &= not (integers and "." in text)
        assert acc(text) == (ok if "not" not in schema else not ok), (schema, text)


def test_multiple_of_shortest_members_are_shortest():
    """The member each residue state gives for guesses and shortest lengths (emptiness
    checks rely on it being a shortest completion): by Decimal arithmetic it completes
    the prefix to a multiple, and no shorter text does, from prefixes of many divisors.
    (The residue term alone takes `[0-9]*(.[0-9]*)?`, an empty part worth 0: its users
    intersect it with the number universe.)"""
    import itertools

    from structgen.fsm.core.terms import LAZY, NOTHING, TermBuilder
    from structgen.fsm.json.numbers import NumberTerms

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


@pytest.mark.parametrize("draft,check", [("http://json-schema.org/draft-04/schema#", jsonschema.Draft4Validator),
                                         ("http://json-schema.org/draft-07/schema#", jsonschema.Draft7Validator),
                                         (None, jsonschema.Draft202012Validator)])
def test_draft04_integers_have_no_fraction(draft, check):
    """Draft-04's integer is a number written without a fraction: 2.0 is none (jsonschema's
    Draft4Validator), where from draft-06 on it is one (SchemaStore's WordPress theme, a
    draft-04 schema, let walks write `"version":2.0`). From draft-06 on, integers are
    still written without one (a subset of the valid texts: issue #51). Enums and
    consts keep their values' every text: 1.0 equals 1 in all drafts."""
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
        key, value = text[2], text[5:-1]
        written = not (key in "nm" and re.fullmatch(r"-?[0-9]+\.[0-9]+", value))
        assert cs.accepts(text) == (check(schema).is_valid(json.loads(text)) and written), (draft, text)


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
