"""oneOf (fsm/json/disjoint.py): branches told apart by keys, property values or types are
unions; where they overlap, only the branches that share types take complements.
Checked against jsonschema on random instances."""
from __future__ import annotations

import jsonschema
import pytest
from oracles import agrees_on as _agrees_on
from oracles import recursive_with_oracle as _recursive_with_oracle
from oracles import stepped_along as _stepped_along

from structgen.fsm.json.schema import schema_to_term


def test_recursive_oneof_of_objects_apart_by_their_keys():
    """circle-ci's logic statements: a oneOf of scalars, a closed object of one operator
    key (minProperties 1) whose values recurse, and an object whose propertyNames allow
    no operator key. No object is in both (json_disjoint._apart), so the oneOf is a union
    and compiles exactly as a recursive schema; a `not` of presence parts beside a vendor key
    (markdownDescription) is presence variants, not a complement. Trees as jsonschema
    says."""
    ops = ["and", "or", "not"]
    logic = {"oneOf": [
        {"markdownDescription": "a value", "anyOf": [{"type": "boolean"}, {"type": "integer"}]},
        {"type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False, "properties": {
            "and": {"type": "array", "items": {"$ref": "#/$defs/logic"}, "minItems": 1, "maxItems": 2},
            "or": {"type": "array", "items": {"$ref": "#/$defs/logic"}, "minItems": 1, "maxItems": 2},
            "not": {"$ref": "#/$defs/logic"}}},
        {"type": "object", "propertyNames": {"not": {"pattern": "^(and|or|not)$"}},
         "additionalProperties": {"type": "integer"}}]}
    schema = {"$defs": {"logic": logic}, "type": "object", "properties": {"when": {"$ref": "#/$defs/logic"},
                                                                       "unless": {"$ref": "#/$defs/logic"}},
              "not": {"markdownDescription": "not both", "allOf": [{"required": ["when"]}, {"required": ["unless"]}]}}
    cs, dfa, check, rng = _recursive_with_oracle(schema, seed=11)

    def stmt(depth):
        r = rng.random()
        if depth == 0 or r < 0.3:
            return rng.choice([True, 3, "s"])
        if r < 0.8:
            op = rng.choice(ops)
            body = stmt(depth - 1) if op == "not" else [stmt(depth - 1) for _ in range(rng.randint(0, 3))]
            return {op: body, **({"x": 1} if rng.random() < 0.1 else {})}
        return {k: rng.choice([1, "v"]) for k in rng.sample(["x", "y", "and"], rng.randint(0, 2))}
    seen = {True: 0, False: 0}
    for _ in range(400):
        inst = {k: stmt(3) for k in rng.sample(["when", "unless"], rng.randint(0, 2))}
        ok = check.is_valid(inst)
        seen[ok] += 1
        assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert min(seen.values()) >= 40, seen


@pytest.mark.parametrize("typed", [False, True])
def test_oneof_told_apart_by_properties_holds_on_other_types(typed):
    """A oneOf whose branches a required property's values tell apart is a union only
    where objects alone count: untyped, both branches hold on 5, "x" and [] (a oneOf
    refuses those), which the union accepted before. With `type: object`, also values
    one branch lists and the other's `not` excludes, and a branch wrapped in a oneOf of
    one (gitlab-ci's jobs and steps), around a recursion: exact, no
    intersection. Instances against jsonschema."""
    job = {"type": "object", "additionalProperties": False, "properties": {
               "k": {}, "s": {}, "steps": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/step"}}},
           "oneOf": [{"properties": {"k": {"const": 1}}, "required": ["k", "s"]},
                     {"properties": {"k": {"not": {"enum": [1]}}}}]}
    step = {"oneOf": [{"type": "object", "additionalProperties": False, "required": ["n"],
                       "properties": {"n": {"type": "integer"}}},
                      {"oneOf": [{"type": "object", "additionalProperties": False, "required": ["run"],
                                  "properties": {"run": {"type": "array", "items": {"$ref": "#/$defs/step"},
                                                         "maxItems": 2}, "n": {}}}]}]}
    if typed:
        schema = {"type": "object", "properties": {"job": job}, "$defs": {"step": step}}
        jobs = [{}, {"k": 1}, {"k": 2}, {"k": 1, "s": 0}, {"s": 0}, {"k": 2, "s": 1}, {"x": 1}]
        steps = [[], [{"n": 1}], [{"run": []}], [{"run": [{"n": 1}], "n": 2}], [{"run": [{"run": [{"n": "x"}]}]}],
                 [{"n": 1, "run": []}], [{"run": [{"run": [{"n": 3}]}]}]]
        pool = [5, {}] + [{"job": {**j, "steps": st}} for j in jobs for st in steps]
    else:
        schema = {"oneOf": [{"required": ["k"], "properties": {"k": {"const": 1}}},
                            {"required": ["k"], "properties": {"k": {"const": 2}}}]}
        pool = [5, "x", [], None, {}, {"k": 1}, {"k": 2}, {"k": 3}, {"j": 1}]
    cs = schema_to_term(schema)
    dfa = cs.dfa()
    check = jsonschema.Draft202012Validator(schema)
    _agrees_on(pool, cs, dfa, check, least=2)
    if typed:
        assert cs.recursion is not None and not cs.relaxed


@pytest.mark.parametrize("overlap", [False, True])
def test_oneof_of_unions_apart_branch_by_branch(overlap):
    """snapcraft's root: a oneOf of two oneOfs of closed objects, where every object of
    one side requires `base`, which the other side does not allow. No value holds both
    sides (json_disjoint._branches), so the oneOf is a union: around a recursion it
    compiles exactly as a recursive schema (refused before). Where a branch of the second side is open
    (it holds {base: a, name: n} too), the sides overlap and the oneOf keeps its
    complement, no recursion: values of both sides refused. Instances against
    jsonschema."""
    def closed(key, value, recurse):
        props = {key: {"const": value}, "name": {"type": "string"}}
        if recurse:
            props["parts"] = {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/p"}}
        return {"type": "object", "required": [key], "additionalProperties": False, "properties": props}
    second = closed("build", "y", not overlap) if not overlap else {"type": "object", "required": ["name"]}
    p = {"oneOf": [{"oneOf": [closed("base", "a", not overlap), closed("base", "b", not overlap)]},
                   {"title": "second", "oneOf": [closed("build", "x", not overlap), second]}]}
    schema = {"$defs": {"p": p}, "$ref": "#/$defs/p"}
    leaves = [{"base": "a"}, {"base": "b", "name": "n"}, {"build": "x"}, {"build": "y", "name": "m"},
              {"base": "a", "name": "n"}, {"base": "c"}, {"name": "n"}, {"build": "x", "base": "a"}, {}]
    if overlap:
        cs = schema_to_term(schema)
        assert cs.recursion is None and not cs.relaxed
        pool = leaves + [{"name": "n", "other": 1}, {"base": "a", "name": 3}]
        _agrees_on(pool, cs, cs.dfa(), jsonschema.Draft202012Validator(schema), least=4)
        return
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    pool = leaves + [{**a, "parts": [b]} for a in leaves[:5] for b in leaves] + [
        {"base": "a", "parts": [{"build": "x", "parts": [{"base": "b", "parts": []}, {"base": "z"}]}]}]
    _agrees_on(pool, cs, dfa, check, least=10)


@pytest.mark.parametrize("recursive", [False, True])
def test_oneof_of_discriminated_unions_apart_branch_by_branch(recursive):
    """snapcraft's root as published: the inner oneOfs carry OpenAPI's `discriminator`
    (asserts nothing), so they still read as their branches (json_disjoint._SILENT) and
    the root oneOf is a union. Without a complement, the terms have no AND/NOT part (no
    emptiness search in any state: a mask at the first key took 0.3 s); around a
    recursion the schema compiles exactly as a recursive one (refused before). Instances
    against jsonschema."""
    def closed(key, value, build):
        props = {key: {"const": value}, "name": {"type": "string"}}
        if build is not None:
            props["build"] = {"const": build}
        if recursive:
            props["parts"] = {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/p"}}
        return {"type": "object", "required": [key] + (["build"] if build else []), "additionalProperties": False,
                "properties": props}
    disc = {"discriminator": {"propertyName": "base", "mapping": {"a": "#/$defs/a"}}}
    p = {**disc, "oneOf": [
        {**disc, "oneOf": [closed("base", "a", None), {**disc, "oneOf": [closed("base", "bare", "x"),
                                                                          closed("base", "bare", "y")]}]},
        {"discriminator": {"propertyName": "build"}, "oneOf": [closed("build", "x", None), closed("build", "z", None)]}]}
    schema = {"$defs": {"p": p}, "$ref": "#/$defs/p"}
    leaves = [{"base": "a"}, {"base": "bare", "build": "x"}, {"base": "bare", "build": "y", "name": "n"},
              {"build": "x"}, {"build": "z", "name": "m"}, {"base": "bare"}, {"base": "a", "build": "x"},
              {"build": "y"}, {"name": "n"}, {}, "s"]
    cs = schema_to_term(schema)
    assert not cs.relaxed
    if not recursive:
        assert not cs.term.boolean  # (a union: no complement, nothing to search)
        _agrees_on(leaves, cs, cs.dfa(), jsonschema.Draft202012Validator(schema), least=4)
        return
    assert cs.recursion is not None
    check = jsonschema.Draft202012Validator(schema)
    pool = leaves + [{**a, "parts": [b]} for a in leaves[:5] for b in leaves] + [
        {"base": "a", "parts": [{"build": "x", "parts": [{"base": "bare", "build": "y", "parts": []}, {"base": "z"}]}]}]
    _agrees_on(pool, cs, cs.dfa(), check, least=10)


def test_oneof_complements_only_branches_that_share_types():
    """circle-ci's orbs: a oneOf of two string patterns (which may overlap) and an object
    whose values recurse. Exactly one branch holds iff exactly one of those sharing its
    types does (json_disjoint.overlaps): the patterns take complements of each other, the
    object none, so the recursion compiles exactly as a recursive schema (refused before). Instances
    against jsonschema, strings matching both patterns among them."""
    schema = {"$defs": {"orb": {"oneOf": [
        {"type": "string", "pattern": "^[a-z]+@[0-9]+$"}, {"type": "string", "pattern": "^a"},
        {"type": "object", "properties": {"jobs": {"type": "object", "additionalProperties": {"$ref": "#/$defs/orb"}}},
         "additionalProperties": False}]}}, "$ref": "#/$defs/orb"}
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    pool = ["ab@1", "b@2", "ax", "b", "", 3, {}, {"jobs": {}}, {"jobs": {"x": "b@2"}}, {"jobs": {"x": "ab@1"}},
            {"jobs": {"x": {"jobs": {"y": "ax"}}}}, {"jobs": {"x": {"jobs": {"y": "a@1"}}}}, {"other": 1}]
    _agrees_on(pool, cs, dfa, check, least=4)


def test_oneof_apart_within_each_type_group():
    """avro's types: a oneOf of two strings that overlap (a name may be a primitive
    one) beside objects told apart by a required `type` whose fields recurse. Exactly one
    branch holds iff exactly one of its type group does (json_disjoint.overlapping):
    the strings take complements of each other, the objects, apart among themselves,
    none, so the recursion compiles exactly as a recursive schema (refused before: the objects were
    complemented too). Instances against jsonschema, names of both strings among them."""
    field = {"type": "object", "required": ["name", "type"], "additionalProperties": False,
             "properties": {"name": {"type": "string", "maxLength": 3}, "type": {"$ref": "#/$defs/t"}}}
    t = {"oneOf": [
        {"enum": ["int", "null"]},
        {"type": "string", "pattern": "^[a-z]{1,4}$"},
        {"type": "object", "required": ["type"], "properties": {
            "type": {"const": "record"}, "fields": {"type": "array", "maxItems": 2, "items": field}}},
        {"type": "object", "required": ["type", "items"], "properties": {
            "type": {"const": "array"}, "items": {"$ref": "#/$defs/t"}}},
        {"type": "object", "required": ["type"], "properties": {"type": {"enum": ["int", "null"]}}}]}
    schema = {"$defs": {"t": t}, "$ref": "#/$defs/t"}
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    leaves = ["int", "null", "abc", "Abc", "abcde", 3, {"type": "int"}, {"type": "null", "x": 1}, {"type": "bad"}]
    pool = leaves + [{"type": "array", "items": x} for x in leaves] + [
        {"type": "record", "fields": [{"name": "a", "type": x}]} for x in leaves] + [
        {"type": "record"}, {"type": "record", "fields": [{"name": "abcd", "type": "int"}]},
        {"type": "array", "items": {"type": "record", "fields": []}, "fields": 1}, {"type": "array"}]
    _agrees_on(pool, cs, dfa, check, least=10)


def test_oneof_branch_that_holds_a_whole_type_needs_no_search():
    """A oneOf branch that asserts nothing of a type (an untyped schema of object
    keywords, or a `not` of integers, holds every array, string...) leaves no value of
    that type to another branch alone, and two such branches none to either
    (_Compiler._held_alone): the other branches lose that type before their complements
    are taken. The schemas below made an emptiness search prove that no array of free
    objects (or no string, integer) lies outside the untyped branch: TooLargeError after
    ~15 s at the default max_states, ~1-2 s at the 20k given here. Instances agree with
    jsonschema."""
    n = {"properties": {"a": {"type": "array", "maxItems": 2, "items": {"enum": ["a", 1, None]}}}}
    schemas = [
        {"$defs": {"n": n}, "oneOf": [{"type": ["integer", "string"], "$ref": "#/$defs/n"},
                                      {"type": "array", "maxItems": 2, "items": {"type": "object"}},
                                      {"anyOf": [{"$ref": "#/$defs/n"}]}]},
        {"oneOf": [{"type": "array", "items": {"type": "object"}}, n, {"type": "string", "maxLength": 1}]},
        {"oneOf": [{"enum": ["a", 1, None]}, {"const": "b"}, {}], "type": ["null", "number"]},
        # a `not` that holds no array takes every array (_idle_of); so does a oneOf one of
        # whose branches does, the others holding none
        {"oneOf": [{"type": "array", "items": {"type": "object"}}, {"not": {"type": "integer"}}]},
        {"oneOf": [{"type": "array", "items": {"type": "object"}, "minItems": 1},
                   {"oneOf": [{}, {"type": "integer", "multipleOf": 3}]}]},
    ]
    pool = [None, True, 1, 2, 0, -7, 1.5, "", "a", "b", "xy", [], [{}], [{}, {"a": []}], [1], [{}, {}, {}], {},
            {"a": []}, {"a": ["a", 1]}, {"a": ["x"]}, {"a": [1, 1, 1]}, {"b": [{}]}]
    for schema in schemas:
        cs = schema_to_term(schema)
        _agrees_on(pool, cs, cs.dfa(max_states=20_000), jsonschema.Draft202012Validator(schema), least=3)


def test_oneof_of_open_objects_takes_their_shared_value_out():
    """Two open objects in a oneOf overlap: at a key neither declares, both take the same
    value (any JSON), then each its own rest. `A & ~B` there paired every position
    inside that value with the rests, and proving such a state empty searched them all:
    TooLargeError mid-output (schema_fuzz seed 2, after ~5 s at the default max_states;
    0.65 s at the 20k given here). The shared value is taken out of the intersection
    (JsonTermBuilder._shared_head) and the search decides such a state by its tail
    (JsonTermSource._tail_empty). Instances agree with jsonschema."""
    schema = {"oneOf": [
        {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 3}}, "maxProperties": 3},
        {"type": "object", "properties": {"b": {"type": "string", "maxLength": 2}}}]}
    cs = schema_to_term(schema)
    dfa = cs.dfa(max_states=20_000)
    for text in (b'{"x":', b'{"x":[{"y":[1,', b'{"a":3,"x":{"q":'):
        assert _stepped_along(dfa, text) != 0, text  # (four keys: only B holds)
    pool = [{"x": 1}, {"x": 1, "y": 2, "z": 3, "w": 4}, {"a": 3, "x": 1}, {"a": 1, "x": [{"y": [1]}]},
            {"b": "abc", "x": {}}, {"b": "ab"}, {"a": 3, "b": "abc"}, {}, [], {"a": "s"},
            {"x": {"q": [1, 2]}, "y": None, "z": "s", "w": True}, {"a": 6, "x": [], "y": 1}]
    _agrees_on(pool, cs, dfa, jsonschema.Draft202012Validator(schema), least=4)


def test_oneof_closed_branch_apart_from_one_requiring_a_key_it_lacks():
    """vega's field references: an open `{signal}` (required) beside closed `{datum}` and
    `{group, level}` objects whose values recurse. No value holds two: an object of a
    closed branch has no `signal` (json_disjoint._apart, one side closed; both closed
    before), so the oneOf is a union and compiles exactly as a recursive schema (refused before).
    Instances against jsonschema, objects with `signal` and `datum` both among them."""
    f = {"oneOf": [
        {"type": "string"},
        {"type": "object", "required": ["signal"], "properties": {"signal": {"type": "string"}}},
        {"type": "object", "required": ["datum"], "additionalProperties": False,
         "properties": {"datum": {"$ref": "#/$defs/f"}}},
        {"type": "object", "required": ["group"], "additionalProperties": False,
         "properties": {"group": {"$ref": "#/$defs/f"}, "level": {"type": "integer"}}}]}
    schema = {"$defs": {"f": f}, "$ref": "#/$defs/f"}
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    leaves = ["x", 3, {}, {"signal": "s"}, {"signal": 1}, {"signal": "s", "datum": "x"}, {"signal": "s", "z": None}]
    pool = leaves + [{"datum": x} for x in leaves] + [{"group": x, "level": 2} for x in leaves] + [
        {"group": {"datum": {"signal": "s"}}}, {"datum": "x", "level": 1}, {"group": "x", "level": "1"}]
    _agrees_on(pool, cs, dfa, check, least=10)


@pytest.mark.parametrize("recursive", [False, True])
def test_oneof_discriminator_required_beside_it(recursive):
    """cmake-presets' root: `required: [version]` beside a oneOf of closed, untyped
    branches, each listing its versions. Every object of the node has a version, which
    picks one branch (json_disjoint.disjoint reads node's required keys too), so the
    oneOf is a union; around a recursion it compiles exactly as a recursive schema (refused before).
    Non-objects hold every branch: the oneOf refuses them, and so does `type`."""
    kids = {"type": "array", "maxItems": 2, "items": {"$ref": "#"}} if recursive else {"type": "array"}
    schema = {"type": "object", "required": ["version"], "oneOf": [
        {"additionalProperties": False, "properties": {"version": {"enum": [1, 2]}, "a": {"type": "integer"}}},
        {"additionalProperties": False, "properties": {"version": {"const": 3}, "a": {}, "kids": kids}}]}
    cs = schema_to_term(schema)
    assert (cs.recursion is not None) == recursive and not cs.relaxed
    leaves = [{"version": v, **extra} for v in (1, 2, 3, 4) for extra in ({}, {"a": 1}, {"a": "s"}, {"kids": []})]
    pool = leaves + [{}, {"a": 1}, 3, "s"] + [{"version": 3, "kids": [x, y]} for x in leaves[:8] for y in leaves[8:]]
    _agrees_on(pool, cs, cs.dfa(), jsonschema.Draft202012Validator(schema), least=10)


@pytest.mark.parametrize("typed", [False, True])
def test_oneof_of_closed_objects_whose_keys_are_apart(typed):
    """GCP workflows' `except` (untyped: a closed step, or a closed `{as, steps}`) and
    snapcraft's grammar items (a string, or closed objects of one pattern key each:
    `^on\\s+.+$`, `^to\\s+.+$`, `^try$`), whose values recurse. No key is allowed by two
    branches (json_disjoint.keys_apart: declared keys, patterns' intersections), so
    they share `{}` at most, and every non-object where two are untyped: each branch
    is narrowed (minProperties 1, type object) and the oneOf is a union on the grammar
    path (refused before). Instances against jsonschema, `{}` and non-objects among
    them."""
    kids = {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/x"}}
    if typed:
        x = {"oneOf": [{"type": "string"}] + [
            {"type": "object", "additionalProperties": False, "patternProperties": {p: kids}}
            for p in (r"^on\s+.+$", r"^to\s+.+$", "^try$")]}
        leaves = ["s", 3, {}, {"on a": []}, {"on a": [], "to b": []}, {"try": ["s"]}, {"try": [], "else": []},
                  {"on": []}, {"to  x": ["s", {}]}]
    else:
        x = {"oneOf": [{"additionalProperties": False, "properties": {"call": {"type": "string"}, "next": kids}},
                       {"additionalProperties": False, "properties": {"as": {"type": "string"}, "steps": kids}}]}
        leaves = ["s", 3, None, {}, {"call": "c"}, {"as": "e"}, {"as": "e", "call": "c"}, {"steps": []},
                  {"next": [], "call": 1}, {"other": 1}]
    schema = {"$defs": {"x": x}, "$ref": "#/$defs/x"}
    cs, dfa, check, _ = _recursive_with_oracle(schema, seed=0)
    assert not cs.relaxed
    key = "try" if typed else "steps"
    good = [a for a in leaves if check.is_valid(a)]
    pool = leaves + [{key: [a, b]} for a in leaves for b in good] + [{key: [{key: [a]}]} for a in leaves]
    _agrees_on(pool, cs, dfa, check, least=15)
