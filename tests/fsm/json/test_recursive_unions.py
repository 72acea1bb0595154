"""Recursive schemas beside other keywords, exact without intersections: unions and oneOfs
told apart by keys, values or types, `type` beside recursive unions and $refs (copies
per type), properties merged with their patterns, value conditions; lenient narrowing
where branches overlap. Against jsonschema and random walks."""
from __future__ import annotations

import json
import random
import warnings

import pytest
from oracles import exact_recursive as _exact_recursive
from oracles import instances_agree as _instances_agree
from oracles import validator as _validator
from oracles import walks_validate as _walks_validate

from structgen.fsm.json.schema import SchemaError, SchemaWarning, schema_to_term


def test_recursive_oneof_of_distinct_types_is_exact():
    """A oneOf whose branches are oneOfs of distinct types (package.json's exports: a
    path or null, an object of entries, an array of them) is disjoint: the branches'
    types are read through their own oneOf/anyOf (_types_of), so a recursive schema
    compiles exactly in strict mode, with no intersection."""
    entry = {"oneOf": [{"type": ["string", "null"], "maxLength": 3},
                       {"type": "object", "properties": {"k": {"$ref": "#/$defs/e"}}, "additionalProperties": False}]}
    schema = {"$defs": {"entry": entry, "e": {"oneOf": [
        {"$ref": "#/$defs/entry"}, {"type": "array", "items": {"$ref": "#/$defs/entry"}, "maxItems": 3}]}},
        "$ref": "#/$defs/e"}
    cs = _exact_recursive(schema)
    texts = _walks_validate(cs, schema)
    assert any(t.startswith(b"[") for t in texts) and any(t.startswith(b"{") for t in texts)


def test_recursive_union_of_objects_with_the_empty_object_in_common():
    """anyOf of recursive objects whose properties are all optional: `{}` is in each
    branch (and `[]` in both arrays), and both declare key "a". Their empty bodies
    were two empty rules, a reduce/reduce conflict at `}`, and so were their "a"
    slots; the union's alternatives are merged on their common first parts
    (_RecursiveRules._factored), so the schema compiles exactly in strict mode: random
    instances are accepted iff jsonschema says valid, and walks validate.
    (package.json's exports, in lenient mode, is such a union.)"""
    ref = {"$ref": "#/$defs/n"}

    def obj(*keys):
        return {"type": "object", "properties": {k: ref for k in keys}, "additionalProperties": False}
    schema = {"$defs": {"n": {"anyOf": [
        obj("a", "b"), obj("a", "c"), {"type": "array", "items": ref, "maxItems": 2},
        {"type": "array", "items": {"type": "integer"}}, {"type": "string", "maxLength": 2}]}},
        "$ref": "#/$defs/n"}
    cs = _exact_recursive(schema)
    rng = random.Random(0)

    def node(depth):
        r = rng.random()
        if depth >= 3 or r < 0.2:
            return rng.choice(["", "xy", "xyz", 1, [], {}, [1, 2], [1, "x"]])
        if r < 0.4:
            return [node(depth + 1) for _ in range(rng.randint(0, 3))]
        return {k: node(depth + 1) for k in sorted(rng.sample("abc", rng.randint(0, 2)))}
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)


def test_type_beside_recursive_union_of_untyped_branches_is_exact():
    """`type` and minProperties beside a oneOf whose branches say no type (cmake-presets'
    root: objects told apart by a const, values that recurse): exact in strict mode,
    instances accepted iff jsonschema says valid, walks validate."""
    ref = {"$ref": "#/$defs/n"}
    schema = {"$defs": {"n": {"type": "object", "minProperties": 1, "oneOf": [
        {"properties": {"id": {"const": 1}, "kids": {"type": "array", "items": ref, "maxItems": 3}},
         "required": ["id"], "additionalProperties": False},
        {"properties": {"id": {"const": 2}, "next": ref}, "required": ["id"], "additionalProperties": False}]}},
        "$ref": "#/$defs/n"}
    cs = _exact_recursive(schema)
    rng = random.Random(4)

    def node(depth):
        if depth >= 3 or rng.random() < 0.15:
            return rng.choice([{"id": 1}, {"id": 2}, {"id": 3}, {}, "x", 1, {"id": 1, "next": {"id": 2}}])
        out = {"id": rng.choice([1, 1, 2, 2, 3])} if rng.random() < 0.9 else {}
        for k in rng.sample(["kids", "next"], rng.randint(0, 2)):
            out[k] = [node(depth + 1) for _ in range(rng.randint(0, 2))] if k == "kids" else node(depth + 1)
        return out
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)


def test_type_beside_union_with_a_recursive_ref_branch_is_exact():
    """`type` beside an anyOf whose branch is a $ref to a recursive schema that says no
    type (skaffold v2beta22's root): the branch takes the type, exact in strict mode (an
    intersection with the recursive reference before); a branch that leads back to
    the node itself at the same depth is not distributed again (that recursion has no
    end: test_recursive_intersections_relax_in_lenient_mode)."""
    t = {"properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}, "maxItems": 3},
                        "name": {"type": "string", "maxLength": 3}}, "additionalProperties": False}
    schema = {"$defs": {"t": t}, "type": "object", "anyOf": [{"$ref": "#/$defs/t"}]}
    cs = _exact_recursive(schema)
    rng = random.Random(6)

    def node(depth):
        if depth >= 3 or rng.random() < 0.2:
            return rng.choice([{}, {"name": "ab"}, {"name": "abcd"}, {"z": 1}, {"z": "x"}, "x", []])
        out = {}
        for k in rng.sample(["kids", "name", "z"], rng.randint(0, 2)):
            out[k] = [node(depth + 1) for _ in range(rng.randint(0, 2))] if k == "kids" else \
                rng.choice(["a", "abcd", 1]) if k == "name" else rng.choice([1, "1"])
        return out
    _instances_agree(cs, schema, node, 400, 50)
    _walks_validate(cs, schema)


def test_recursive_union_reads_its_plain_branches_as_one_terminal():
    """A union of many objects without a recursive reference beside one with it (SAM's
    resources: ~900 objects told apart by their Type): the plain branches are one
    terminal (their union, one lexeme going on), not one terminal each (a lexeme per
    branch going on at once, a lexer item each per byte: seconds per token). Exact:
    instances agree with jsonschema, walks validate."""
    kinds = [f"K{i}" for i in range(40)]
    plain = [{"type": "object", "properties": {"Type": {"const": k}, "n": {"type": "integer"}},
              "required": ["Type"], "additionalProperties": False} for k in kinds]
    rec = {"type": "object", "properties": {"Type": {"const": "Group"}, "items": {"type": "array", "items": {
        "$ref": "#/$defs/r"}, "maxItems": 3}}, "required": ["Type"], "additionalProperties": False}
    schema = {"$defs": {"r": {"anyOf": plain + [rec]}}, "$ref": "#/$defs/r"}
    cs = _exact_recursive(schema, recursion="grammar")
    assert len(cs.rules.terminals) < 10, len(cs.rules.terminals)
    rng = random.Random(8)

    def node(depth):
        if depth < 3 and rng.random() < 0.4:
            return {"Type": "Group", "items": [node(depth + 1) for _ in range(rng.randint(0, 2))]}
        out = {"Type": rng.choice(kinds + ["K99", "Group"])}
        if rng.random() < 0.5:
            out["n"] = rng.choice([1, "x"])
        return out
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)


def test_lenient_overlapping_oneof_beside_type_keeps_the_type():
    """Lenient: a oneOf whose branches overlap beside `type` and keywords that recurse
    is taken as an anyOf of the branches, each with `type` (said in the warning); the
    type is kept (it was dropped with the intersection: a string came out at the root
    of an object schema). Every walk validates against the schema with anyOf."""
    ref = {"$ref": "#/$defs/n"}
    branches = [{"properties": {"a": ref, "v": {"type": "integer"}}, "additionalProperties": False},
                {"properties": {"a": ref, "w": {"type": "boolean"}}, "additionalProperties": False}]
    schema = {"$defs": {"n": {"type": "object", "oneOf": branches}}, "$ref": "#/$defs/n"}
    with pytest.warns(UserWarning, match="taken as anyOf"):
        cs = schema_to_term(schema, strict=False)
    assert cs.recursion is not None and len(cs.relaxed) == 1, cs.relaxed
    as_any = {"$defs": {"n": {"type": "object", "anyOf": branches}}, "$ref": "#/$defs/n"}
    texts = _walks_validate(cs, as_any)
    assert all(t.startswith(b"{") for t in texts)


def test_recursive_union_beside_type_specific_keywords_is_exact():
    """github-workflow's matrix: `oneOf: [{type: object}, an expression string]` beside
    object keywords whose values are recursive. Each branch takes the keywords of its
    types (_Compiler._type_variants), so no intersection is needed: strict mode
    compiles it exactly (it refused: oneOf intersects the recursive reference); random
    instances are accepted iff jsonschema says valid, walks validate."""
    conf = {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/conf"}, "maxItems": 2}]}
    matrix = {"oneOf": [{"type": "object"}, {"type": "string", "pattern": "^x+$"}],
              "patternProperties": {"^in": {"type": "array", "items": {"$ref": "#/$defs/conf"}, "maxItems": 2}},
              "additionalProperties": {"$ref": "#/$defs/conf"}, "maxProperties": 2, "maxLength": 1}
    schema = {"$defs": {"conf": conf}, "type": "object", "properties": {"m": matrix},
              "required": ["m"], "additionalProperties": False}
    cs = _exact_recursive(schema)
    rng = random.Random(2)

    def conf_value(depth):
        return rng.choice([1, "x", None]) if depth > 2 or rng.random() < 0.4 else \
            [conf_value(depth + 1) for _ in range(rng.randint(0, 3))]

    def node(_):
        r = rng.random()
        if r < 0.3:
            return {"m": rng.choice(["x", "xx", "xxx", "y", 3, [], None])}  # maxLength: no string branch
        return {"m": {k: conf_value(1) for k in sorted(rng.sample(["a", "in", "inc", "b"], rng.randint(0, 3)))}}
    _instances_agree(cs, schema, node, 300, 60)
    _walks_validate(cs, schema)
    # a oneOf whose branches share a type still needs its intersection: refused
    matrix["oneOf"][1] = {"type": "object", "minProperties": 2}
    with pytest.raises(SchemaError, match="oneOf intersects the recursive reference"):
        schema_to_term(schema)


def test_recursive_oneof_of_closed_objects_told_apart_by_keys_is_exact():
    """github-workflow's jobs: a oneOf of two closed objects, one requiring a key the
    other does not allow (runs-on / uses), is disjoint (json_disjoint.closed_object), so
    recursive values inside need no intersection: exact in strict mode. Where the
    other branch allows the key, the oneOf is refused as before."""
    ref = {"$ref": "#/$defs/n"}
    a = {"type": "object", "properties": {"run": {"type": "integer"}, "kids": {"type": "array", "items": ref,
                                                                               "maxItems": 2}},
         "required": ["run"], "additionalProperties": False}
    b = {"type": "object", "properties": {"use": {"type": "string", "maxLength": 2}, "kids": {"type": "array",
                                                                                            "items": ref}},
         "required": ["use"], "additionalProperties": False}
    schema = {"$defs": {"n": {"oneOf": [a, b]}}, "$ref": "#/$defs/n"}
    cs = _exact_recursive(schema)
    rng = random.Random(4)

    def node(depth):
        r = rng.random()
        o = {"run": rng.choice([1, 2, 3, "x"])} if r < 0.45 else \
            {"use": rng.choice(["x", "xy", "ab", "xyz"])} if r < 0.9 else {"run": 1, "use": "x"}
        if depth < 3 and rng.random() < 0.6:
            o["kids"] = [node(depth + 1) for _ in range(rng.randint(0, 2))]
        return o
    _instances_agree(cs, schema, node, 300, 60)
    _walks_validate(cs, schema)
    a["properties"]["use"] = b["properties"]["run"] = {}  # both may hold run and use: overlapping
    with pytest.raises(SchemaError, match="oneOf intersects the recursive reference"):
        schema_to_term(schema)
    del a["properties"]["use"], b["properties"]["run"], a["additionalProperties"], b["additionalProperties"]
    with pytest.raises(SchemaError, match="oneOf intersects the recursive reference"):  # open: the same
        schema_to_term(schema)


def test_recursive_oneof_told_apart_by_property_values_or_types_is_exact():
    """hayson's values: a oneOf of strings, numbers and objects told apart by a required
    `_kind` (its listed values) and, where two share one, by the types of a required
    `val`; one object holds values of the oneOf again. The object branches are apart
    although the oneOf also holds other types (each pair holds objects only), so strict
    mode compiles it with no intersection: random instances are accepted iff jsonschema
    says valid, walks validate. Where the two `val`s may both be numbers: refused."""
    def kind(k, val=None, **more):
        props = {"_kind": {"enum": [k]}, **({"val": val} if val else {}), **more}
        return {"type": "object", "properties": props, "required": ["_kind"] + (["val"] if val else []),
                "additionalProperties": False}
    number = kind("number", {"type": "number"}, unit={"type": "string", "maxLength": 2})
    special = kind("number", {"enum": ["INF", "NaN"]})
    dict_ = {"type": "object", "properties": {"_kind": {"enum": ["dict"]}},
             "additionalProperties": {"$ref": "#/$defs/v"}, "maxProperties": 2}
    schema = {"$defs": {"v": {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "boolean"}, kind("marker"),
                                        number, special, dict_]}}, "$ref": "#/$defs/v"}
    cs = _exact_recursive(schema)
    rng = random.Random(5)

    def node(depth):
        r = rng.random()
        if depth >= 3 or r < 0.25:
            return rng.choice(["x", "xyz", True, 1, None])
        if r < 0.6:
            o = {"_kind": rng.choice(["number", "marker", "dict", "x"])}
            if rng.random() < 0.7:
                o["val"] = rng.choice([1.5, "INF", "x", None])
            return o
        return {k: node(depth + 1) for k in rng.sample(["_kind", "a", "b"], rng.randint(0, 2))
                } | ({"_kind": "dict"} if rng.random() < 0.3 else {})
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)
    special["properties"]["val"] = {"type": "integer"}  # both may be numbers: the branches overlap
    with pytest.raises(SchemaError, match="oneOf intersects the recursive reference"):
        schema_to_term(schema)


def test_recursive_ref_beside_a_type_list_is_exact():
    """bukkit's permission children: `type: [boolean, object]` beside a $ref to an
    untyped schema of object keywords that recurses. The two merge per type
    (_Compiler._type_split): a boolean, or the referenced object, with no intersection;
    strict mode compiles it, instances agree with jsonschema, walks validate."""
    perm = {"properties": {"d": {"type": "string", "maxLength": 2},
                           "kids": {"type": ["array", "object"], "items": {"type": "string", "maxLength": 1},
                                    "maxItems": 2, "maxProperties": 2,
                                    "additionalProperties": {"type": ["boolean", "object"], "items": {"type": "null"},
                                                             "$ref": "#/$defs/perm"}}},
            "additionalProperties": False}
    schema = {"$defs": {"perm": perm}, "$ref": "#/$defs/perm"}
    cs = _exact_recursive(schema)
    rng = random.Random(6)

    def node(depth):
        o = {}
        if rng.random() < 0.4:
            o["d"] = rng.choice(["x", "xyz", 1])
        if depth < 3 and rng.random() < 0.7:
            o["kids"] = [rng.choice(["a", "ab"]) for _ in range(rng.randint(0, 3))] if rng.random() < 0.3 else {
                k: rng.choice([True, None, 1, [], node(depth + 1)]) for k in rng.sample("abc", rng.randint(0, 3))}
        return o
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)


def test_recursive_property_beside_its_pattern_recurses_through_the_merge():
    """A recursive property that its own patternProperties key matches: the merge of the
    two is one schema for every level (_Compiler._key_schemas is keyed by the schemas it
    merges, not by the object), so the recursion through it is a rule of the grammar.
    Keyed by the object, each level made a new copy: the recursion was unrolled to
    max_depth (an instance 30 deep was refused) and, where the copies branch
    (package.json's exports), the compile ran past 300 s."""
    n = {"type": "object", "properties": {"kid": {"$ref": "#/$defs/n"}, "v": {"type": "integer"}},
         "patternProperties": {"^k": {"type": "object", "maxProperties": 2}}, "additionalProperties": False}
    schema = {"$defs": {"n": n}, "$ref": "#/$defs/n"}
    cs = _exact_recursive(schema)
    deep = {}
    for _ in range(30):
        deep = {"kid": deep, "v": 1}
    assert cs.accepts(cs.canonical(deep), cs.dfa())
    rng = random.Random(12)

    def node(depth):
        o = {}
        if rng.random() < 0.5:
            o["v"] = rng.choice([1, "x"])
        if depth < 4 and rng.random() < 0.7:
            o["kid"] = node(depth + 1)
        if rng.random() < 0.15:
            o["kx"] = {}
        return o
    _instances_agree(cs, schema, node, 300, 60)
    _walks_validate(cs, schema)


def _provider(rng, key: str, nested: tuple, extra: str | None = None, deep: int = 2):
    """A random instance near minecraft's number providers: a scalar, or an object whose
    `key` is c, u or another value, `v` an integer or not, each key of `nested` such a
    provider again (at most `deep` levels more), and `extra` a boolean or not."""
    if deep < 0 or rng.random() < 0.3:
        return rng.choice([3, 2.5, "x", None, True])
    o = {key: rng.choice(["c", "u", "z"])} if rng.random() < 0.9 else {}
    if rng.random() < 0.5:
        o["v"] = rng.choice([1, 12, "a"])
    for k in nested:
        if rng.random() < 0.5:
            o[k] = _provider(rng, key, nested, extra, deep - 1)
    if extra and rng.random() < 0.2:
        o[extra] = rng.choice([True, 1])
    return o


def test_recursive_ref_beside_a_type_is_a_copy_per_type():
    """minecraft's number providers: `type: [integer, object]` beside a $ref to an
    untyped schema whose if/then branches recurse, which does not merge with the type.
    It is compiled as the target with its type narrowed, once per type (an integer: the
    target asserts nothing of it, so just integer; _Compiler._typed_copies), with the
    node's own keywords in each copy (`limit`'s properties), through a $ref to such a
    node (`m`), and an allOf of such $refs to one schema is one (`both`: _one_ref), so
    strict mode compiles it exactly: instances agree with jsonschema, walks validate."""
    n = {"type": "object", "properties": {"type": {"enum": ["c", "u"]}}, "required": ["type"],
         "additionalProperties": False, "allOf": [
             {"if": {"properties": {"type": {"const": "c"}}},
              "then": {"properties": {"type": True, "v": {"type": "integer", "maximum": 9}}}},
             {"if": {"properties": {"type": {"const": "u"}}},
              "then": {"properties": {"type": True, "min": {"type": ["integer", "object"], "$ref": "#/$defs/n"},
                                      "max": {"$ref": "#/$defs/m"}}}}]}
    n.pop("type"), n.pop("additionalProperties")  # (untyped, open: every keyword is an object's)
    schema = {"$defs": {"n": n, "m": {"type": ["number", "object", "null"], "$ref": "#/$defs/n"},
                        "limit": {"type": ["integer", "object"], "$ref": "#/$defs/n",
                                  "properties": {"lo": {"type": "boolean"}}},
                        "both": {"allOf": [{"$ref": "#/$defs/m"}, {"type": ["integer", "object"], "$ref": "#/$defs/n"}]}},
              "type": "object", "properties": {"a": {"$ref": "#/$defs/limit"}, "b": {"$ref": "#/$defs/both"}},
              "additionalProperties": False}
    cs = _exact_recursive(schema)
    rng = random.Random(8)

    def node(_):
        return {k: _provider(rng, "type", ("min", "max"), "lo") for k in ("a", "b") if rng.random() < 0.8}
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)


def test_recursive_refs_to_different_schemas_beside_types_are_copies_per_type():
    """minecraft's predicate `value`: an allOf of `{type: [integer, object], $ref: R}`
    and the same with $ref N, two untyped schemas that recurse (N through if/then), as
    anyOf, per common type, of the allOf of each target's copy for that type
    (_Compiler._per_type: an integer, which neither constrains; an object, R's
    properties beside N's conditions), not an intersection with a recursion. Strict mode
    compiles it exactly: instances agree with jsonschema, walks validate."""
    n = {"properties": {"type": {"enum": ["c", "u"]}}, "allOf": [
        {"if": {"properties": {"type": {"const": "c"}}}, "then": {"properties": {"v": {"type": "integer"}}}},
        {"if": {"properties": {"type": {"const": "u"}}},
         "then": {"properties": {"lo": {"type": ["integer", "object"], "$ref": "#/$defs/n"}}}}]}
    r = {"properties": {"lo": {"type": ["number", "object"], "$ref": "#/$defs/n"},
                        "hi": {"type": ["integer", "object"], "$ref": "#/$defs/r"}}}
    schema = {"$defs": {"n": n, "r": r}, "type": "object", "additionalProperties": False, "properties": {
        "value": {"allOf": [{"type": ["integer", "object"], "$ref": "#/$defs/r"},
                            {"type": ["integer", "object", "string"], "$ref": "#/$defs/n"}]}}}
    cs = _exact_recursive(schema)
    rng = random.Random(13)

    def node(_):
        return {"value": _provider(rng, "type", ("lo", "hi"))} if rng.random() < 0.9 else {}
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)


def test_recursive_untyped_ref_beside_keywords_of_other_branches_is_one_ref():
    """jsonld: the root's allOf merges a `context` schema whose `@context` says only its
    types, and whose `@graph` holds an array's `items`, with `common`, whose undeclared
    keys hold `anyOf: [{$ref: common}]`: each key's schema is one $ref with the other
    branch's keywords and the types both name (_Compiler._ref_typed), compiled once per
    type, not an intersection with the recursion. Strict mode compiles it exactly:
    instances agree with jsonschema, walks validate. A $ref whose additionalProperties
    would read the other branch's properties is not folded so (no wrong language)."""
    common = {"properties": {"id": {"type": "string", "maxLength": 3}},
              "additionalProperties": {"anyOf": [{"$ref": "#/$defs/common"}]}}
    schema = {"$defs": {"common": common}, "type": "object", "allOf": [
        {"properties": {"ctx": {"type": ["object", "string", "null"]},
                        "g": {"type": ["array", "object"], "items": {"type": "integer"}, "maxItems": 2}}},
        {"$ref": "#/$defs/common"}]}
    cs = _exact_recursive(schema)
    rng = random.Random(15)

    def value(depth):
        r = rng.random()
        if depth > 1 or r < 0.4:
            return rng.choice(["ab", 2, None, True, [1], [1, 2, 3], ["a"]])
        return {k: value(depth + 1) for k in rng.sample(["id", "ctx", "g", "x"], rng.randint(0, 2))}

    def node(_):
        return {k: value(1) for k in rng.sample(["id", "ctx", "g", "x"], rng.randint(0, 3))}
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)
    closed = {"$defs": {"n": {"properties": {"k": {"$ref": "#/$defs/n"}}}}, "allOf": [
        {"$ref": "#/$defs/n", "additionalProperties": False}, {"properties": {"a": {"type": "integer"}}}]}
    try:
        got = schema_to_term(closed)
    except SchemaError:
        return
    assert not got.accepts('{"a":1}') and got.accepts("{}")


def test_typed_property_beside_a_recursive_union_narrows_its_branches():
    """web-types' hosts: a declared `name` (a string) whose key a pattern also matches,
    with a oneOf of strings, numbers and (recursively) the host object or a list of
    them. Met with the string's type, the oneOf keeps its branches that take strings,
    each narrowed to them (_Compiler._typed_union), so no recursion is intersected:
    strict mode compiles it exactly (instances agree with jsonschema, walks validate)."""
    vals = {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "number"}, {"$ref": "#/$defs/host"},
                      {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/host"}}]}
    host = {"type": "object", "additionalProperties": False, "properties": {
        "name": {"type": "string"}, "n": {"type": ["integer", "boolean"]}},
        "patternProperties": {"^[a-z]": {"$ref": "#/$defs/vals"}}}
    schema = {"$defs": {"host": host, "vals": vals}, "$ref": "#/$defs/host"}
    cs = _exact_recursive(schema)
    rng = random.Random(16)

    def node(depth):
        o = {}
        for k in rng.sample(["name", "n", "x", "Y"], rng.randint(0, 3)):
            r = rng.random()
            o[k] = (rng.choice(["ab", "abc", 2, 2.5, True, None]) if depth > 1 or r < 0.6 else
                    node(depth + 1) if r < 0.8 else [node(depth + 1) for _ in range(rng.randint(0, 3))])
        return o
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)


def test_listed_values_beside_a_recursive_union_keep_those_it_holds():
    """hayson's grid meta: a declared `ver` that lists values, whose key the dict's
    pattern matches too, so it also holds `hval`, a oneOf of scalars and recursive
    containers. The listed scalars are matched against hval's branches of their types
    (_Compiler._scalars_of: 3 and "3.0" are kept, null is not), not an intersection with
    a recursion: strict mode compiles it exactly (instances agree with jsonschema, walks
    validate)."""
    defs = {"hval": {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "number"},
                               {"$ref": "#/$defs/dict"}, {"$ref": "#/$defs/list"}]},
            "dict": {"type": "object", "additionalProperties": False,
                     "patternProperties": {"^[a-z]": {"$ref": "#/$defs/hval"}}},
            "list": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/hval"}}}
    schema = {"$defs": defs, "type": "object", "additionalProperties": False, "properties": {
        "meta": {"allOf": [{"$ref": "#/$defs/dict"}], "required": ["ver"],
                 "properties": {"ver": {"enum": ["3.0", "3.01", 3, None]}}},
        "data": {"$ref": "#/$defs/hval"}}}
    cs = _exact_recursive(schema)
    rng = random.Random(14)

    def hval(depth):
        r = rng.random()
        if depth > 1 or r < 0.4:
            return rng.choice(["ab", "abcd", 2, None, True])
        if r < 0.7:
            return [hval(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["a", "b", "Z"]): hval(depth + 1) for _ in range(rng.randint(0, 2))}

    def node(_):
        o = {}
        if rng.random() < 0.8:
            o["meta"] = {"ver": rng.choice(["3.0", "3.01", 3, None, "4"])} if rng.random() < 0.9 else {}
            if rng.random() < 0.3:
                o["meta"]["x"] = hval(1)
        if rng.random() < 0.6:
            o["data"] = hval(0)
        return o
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)


def test_recursive_property_beside_its_pattern_is_merged():
    """A declared property that a patternProperties key also matches holds both schemas;
    where one is recursive they merge into one schema (_Compiler._key_schemas; the
    WordPress theme schemas), so strict mode compiles it exactly: instances agree with
    jsonschema, walks validate. Where they do not merge, the error names
    patternProperties and the node, and lenient mode keeps the property's schema."""
    n = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/n"}},
                                          "name": {"type": "string", "maxLength": 2}},
         "patternProperties": {"^k": {"type": "array", "maxItems": 2}}, "additionalProperties": False}
    schema = {"$defs": {"n": n}, "$ref": "#/$defs/n"}
    cs = _exact_recursive(schema)
    rng = random.Random(7)

    def node(depth):
        o = {}
        if rng.random() < 0.5:
            o["name"] = rng.choice(["x", "xyz"])
        if depth < 3 and rng.random() < 0.7:
            o["kids"] = [node(depth + 1) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.1:
            o["kx"] = []
        return o
    _instances_agree(cs, schema, node, 300, 60)
    _walks_validate(cs, schema)
    n["patternProperties"]["^k"] = {"type": "array", "contains": {"required": ["name"]}}  # (no merge)
    with pytest.raises(SchemaError, match="'patternProperties' at #/\\$defs/n: recursive schema"):
        schema_to_term(schema)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert schema_to_term(schema, strict=False).recursion is not None
    assert any("patternProperties" in str(x.message) for x in w)


def test_lenient_oneof_narrowed_by_a_listed_value():
    """argo's manifests: a oneOf of object kinds of one shape (metadata and spec
    required), `kind` a const in each but not required, specs that recurse. Strict mode
    refuses (an object without `kind` may hold two); lenient mode used to take the
    anyOf, whose outputs may hold two kinds (invalid). Now each branch requires its
    `kind` (_Compiler._apart_by_value): a subset, and every walk validates against
    the schema itself."""
    spec = {"type": "object", "properties": {"steps": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/t"}},
                                             "name": {"type": "string", "maxLength": 3}}}
    kinds = [{"type": "object", "required": ["spec"], "properties": {"kind": {"const": k}, "spec": spec}}
             for k in ("A", "B")]
    schema = {"$defs": {"t": {"type": "object", "properties": {"n": {"type": "integer"}}}}, "type": "object",
              "oneOf": kinds}
    schema["$defs"]["t"]["properties"]["sub"] = {"$ref": "#"}
    with pytest.raises(SchemaError):
        schema_to_term(schema)
    with pytest.warns(SchemaWarning, match="narrowed"):
        cs = schema_to_term(schema, strict=False)
    texts = _walks_validate(cs, schema)
    assert {json.loads(t)["kind"] for t in texts} == {"A", "B"}


def test_recursive_object_beside_mutually_exclusive_keys_is_exact():
    """CKAN's root: an object whose properties recurse, beside `oneOf: [{required:
    [download]}, {required: [kind], properties: {kind: enum}, not: {required:
    [download]}}]`. On objects the `not` says download is absent (properties false:
    _Compiler._absent_keys), so the branches are apart (one requires a key the other
    forbids) and merge with the object one by one, with no intersection: strict mode
    compiles it exactly (instances agree with jsonschema, walks validate)."""
    schema = {"$defs": {"r": {"type": "array", "maxItems": 2, "items": {
        "type": "object", "properties": {"k": {"$ref": "#/$defs/r"}}, "additionalProperties": False}}},
        "type": "object", "properties": {"download": {"type": "string", "maxLength": 2},
                                         "kind": {"type": "string"}, "deps": {"$ref": "#/$defs/r"}},
        "additionalProperties": False,
        "oneOf": [{"required": ["download"]},
                  {"properties": {"kind": {"enum": ["m", "d"]}}, "not": {"required": ["download"]},
                   "required": ["kind"]}]}
    cs = _exact_recursive(schema)
    rng = random.Random(10)

    def deps(depth):
        return [{"k": deps(depth + 1)} if depth < 2 and rng.random() < 0.5 else {}
                for _ in range(rng.randint(0, 2))]

    def node(_):
        o = {}
        if rng.random() < 0.6:
            o["download"] = rng.choice(["u", "url"])
        if rng.random() < 0.6:
            o["kind"] = rng.choice(["m", "x"])
        if rng.random() < 0.7:
            o["deps"] = deps(0)
        return o
    _instances_agree(cs, schema, node, 300, 60)
    _walks_validate(cs, schema)


def test_recursive_conditions_on_an_optional_key_are_variants():
    """minecraft's predicates: an object whose optional `c` picks one of many if/then
    (17 there), each `then` holding properties that recurse. The tests are of one key
    for values apart, so they hold one at a time where `c` is there, and all at once
    where it is not: one variant per outcome (_Compiler._outcomes), no intersection, so
    strict mode compiles it exactly (instances agree with jsonschema, walks validate)."""
    vals = [f"v{i}" for i in range(18)]
    branches = [{"if": {"properties": {"c": {"const": v}}},
                 "then": {"properties": {f"p{i}": {"type": "array", "maxItems": 2, "items": {"$ref": "#"}}}}}
                for i, v in enumerate(vals[:17])]
    schema = {"type": "object", "properties": {"c": {"enum": vals}}, "allOf": branches}
    cs = _exact_recursive(schema)
    rng = random.Random(11)

    def node(depth):
        o = {}
        if rng.random() < 0.8:
            o["c"] = rng.choice(vals[:3] + vals[16:] + ["w", 5])
        for i in rng.sample([0, 1, 2, 16], rng.randint(0, 2)):
            o[f"p{i}"] = [node(depth + 1) for _ in range(rng.randint(0, 2))] if depth < 2 else rng.choice([[], 1])
        return o
    _instances_agree(cs, schema, node, 300, 60)
    _walks_validate(cs, schema)


def test_recursive_conditions_on_an_untyped_schema_split_objects_from_others():
    """minecraft's item modifiers: an untyped schema whose optional `f` picks one of 20
    if/then (2^20 outcomes, were each test alone), the first `then` typed object, the
    others recursive or typed. An `if` on a property holds on a value that is no object,
    so such a value holds every `then` (here: none, the first says object), and on
    objects the tests of `f` group (_Compiler._objects_apart). `lim` is declared twice,
    `{type: [integer, object], $ref: n, properties}` beside `{type: integer}`: one $ref
    with their common type (_Compiler._ref_typed), not an intersection with a
    recursion. Strict mode compiles it exactly: instances agree with jsonschema, walks
    validate (the item list's own `if` too, which holds on non-objects: every `then`)."""
    vals = [f"v{i}" for i in range(20)]
    n = {"properties": {"t": {"enum": ["c", "u"]}}, "allOf": [
        {"if": {"properties": {"t": {"const": "c"}}}, "then": {"properties": {"v": {"type": "integer"}}}},
        {"if": {"properties": {"t": {"const": "u"}}},
         "then": {"properties": {"lo": {"type": ["integer", "object"], "$ref": "#/$defs/n"}}}}]}
    branches = [{"if": {"properties": {"f": {"const": v}}},
                 "then": {"properties": {f"p{i}": {"type": ["integer", "object"], "$ref": "#/$defs/n"}}}}
                for i, v in enumerate(vals)]
    branches[0]["then"]["type"] = "object"
    branches[1]["then"]["properties"]["lim"] = {"type": ["integer", "object"], "$ref": "#/$defs/n",
                                                "properties": {"x": {"type": "boolean"}}}
    branches[2]["then"]["properties"]["lim"] = {"type": "integer"}
    item = {"properties": {"f": {"enum": vals}}, "allOf": branches}
    schema = {"$defs": {"n": n}, "type": "array", "maxItems": 3, "items": item}
    cs = _exact_recursive(schema)
    rng = random.Random(12)

    def modifier():
        if rng.random() < 0.15:
            return rng.choice([5, "s", None, []])
        o = {"f": rng.choice(vals[:4] + ["w"])} if rng.random() < 0.8 else {}
        for k in rng.sample(["p0", "p1", "p2", "p3", "lim"], rng.randint(0, 2)):
            o[k] = _provider(rng, "t", ("lo",), "x", deep=1)
        return o

    def node(_):
        return [modifier() for _ in range(rng.randint(0, 2))]
    _instances_agree(cs, schema, node, 400, 80)
    _walks_validate(cs, schema)


def test_recursive_overlapping_oneof_narrows_in_lenient_mode():
    """An overlapping oneOf of open objects told apart by their required keys, one of
    them recursive (CKAN's relationships: a name, or an any_of list of them): strict
    mode refuses (a value of any_of failing the list would make the other branch the
    one that holds); lenient mode narrows each branch to objects without the key the
    other requires (_Compiler._apart_by_keys), a subset: every walk validates against
    the oneOf itself, and instances without the other's key agree with jsonschema."""
    item = {"oneOf": [
        {"type": "object", "properties": {"name": {"type": "string", "maxLength": 2}, "help": {"type": "string"}},
         "required": ["name"]},
        {"type": "object", "properties": {"any_of": {"$ref": "#/$defs/rel"}, "help": {"type": "string"}},
         "required": ["any_of"]}]}
    schema = {"$defs": {"rel": {"type": "array", "items": item, "maxItems": 3}}, "$ref": "#/$defs/rel"}
    with pytest.raises(SchemaError, match="oneOf"):
        schema_to_term(schema)
    with pytest.warns(SchemaWarning, match="narrowed"):
        cs = schema_to_term(schema, strict=False)
    _walks_validate(cs, schema)
    rng = random.Random(9)

    def node(depth):
        out = []
        for _ in range(rng.randint(0, 3)):
            o = {}
            if rng.random() < 0.5:
                o["name"] = rng.choice(["a", "abc", 1])
            elif depth < 3:
                o["any_of"] = node(depth + 1) if rng.random() < 0.9 else "x"
            if rng.random() < 0.3:
                o["help"] = rng.choice(["h", 2])
            out.append(o)
        return out
    _instances_agree(cs, schema, node, 300, 60)
    both = [{"name": "a", "any_of": "x"}]  # valid (only the first branch holds), not written
    assert _validator(schema).is_valid(both) and not cs.accepts(cs.canonical(both))
