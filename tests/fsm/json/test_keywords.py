"""Keywords across types (fsm/json/keywords.py): enum and const, keywords of the types that
applicators exclude, unsupported keywords and values of the wrong kind (named with
their pointer), flexible whitespace and size limits."""
from __future__ import annotations

import json
import time
import warnings

import pytest
from oracles import compiled, valid

from structgen.fsm.json.schema import SchemaError, SchemaWarning, canonical_json, schema_to_term


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
