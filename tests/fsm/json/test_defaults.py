"""Generation defaults that are subsets of the valid outputs (issue #51): integers without
a fraction part (but every text of an integer refused by a complement), against
jsonschema read with Decimal numbers (oracles.exact_validator)."""
from __future__ import annotations

import json
from decimal import Decimal

import pytest
from oracles import compiled, exact_validator

from structgen.fsm import SchemaWarning

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


# -- formats -----------------------------------------------------------------------------
def test_openapi_integer_formats_are_ranges_on_numbers():
    """int32 / int64: integers in their ranges, where the value is a number (a format
    asserts nothing of other types). Oracle: jsonschema's Decimal reading of the same
    range written as keywords."""
    for fmt, (lo, hi) in (("int32", (-2 ** 31, 2 ** 31 - 1)), ("int64", (-2 ** 63, 2 ** 63 - 1))):
        acc, _ = compiled({"format": fmt})
        check = exact_validator({"anyOf": [{"not": {"type": "number"}},
                                           {"type": "integer", "minimum": lo, "maximum": hi}]})
        for text in [str(lo), str(hi), str(lo - 1), str(hi + 1), "0", "1.5", '"x"', "null", str(hi * 10)]:
            assert acc(text) == check.is_valid(json.loads(text, parse_float=Decimal)), (fmt, text)


def test_openapi_byte_is_base64_and_the_others_any_string():
    """byte: padded base64 (oracle: Python's base64 decoder with validate=True);
    float, double, binary, password: no constraint, and no warning."""
    import base64
    import binascii
    import warnings

    acc, _ = compiled({"type": "string", "format": "byte"})
    for s in ["", "aGVsbG8=", "aGVsbA==", "aGVs", "aGVsbG8", "a===", "aGVs bG8=", "aGVs bG8", "aGVsbG8=="]:
        try:
            base64.b64decode(s, validate=True)
            ok = True
        except binascii.Error:
            ok = False
        assert acc(json.dumps(s)) == ok, s
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fmt in ("float", "double"):
            acc, _ = compiled({"type": "number", "format": fmt})
            assert acc("1.5") and acc("-2")
        for fmt in ("binary", "password"):
            acc, _ = compiled({"type": "string", "format": fmt})
            assert acc('"any thing"')


def test_format_aliases_are_their_formats():
    acc, _ = compiled({"type": "string", "format": "datetime"})
    assert acc('"2024-02-29T12:00:00Z"') and not acc('"2023-02-29T12:00:00Z"') and not acc('"x"')
    acc, _ = compiled({"type": "string", "format": "ip-address"})
    assert acc('"10.0.0.1"') and not acc('"10.0.0.256"')


def test_unknown_format_warns_with_its_pointer_and_is_an_annotation():
    schema = {"type": "object", "properties": {"c": {"type": "string", "format": "color", "maxLength": 3}}}
    with pytest.warns(SchemaWarning, match=r"format 'color' at #/properties/c is not one"):
        acc, _ = compiled(schema)
    assert acc('{"c":"red"}') and not acc('{"c":"blue"}')  # (maxLength still holds)


# -- typos --------------------------------------------------------------------------------
def test_a_misspelt_keyword_warns_naming_the_nearest():
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLenght": 3}},
              "$defs": {"b": {"minimun": 1}}, "requird": ["a"]}
    with pytest.warns(SchemaWarning) as got:
        compiled(schema)
    texts = sorted(str(w.message) for w in got)
    assert texts == ["unknown keyword 'maxLenght' at #/properties/a is ignored: did you mean 'maxLength'?",
                     "unknown keyword 'minimun' at #/$defs/b is ignored: did you mean 'minimum'?",
                     "unknown keyword 'requird' at # is ignored: did you mean 'required'?"]


def test_other_vocabularies_and_property_names_do_not_warn():
    import warnings
    schema = {"type": "object", "title": "t", "example": {"maxLenght": 1}, "x-maxLenght": 1, "nullable": True,
              "markdownDescription": "d", "discriminator": {"propertyName": "k"}, "$comment": "c",
              "properties": {"maxLenght": {"type": "string", "readOnly": True, "examples": ["x"]},
                             "k": {"const": {"minimun": 1}}}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled(schema)


# -- Pydantic datetimes ---------------------------------------------------------------------
def test_pydantic_datetime_takes_naive_timestamps_too():
    """A plain `datetime` field reads naive and aware timestamps (pydantic is the oracle,
    on the texts the automaton walks and on hand-picked ones); AwareDatetime still needs
    the offset and NaiveDatetime still refuses it."""
    import datetime

    from oracles import random_walks
    from pydantic import AwareDatetime, BaseModel, NaiveDatetime, ValidationError

    class Stamps(BaseModel):
        d: datetime.datetime
        a: AwareDatetime
        n: NaiveDatetime

    acc, cs = compiled(Stamps)
    texts, _ = random_walks(cs, n=60, seed=3)
    assert len(texts) > 30 and any(json.loads(t)["d"][-1].isdigit() for t in texts)  # (naive ones among them)
    for t in texts:
        Stamps.model_validate_json(t)  # raises if pydantic refuses it
    for d in ["2024-02-29T12:30:00", "2024-02-29T12:30:00.25", "2024-02-29t12:30:00Z", "2024-02-29T12:30:00+05:30",
              "2023-02-29T12:30:00", "2024-02-29T24:00:00", "2024-02-29T12:30:00+24:00"]:
        for field, other in (("d", {"a": "2024-01-01T00:00:00Z", "n": "2024-01-01T00:00:00"}),
                             ("a", {"d": "2024-01-01T00:00:00", "n": "2024-01-01T00:00:00"}),
                             ("n", {"d": "2024-01-01T00:00:00", "a": "2024-01-01T00:00:00Z"})):
            text = json.dumps({"d": None, "a": None, "n": None} | other | {field: d}, separators=(",", ":"))
            try:
                Stamps.model_validate_json(text)
                ok = True
            except ValidationError:
                ok = False
            assert acc(text) == ok, text


# -- unsatisfiable schemas -----------------------------------------------------------------
UNSATISFIABLE = [
    ({"type": "object", "properties": {"age": {"type": "integer", "minimum": 5, "maximum": 3}}, "required": ["age"]},
     "minimum 5 > maximum 3 at #/properties/age"),
    ({"type": "object", "required": ["x"], "additionalProperties": False},
     "required key 'x' not allowed by additionalProperties: false at #"),
    ({"type": "array", "items": {"type": "string", "minLength": 5, "maxLength": 2}, "minItems": 1},
     "minLength 5 > maxLength 2 at #/items"),
    ({"type": "integer", "exclusiveMinimum": 1, "maximum": 1.5}, "no integer between exclusiveMinimum 1 and maximum 1.5 at #"),
    ({"type": "integer", "const": "a"}, 'const "a" is not of type "integer" at #'),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]},
     "allOf/0's type \"string\" and allOf/1's type \"integer\" have no value in common at #"),
    ({"$defs": {"n": {"type": "number", "minimum": 2, "exclusiveMaximum": 2}}, "$ref": "#/$defs/n"},
     "minimum 2 = exclusiveMaximum 2 at #/$defs/n"),
    ({"not": {}}, "not {} excludes every value at #"),
]


@pytest.mark.parametrize("schema, named", UNSATISFIABLE, ids=[n for _, n in UNSATISFIABLE])
def test_an_unsatisfiable_schema_is_refused_naming_keywords_and_pointer(schema, named):
    """Refused where generation would start (require_output), the error naming what
    contradicts and where; jsonschema confirms that no instance near the contradiction
    is valid (a weak oracle: the instances tried are a handful)."""
    from oracles import small_vocab

    from structgen import fsm
    vocab = small_vocab([bytes([b]) for b in range(32, 127)])
    auto = fsm.compile_json_schema(schema, vocab)
    with pytest.raises(fsm.ConstraintError, match="accepts no output at all") as got:
        auto.require_output()
    assert named in str(got.value)
    check = exact_validator(schema)
    for inst in [None, 0, 1, 2, 1.5, 3, 4, "a", "abcd", [], ["abc"], {}, {"age": 4}, {"x": 1}]:
        assert not check.is_valid(inst), inst


def test_a_contradiction_in_an_optional_part_leaves_the_rest():
    """An optional property that no value satisfies is left out: the schema still has
    outputs, and is not refused."""
    from oracles import small_vocab

    from structgen import fsm
    vocab = small_vocab([bytes([b]) for b in range(32, 127)])
    schema = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 5, "maximum": 3}}}
    assert fsm.compile_json_schema(schema, vocab).require_output()
    acc, _ = compiled(schema)
    assert acc("{}") and not acc('{"age":4}')


# -- whitespace -----------------------------------------------------------------------------
@pytest.mark.parametrize("recursion", ["auto", "grammar"])
@pytest.mark.parametrize("whitespace, limit", [("compact", 0), ("flexible", 3)])
def test_whitespace_is_bounded_in_every_mode(recursion, whitespace, limit):
    """The bound docs/json-schema.md states: at most max_whitespace bytes at each place,
    so a run between two structural characters is at most twice that, and at the ends
    of the document once; for declared, free and recursive values alike."""
    tree = {"$defs": {"n": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
            "$ref": "#/$defs/n"}
    for schema, inner in [({"type": "object", "properties": {"a": {"type": "array"}}}, '{"a":[%s]}'),
                          ({}, "[%s]"), (tree, '{"kids":[%s]}')]:
        acc, _ = compiled(schema, whitespace=whitespace, max_whitespace=limit, recursion=recursion)
        runs = range(0, 2 * limit + 3)
        assert max(n for n in runs if acc(inner % (" " * n))) == 2 * limit, schema
        assert max(n for n in runs if acc(" " * n + inner % "")) == limit, schema
        assert max(n for n in runs if acc(inner % "" + "\n" * n)) == limit, schema
