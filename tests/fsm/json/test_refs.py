"""$ref and $dynamicRef (fsm/json/dynamic.py): local and draft-04 identifiers, references
into places that are no keyword, other documents, dynamic scopes, and reference
cycles without values, against jsonschema."""
from __future__ import annotations

import warnings

import jsonschema
import pytest
from oracles import compiled, valid

from structgen.fsm.json.schema import SchemaError, canonical_json, schema_to_term


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
