"""Object parts written as variants of the object, not intersections (fsm/json/variants.py):
presence parts (which keys an object has), dependentSchemas that only require keys, and
if/then/else value conditions on one property."""
from __future__ import annotations

import random

import jsonschema
import pytest
from oracles import agrees_on as _agrees_on

from structgen.fsm.json.schema import schema_to_term


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
