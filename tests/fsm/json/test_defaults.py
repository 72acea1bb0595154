"""Generation defaults that are subsets of the valid outputs (issue #51): integers without
a fraction part (but every text of an integer refused by a complement), against
jsonschema read with Decimal numbers (oracles.exact_validator)."""
from __future__ import annotations

import json
from decimal import Decimal

import pytest
from oracles import compiled, exact_validator

TEXTS = ["0", "2", "-3", "7", "12", "2.0", "2.00", "-3.0", "0.0", "7.000", "2.5", "-0.5", "12.25"]
INTEGER_SCHEMAS = [
    {"type": "integer"},
    {"type": "integer", "minimum": 1, "maximum": 10},
    {"type": ["integer", "string"]},
    {"type": "number", "multipleOf": 1},
    {"type": "array", "items": {"type": "integer"}},
    {"allOf": [{"type": "integer"}, {"minimum": 0}]},
    {"anyOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},
    {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},  # (branches overlap: a complement)
    {"oneOf": [{"type": "integer", "maximum": 3}, {"type": "integer", "minimum": 2}]},
    {"not": {"type": "integer"}},
    {"type": "number", "not": {"type": "integer"}},
    {"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"maximum": 0}},
    {"type": "number", "not": {"multipleOf": 2}},
]


def wrap(text: str, schema: dict) -> str:
    return f"[{text}]" if schema.get("type") == "array" else text


@pytest.mark.parametrize("schema", INTEGER_SCHEMAS, ids=[json.dumps(s) for s in INTEGER_SCHEMAS])
def test_integers_have_one_text_and_stay_exact(schema):
    """Every accepted text is valid; every valid value's fraction-free text is accepted
    (so no schema with valid integers loses them); no integer is accepted with a
    fraction where the schema's own (positive) keyword says integer, while complements
    (not, if, overlapping oneOf branches) still refuse every text of an integer."""
    acc, cs = compiled(schema)
    check = exact_validator(schema)
    for text in TEXTS:
        t = wrap(text, schema)
        value = json.loads(t, parse_float=Decimal)
        ok = check.is_valid(value)
        if acc(t):
            assert ok, (schema, t)
        elif ok:  # valid, refused: only a fraction-written integer, whose integer text is taken
            v = Decimal(text)
            assert v == v.to_integral_value() and "." in text, (schema, t)
            assert acc(wrap(str(int(v)), schema)), (schema, t)
        if ok and "." not in text:
            assert acc(t), (schema, t)


def test_integer_keyword_writes_no_fraction():
    """The issue's case: `{"type": "integer"}` took `2.000...` (a model extended it to
    max_tokens, and it parses as a float); `number` keeps its fractions."""
    acc, cs = compiled({"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}})
    assert acc('{"n":2}') and not acc('{"n":2.0}') and not acc('{"n":2.000}')
    assert acc('{"x":2.0}') and acc('{"x":2}') and acc('{"x":2.5}')
    assert cs.canonical({"n": 2.0, "x": 2.0}) == '{"n":2,"x":2}'  # (an integral value's text)
