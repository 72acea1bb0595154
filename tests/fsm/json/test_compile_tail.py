"""What keeps the compile of large real-world schemas short (issue #51), and exact: listed
values beside patterns matched down a trie, value conditions on one key whose values are
apart, declared structure that does not count against max_depth (a subschema compiled
once, wherever it is reached), typo suggestions remembered per key. Each against
jsonschema."""
from __future__ import annotations

import itertools
import json
import random
import string
import warnings

import jsonschema
import pytest
from oracles import compiled, walks_validate

from structgen import fsm
from structgen.fsm.json.schema import MAX_NESTING, schema_to_term


def _names(rng: random.Random, n: int) -> list[str]:
    """Names that share prefixes (and are prefixes of one another), some twice."""
    stems = ["".join(rng.choice("abc") for _ in range(rng.randint(0, 3))) for _ in range(8)]
    out = [rng.choice(stems) + "".join(rng.choice("abcx@2") for _ in range(rng.randint(0, 4))) for _ in range(n)]
    return out + rng.sample(out, 5)


@pytest.mark.parametrize("seed", range(4))
def test_listed_values_beside_patterns_agree_with_jsonschema(seed):
    """An anyOf of enums beside string keywords (Azure Pipelines' task names beside each
    task's `^Name@2$`) is merged into the enum of the names the keywords accept, found
    by walking the keywords' term down a trie of the names: each name is accepted
    exactly when jsonschema validates it."""
    rng = random.Random(seed)
    names = _names(rng, 60)
    listed = {"anyOf": [{"enum": [x]} for x in names[:40]] + [{"enum": names[40:] + [3, 7.5, None]}]}
    for other in ({"pattern": "^ab"}, {"pattern": "c$"}, {"pattern": "^(a|b)+@2$"}, {"pattern": "x"},
                  {"pattern": "^a", "maxLength": 3}, {"minLength": 2, "pattern": "b"}, {"type": "string"},
                  {"minimum": 5}, {"pattern": "^" + names[0] + "$"}):
        schema = {"allOf": [listed, other]}
        acc, _ = compiled(schema)
        check = jsonschema.Draft202012Validator(schema)
        seen = {True: 0, False: 0}
        for value in [*names, "", "zz", 3, 7.5, None, 5]:
            ok = check.is_valid(value)
            seen[ok] += 1
            assert acc(json.dumps(value)) == ok, (other, value)
        assert seen[False] > 0, other


@pytest.mark.parametrize("required_if", [False, True])
def test_many_conditions_on_one_key_agree_with_jsonschema(required_if):
    """Thirty `if`s on the value of one key (ioBroker's jsonConfig: a hundred on a form
    item's `type`), each for another value: in the outcome where one holds, the others
    fail wherever the key is there, so they are not negated one by one. Whether or not
    the `if`s require the key, with `else`s that say something: instances agree with
    jsonschema, and walks of the automaton validate."""
    kinds = [f"k{i}" for i in range(30)]
    conds = []
    for i, k in enumerate(kinds):
        test = {"properties": {"type": {"const": k}}}
        if required_if and i % 2:
            test["required"] = ["type"]
        conds.append({"if": test, "then": {"required": ["x"]} if i % 3 == 0 else {"properties": {"x": {"maximum": i}}},
                      **({"else": {"properties": {"y": {"type": "integer"}}}} if i == 4 else {})})
    schema = {"type": "object", "properties": {"type": {"type": "string"}, "x": {"type": "integer"}, "y": {}},
              "allOf": conds}
    cs = schema_to_term(schema)
    dfa = cs.dfa()
    check = jsonschema.Draft202012Validator(schema)
    seen = {True: 0, False: 0}
    for t, x, y in itertools.product([None, "k0", "k1", "k4", "k5", "k29", "other"], [None, 0, 3, 40], [None, 1, "s"]):
        inst = {k: v for k, v in (("type", t), ("x", x), ("y", y)) if v is not None}
        ok = check.is_valid(inst)
        seen[ok] += 1
        assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert min(seen.values()) > 10, seen
    walks_validate(cs, schema)


def _nested(depth: int, leaf) -> dict:
    """{"a": {"a": ... leaf}} declared `depth` objects deep."""
    s = leaf
    for _ in range(depth):
        s = {"type": "object", "properties": {"a": s}}
    return s


def test_free_values_count_depth_from_where_they_start():
    """max_depth bounds a free value from where it starts, not from the root: a free
    value under declared objects nested deeper than max_depth takes max_depth levels
    of its own (so a subschema's term is the same wherever it is reached), and no more."""
    schema = _nested(4, {})
    acc, _ = compiled(schema, max_depth=2)
    deep = '{"a":{"a":{"a":{"a":%s}}}}'
    assert acc(deep % "[[1]]") and acc(deep % '{"b":[]}')
    assert not acc(deep % "[[[1]]]")
    assert jsonschema.Draft202012Validator(schema).is_valid({"a": {"a": {"a": {"a": [[1]]}}}})


@pytest.mark.parametrize("schema", [
    # the `if` holds on every object with a key (whatever its value): only {} is valid
    {"if": {"minProperties": 1}, "then": False, "else": _nested(4, {"type": "object"})},
    {"properties": {"x": {"not": _nested(3, {"type": "object"})}}},
    {"type": "array", "contains": _nested(3, {"type": "integer"}), "items": _nested(3, {})},
])
def test_complements_count_declared_depth(schema):
    """Inside a complement's operands (`not`, `if`, `contains`) declared containers
    still count against max_depth, as the universe they are taken from does: the
    complement stays exact. (Counting only free values there, the `if` of the first
    schema failed on an instance deeper than max_depth, whose `else` was then taken:
    an instance jsonschema rejects was accepted.)"""
    acc, cs = compiled(schema, max_depth=2)
    check = jsonschema.Draft202012Validator(schema)
    pool = [{}, [], 1, [1], {"a": 1}, {"x": {"a": {"a": {"a": {}}}}}, {"x": {"a": {"a": 1}}}, {"x": {"a": 1}}]
    for depth in range(6):
        v = 1
        for _ in range(depth):
            v = {"a": v}
        pool += [v, [v], {"x": v}, [{"a": v}]]
    for inst in pool:
        if cs.accepts(cs.canonical(inst)):
            assert check.is_valid(inst), inst
    if schema.get("then", True) is not False:
        walks_validate(cs, schema)


def test_nesting_past_the_limit():
    """Declared structure nested deeper than MAX_NESTING subschemas compiles again with
    declared containers counted against max_depth (the recursion through ever new
    merged copies that Renovate's managers make ends there); applicators nested that
    deep are refused by name: not a RecursionError."""
    acc, _ = compiled(_nested(60, {"type": "integer"}))
    assert acc('{"a":' * 60 + "1" + "}" * 60)
    acc, _ = compiled(_nested(MAX_NESTING + 5, {"type": "integer"}), max_depth=20)
    assert acc('{"a":' * 19 + "{}" + "}" * 19) and not acc('{"a":' * 20 + "{}" + "}" * 20)
    chain = {"type": "integer"}
    for i in range(MAX_NESTING + 5):
        chain = {"anyOf": [chain, {"type": "string", "maxLength": i}]}
    with pytest.raises(fsm.SchemaError, match="nests more than"):
        schema_to_term(chain)


def test_typo_notes_for_every_place_a_key_is_misspelt():
    """Typo suggestions are remembered per key (a schema repeats the same unknown keys
    thousands of times): still one warning per place."""
    schema = {"properties": {k: {"type": "string", "maxLenght": 3} for k in string.ascii_lowercase[:4]},
              "ignoreCase": 1}
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        schema_to_term(schema)
    texts = [str(w.message) for w in got]
    assert sum("'maxLenght'" in t and "'maxLength'" in t for t in texts) == 4, texts
    assert not any("ignoreCase" in t for t in texts)


@pytest.mark.parametrize("patterns", [["^a", "b$"], ["^x-"], ["^(.*)task$", "^(.*)pipe$", "^(.*)docker_builder$"]])
def test_keys_that_patterns_partition_are_endless(patterns):
    """Undeclared keys of an open object with patternProperties fall in the cells of the
    patterns' partition (each pattern matched or not), which together take every key:
    endless from every beginning, so the matcher keeps them distinct without walking
    (Cirrus CI's four `^(.*)task$` patterns: no DFA of the cells built, 2 s of its
    compile). The verdict agrees with key_language on the union of the cells; instances
    agree with jsonschema."""
    from structgen.fsm.core.dfa import LazyDFA
    from structgen.fsm.json.keys import key_language
    from structgen.fsm.json.source import JsonTermBuilder, JsonTermSource
    from structgen.fsm.json.strings import StringTerms
    schema = {"type": "object", "properties": {"n": {"type": "integer"}},
              "patternProperties": {p: {"type": "string"} for p in patterns}}
    cs = schema_to_term(schema)
    tb = JsonTermBuilder()
    st = StringTerms(tb)
    pats = [st.search(p) for p in patterns]
    cells = [st.quoted(tb.intersect([p if i >> j & 1 else tb.complement(p) for j, p in enumerate(pats)]))
             for i in range(1 << len(pats))]
    endless, finite = key_language(LazyDFA(JsonTermSource(tb), tb.alt(cells), 10_000))
    assert endless and not finite
    assert cs.keys is not None and cs.keys.walks is (not endless)
    check = jsonschema.Draft202012Validator(schema)
    dfa = cs.dfa()
    for inst in ({}, {"n": 1}, {"atask": "x"}, {"atask": 1}, {"x-b": "s", "zzz": 2}, {"ab": "s", "q": None}):
        assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), inst
