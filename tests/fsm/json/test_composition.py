"""allOf / anyOf / not (fsm/json/allof.py, merge.py): merges instead of intersections,
unions distributed over objects, unevaluatedProperties and unevaluatedItems beside
applicators, against jsonschema. (oneOf: test_oneof.py; if/then/else and presence
parts: test_variants.py.)"""
from __future__ import annotations

import json
import random

import jsonschema
import pytest
from oracles import agrees_on as _agrees_on
from oracles import compiled, valid

from structgen.fsm.json.schema import SchemaError, SchemaWarning, schema_to_term

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
