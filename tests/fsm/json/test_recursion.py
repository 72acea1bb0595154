"""Recursive schemas (fsm/json/recursive.py) as lazy terms and on the grammar path: merges
through allOf and $ref, large item bounds, ambiguous unions, random recursive schemas,
the two paths against each other, and lenient relaxations; against jsonschema."""
from __future__ import annotations

import json
import random
import re
import warnings

import jsonschema
import pytest
from oracles import exact_recursive as _exact_recursive
from oracles import instances_agree as _instances_agree
from oracles import random_walks
from oracles import recursive_with_oracle as _recursive_with_oracle
from oracles import token_walks as _token_walks
from oracles import validator as _validator
from oracles import walks_validate as _walks_validate

from structgen.fsm.core.errors import ConstraintError
from structgen.fsm.json.schema import SchemaError, SchemaWarning, schema_to_term


def test_recursion_under_intersection_names_the_place():
    """A recursive reference under an intersection or complement cannot take the grammar
    path: the error names the keyword, the schema holding it and the recursive one."""
    node = {"type": "object", "properties": {"c": {"not": {"$ref": "#/$defs/n"}}}}
    with pytest.raises(SchemaError, match=r"not intersects the recursive reference to #/\$defs/n") as e:
        schema_to_term({"$defs": {"n": node}, "$ref": "#/$defs/n"})
    assert (e.value.keyword, e.value.pointer) == ("not", "#/$defs/n/properties/c")
    node = {"type": "object", "properties": {"c": {"oneOf": [{"$ref": "#/$defs/n"}, {"required": ["a"]}]}}}
    with pytest.raises(SchemaError, match="oneOf intersects") as e:
        schema_to_term({"$defs": {"n": node}, "$ref": "#/$defs/n"})
    assert e.value.pointer == "#/$defs/n/properties/c"


def test_recursion_through_a_merged_all_of():
    """A recursive $ref beside more constraints in an allOf (`items: {allOf: [{$ref:
    node}, {required: [v]}]}`) is merged into one schema; the recursion then comes back
    to that allOf, which becomes the rule: the same trees as jsonschema accepts."""
    schema = {"$defs": {"n": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/n"}, {"required": ["v"]}]}},
        "v": {"type": "integer"}}}}, "$ref": "#/$defs/n"}
    cs = schema_to_term(schema)
    dfa = cs.dfa()
    check = jsonschema.Draft202012Validator(schema)
    rng = random.Random(5)

    def tree(depth):
        t = {}
        if rng.random() < 0.8:
            t["v"] = rng.randint(0, 9)
        if depth and rng.random() < 0.7:
            t["kids"] = [tree(depth - 1) for _ in range(rng.randint(0, 2))]
        return t
    seen = set()
    for _ in range(300):
        inst = tree(3)
        seen.add(check.is_valid(inst))
        assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), inst
    assert seen == {True, False}


def test_recursive_grammar_size_is_limited(monkeypatch):
    """A recursive schema's grammar has at most _RecursiveRules.MAX_RULES nonterminals:
    past it, a SchemaError says so (OpenAPI 3.1's unions of objects passed 400k in a
    minute, with no end in sight), not a compile that does not end."""
    from structgen.fsm.json.recursive import _RecursiveRules
    props = {f"p{i}": {"type": "array", "items": {"$ref": "#/$defs/n"}} for i in range(30)}
    schema = {"$defs": {"n": {"type": "object", "properties": props, "additionalProperties": False}},
              "$ref": "#/$defs/n"}
    assert len(schema_to_term(schema, recursion="grammar").rules.rules) > 30
    monkeypatch.setattr(_RecursiveRules, "MAX_RULES", 20)
    with pytest.raises(SchemaError, match="grammar passes 20 nonterminals"):
        schema_to_term(schema, recursion="grammar")


def test_recursion_through_a_ref_beside_keywords():
    """A $ref beside other keywords (2020-12: both hold) merges with them into one
    schema, as an allOf would (_Compiler._conjunction): `{type: object, properties:
    {...}, $ref: base}` where base recurses to the root compiles exactly as a recursive schema instead
    of being refused as an intersection; the $ref of a nested `allOf` branch too. The
    same trees as jsonschema accepts; the canonical writer follows the merged schema."""
    base = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2},
                                             "v": {"type": "integer"}}, "required": ["v"]}
    for schema in ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}},
                    "$ref": "#/$defs/base", "$defs": {"base": base}},
                   {"properties": {"name": {"enum": ["a", "b"]}}, "allOf": [{"properties": {"z": {"type": "null"}}}],
                    "$ref": "#/$defs/base", "$defs": {"base": base}}):
        cs, dfa, check, rng = _recursive_with_oracle(schema, seed=3)

        def tree(depth):
            t = {}
            for k, vals in (("v", [1, "x"]), ("name", ["a", "abcd", 2]), ("z", [None, 0]), ("q", [1])):
                if rng.random() < (0.8 if k == "v" else 0.3):
                    t[k] = rng.choice(vals)
            if depth and rng.random() < 0.7:
                t["kids"] = [tree(depth - 1) for _ in range(rng.randint(0, 3))]
            return t
        seen = {True: 0, False: 0}
        for _ in range(300):
            inst = tree(3)
            ok = check.is_valid(inst)
            seen[ok] += 1
            assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
        assert min(seen.values()) >= 20, seen


def test_recursion_inside_large_item_bounds():
    """maxItems above MAX_REPEAT_UNROLL around a recursive reference (mergify's condition
    lists: maxItems 500) takes a chain of rules, linear in the bound: arrays of every
    length around both bounds, of leaves and of subtrees, as jsonschema says."""
    schema = {"$defs": {"n": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"},
                                                              "minItems": 2, "maxItems": 100}]}},
              "$ref": "#/$defs/n"}
    cs = schema_to_term(schema)
    assert cs.recursion is not None
    dfa = cs.dfa()
    check = jsonschema.Draft202012Validator(schema)
    seen = {True: 0, False: 0}
    for n in (0, 1, 2, 3, 50, 99, 100, 101, 130):
        for inst in ([7] * n, [[1, 2]] * n, [1, [2] * n], [[1] * n, 3], [[[1, 2], [3, 4]]] * (n % 5)):
            ok = check.is_valid(inst)
            seen[ok] += 1
            assert cs.accepts(cs.canonical(inst), dfa) == ok, (n, inst)
    assert seen[True] > 10 and seen[False] > 10, seen


def test_recursive_rules_take_nullable_lazy_and_boolean_pieces():
    """A nullable piece beside a recursive reference becomes an optional terminal of its
    non-empty texts (_RecursiveRules._minus_empty): a deferred term (circle-ci's keys
    other than the known ones: the empty key among them) is read through its body, an
    intersection is intersected with the non-empty texts; the same non-empty texts."""
    from structgen.fsm.json.recursive import _RecursiveRules
    from structgen.fsm.json.source import JsonTermBuilder
    from structgen.fsm.json.strings import StringTerms
    tb = JsonTermBuilder()
    other = StringTerms(tb).not_in(["ab", "b"])
    both = tb.intersect([tb.star(tb.literal(b"a")), tb.star(tb.alt([tb.literal(b"a"), tb.literal(b"b")]))])
    rules = _RecursiveRules(tb, tb.empty, {}, {})
    for t in (other, both):
        assert t.nullable
        m = rules._minus_empty(t)
        assert not tb.matches(m, b"")
        for w in (b"a", b"aa", b"ab", b"b", b"ba", b"abc", b"x"):
            assert tb.matches(m, w) == tb.matches(t, w), (t, w)


def test_recursive_schema_with_deferred_ranges_and_enums():
    """Digit ranges and enums are deferred terms (built when the output reaches them):
    inside a recursive schema's lazy terms too, the canonical text
    of a random instance is accepted iff jsonschema says valid."""
    schema = {"$defs": {"n": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": -5, "maximum": 120}, "x": {"type": "number", "exclusiveMinimum": 0.5},
        "tag": {"enum": ["a", "bb", 3, None]}, "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/n"}
    cs = schema_to_term(schema)
    assert cs.recursion is not None
    rng = random.Random(0)

    def node(depth):
        o = {"v": rng.choice([-6, -5, 0, 7, 120, 121, 55])}
        if rng.random() < 0.5:
            o["x"] = rng.choice([0.5, 0.51, 3, 100.25, -1])
        if rng.random() < 0.5:
            o["tag"] = rng.choice(["a", "bb", "c", 3, 4, None, True])
        if depth < 3 and rng.random() < 0.6:
            o["kids"] = [node(depth + 1) for _ in range(rng.randint(0, 2))]
        return o
    _instances_agree(cs, schema, node, 300, 50)


def test_recursive_object_rules_share_their_tails():
    """An object with many optional properties in a recursive schema: its alternatives
    (one per first written property) share the rest as one nonterminal each
    (_RecursiveRules._seq), so the rules grow linearly in the properties, not
    quadratically (github-workflow: 17.7k LR states -> 2.6k, TTFM 1.5 -> 0.6 s); walks
    validate and canonical instances are accepted. Objects of 600 slots compile: the
    shared tails' rules and the marker lookups are loops, not recursion."""
    n = 40
    props = {}
    for i in range(n):  # each slot holds the recursive reference (a nonterminal of its own)
        props[f"p{i}"] = {"type": "integer"}
        props[f"q{i}"] = {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2}
    props["kid"] = {"$ref": "#/$defs/n"}
    schema = {"$defs": {"n": {"type": "object", "properties": props, "additionalProperties": False}},
              "$ref": "#/$defs/n"}
    cs = schema_to_term(schema, recursion="grammar")
    symbols = sum(len(alt) for alts in cs.rules.rules.values() for alt in alts)
    assert symbols < 1200, symbols  # (linear: ~680; each alternative repeating the later slots: ~3.5k)
    _walks_validate(cs, schema)
    dfa = cs.dfa()
    for inst in [{}, {"p3": 1, "kid": {"q0": [{}]}}, {"kid": {"kid": {}}, "q39": [{"p1": 2}, {}]}, {"p0": 0, "q1": []}]:
        assert cs.accepts(cs.canonical(inst), dfa), inst
    # 600 such slots: rules and marker lookups by loops, not recursion (Python's stack
    # overflowed at a few hundred)
    big = {"$defs": {"n": {"type": "object", "properties": {f"k{i}": {"$ref": "#/$defs/n"} for i in range(600)},
                           "additionalProperties": False}}, "$ref": "#/$defs/n"}
    rules = schema_to_term(big, recursion="grammar").rules.rules
    assert sum(len(alt) for alts in rules.values() for alt in alts) < 10 * 600
    assert schema_to_term(big).recursion == "lazy"  # (json_recursive's folds: loops too)
    props = {f"k{i}": {"type": "integer"} for i in range(600)}  # the reference last: deep
    props["kid"] = {"$ref": "#/$defs/n"}
    big["$defs"]["n"]["properties"] = props
    assert schema_to_term(big, recursion="grammar").rules is not None
    cs = schema_to_term(big)
    assert cs.recursion == "lazy" and cs.accepts('{"k599":1,"kid":{"kid":{}}}')


AMBIGUOUS_TREE = {"$defs": {
    "n": {"anyOf": [{"$ref": "#/$defs/leaf"}, {"type": "string", "maxLength": 2},
                    {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2},
                    {"type": "array", "items": {"$ref": "#/$defs/leaf"}}]},
    "leaf": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {
        "k": {"$ref": "#/$defs/n"}, "v": {"type": "integer"}}, "additionalProperties": False}]}},
    "$ref": "#/$defs/n"}


def _ambiguous_tree_node(rng, depth):
    r = rng.random()
    if depth >= 3 or r < 0.3:
        return rng.choice(["", "ab", "abc", 1, {}, {"v": 2}, {"v": "x"}, None])
    if r < 0.65:
        return [_ambiguous_tree_node(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {k: _ambiguous_tree_node(rng, depth + 1) for k in sorted(rng.sample("kv", rng.randint(1, 2)))}


@pytest.mark.parametrize("recursion", ["auto", "grammar"])
def test_recursive_union_with_ambiguous_branches_is_exact(recursion):
    """anyOf branches that stay ambiguous past their first part: a short string is both
    a leaf's string and the short-string branch, an array of up to two leaves is both
    array branches (two readings through each item, nested). Their rules have LALR(1)
    conflicts (refused before); the parse forks there and is exact: instances accepted
    iff jsonschema says valid, walks validate. As lazy terms (the default), a union's
    readings are one term's alternatives."""
    cs = _exact_recursive(AMBIGUOUS_TREE, recursion=recursion)
    assert cs.recursion == ("lazy" if recursion == "auto" else "grammar")
    rng = random.Random(2)
    _instances_agree(cs, AMBIGUOUS_TREE, lambda d: _ambiguous_tree_node(rng, d), 400, 80)
    _walks_validate(cs, AMBIGUOUS_TREE)


@pytest.mark.parametrize("recursion", ["auto", "grammar"])
def test_recursive_union_with_ambiguous_branches_token_level(smol_vocab, smol_tokenizer, recursion):
    """The same schema's token masks (on the grammar path, the forked parse in the
    mask's parser steps; as lazy terms, a term's alternatives): documents written out
    token by token are allowed at each step, EOS only at the end; token walks that end
    validate."""
    import numpy as np

    from structgen.fsm.json.schema import compile_json_schema
    auto = compile_json_schema(AMBIGUOUS_TREE, smol_vocab, recursion=recursion)
    assert recursion == "auto" or auto.source.t.conflicts
    v, row, eos = _validator(AMBIGUOUS_TREE), np.zeros(smol_vocab.num_words, dtype=np.int32), smol_vocab.eos_ids[0]
    for doc in (["ab", [["a", {"k": ["xy", "z"]}], {"k": {"k": "q"}}]], [[["ab"]], {"v": 3}], "x"):
        assert v.is_valid(doc)
        m = auto.matcher()
        for tid in smol_tokenizer.encode(json.dumps(doc, separators=(",", ":")), add_special_tokens=False):
            m.fill_next_token_bitmask(row)
            assert row[tid // 32] >> (tid % 32) & 1 and not row[eos // 32] >> (eos % 32) & 1, doc
            assert m.accept_token(tid)
        assert m.accept_token(eos)
    assert _token_walks(auto, smol_vocab, lambda text: v.is_valid(json.loads(text)), seed=3, steps=200,
                        closing=(b"]", b"}", b'"'), p_close=0.6) >= 6


class _RandomRecursive:
    """Random schemas around one recursive definition `n`, untyped or typed, whose
    properties and if/then branches (on `t`) hold typed $refs to it, anyOf of one $ref,
    oneOf (typed or not) and allOf of such, and arrays of them; and random instances."""
    TYPES = ["string", "integer", "number", "object", "array", "null", "boolean"]
    LEAVES = [{"type": "string", "maxLength": 2}, {"type": "integer"}, {"enum": ["a", 1, None]}, {"type": "boolean"},
              {"const": "b"}, {}, {"type": "object"}]
    THEN_EXTRA = [{}, {"type": "object"}, {"minimum": 2}, {"maxLength": 1}, {"type": ["object", "string"]}]

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def types(self) -> list:
        return self.rng.sample(self.TYPES, self.rng.randint(1, 3))

    def sub(self, depth: int):
        rng, r = self.rng, self.rng.random()
        if depth > 2 or r < 0.25:
            return rng.choice(self.LEAVES)
        if r < 0.4:
            return {"type": self.types(), "$ref": "#/$defs/n"}
        if r < 0.5:
            return {"$ref": "#/$defs/n"}
        if r < 0.6:
            return {"anyOf": [{"$ref": "#/$defs/n"}]}
        if r < 0.72:
            one = {"oneOf": [self.sub(depth + 1) for _ in range(rng.randint(1, 3))]}
            return {**one, "type": self.types()} if rng.random() < 0.6 else one
        if r < 0.85:
            return {"allOf": [self.sub(depth + 1) for _ in range(2)]}
        return {"type": "array", "maxItems": 2, "items": self.sub(depth + 1)}

    def schema(self) -> dict:
        rng = self.rng
        n = {"properties": {k: self.sub(1) for k in rng.sample(["a", "b", "c"], rng.randint(1, 3))}}
        if rng.random() < 0.6:
            n["allOf"] = [{"if": {"properties": {"t": {"const": v}}},
                           "then": {"properties": {"a": self.sub(2)}, **rng.choice(self.THEN_EXTRA)}} for v in "xy"]
            n["properties"]["t"] = {"enum": ["x", "y"]}
        if rng.random() < 0.3:
            n["type"] = self.types()
        return {"$defs": {"n": n}, **self.sub(0)}

    def value(self, depth: int):
        rng, r = self.rng, self.rng.random()
        if depth > 2 or r < 0.45:
            return rng.choice(["a", "b", "abc", 1, 2.5, None, True, False])
        if r < 0.6:
            return [self.value(depth + 1) for _ in range(rng.randint(0, 3))]
        o = {k: self.value(depth + 1) for k in rng.sample(["a", "b", "c", "t", "z"], rng.randint(0, 3))}
        return {**o, "t": rng.choice(["x", "y", "w"])} if rng.random() < 0.5 else o


@pytest.mark.parametrize("seed,recursion", [(1, "auto"), (3, "auto"), (1, "grammar")])
def test_random_recursive_schemas_agree_with_jsonschema(seed, recursion):
    """Random schemas around a recursive definition met by types, unions and value
    conditions (_RandomRecursive: the shapes _ref_typed, _per_type, _typed_union,
    _scalars_of and _objects_apart take): each compiles exactly or is refused with a
    ConstraintError, and on 60 random instances each accepts the canonical text exactly
    when jsonschema says valid. (Without the `then`s on non-objects in _objects_apart,
    3 and 4 of the two seeds' schemas disagree.) Recursion by lazy terms where they
    apply (the default) and by the grammar path alone."""
    gen, compiled, lazy = _RandomRecursive(seed), 0, 0
    for _ in range(80):
        schema = gen.schema()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cs = schema_to_term(schema, recursion=recursion)
                dfa = cs.dfa()
        except ConstraintError:
            continue
        compiled += 1
        lazy += cs.recursion == "lazy"
        check = _validator(schema)
        for _ in range(60):
            inst = gen.value(0)
            assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), (inst, schema)
    assert compiled >= 60
    assert lazy >= 4 if recursion == "auto" else not lazy, lazy  # (most schemas do not recurse:
    # the root or the properties are leaves; 5 of 80 in seeds 1 and 3 do, all lazy)


@pytest.mark.parametrize("seed", [1, 2])
def test_lazy_recursion_agrees_with_the_grammar_path(seed):
    """Recursive schemas as lazy terms (the default: fsm/json_recursive.lazy_recursion)
    and on the grammar path are two constructions of one language: each one's random
    walks are texts the other accepts and jsonschema finds valid. The schemas: the
    ambiguous tree, a tree of arrays with prefixItems and bounds, mutual recursion
    through two definitions (one rule), two recursive definitions side by side (two
    rules), and the first recursive schemas _RandomRecursive draws."""
    ref = {"$ref": "#/$defs/a"}
    fixed = [AMBIGUOUS_TREE,
             {"$defs": {"a": {"anyOf": [{"type": "integer", "minimum": 3}, {
                 "type": "array", "prefixItems": [{"type": "string", "maxLength": 1}, ref], "items": ref,
                 "minItems": 1, "maxItems": 4}]}}, **ref},
             {"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}, "n": {"type": "null"}},
                              "additionalProperties": False},
                        "b": {"type": "array", "items": {"anyOf": [ref, {"type": "boolean"}]}, "maxItems": 3}},
              **ref},
             {"$defs": {"i": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/i"}}]},
                        "s": {"anyOf": [{"type": "string"}, {"type": "object", "additionalProperties": {
                            "$ref": "#/$defs/s"}}]}},
              "type": "array", "prefixItems": [{"$ref": "#/$defs/i"}, {"$ref": "#/$defs/s"}], "items": False}]
    gen, schemas = _RandomRecursive(seed), []
    while len(schemas) < 6:
        schema = gen.schema()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if schema_to_term(schema).recursion == "lazy":
                    schemas.append(schema)
            except ConstraintError:
                pass
    for schema in fixed + schemas:
        v = _validator(schema)
        lazy, grammar = schema_to_term(schema), schema_to_term(schema, recursion="grammar")
        assert (lazy.recursion, grammar.recursion) == ("lazy", "grammar"), schema
        for cs, other in ((lazy, grammar), (grammar, lazy)):
            texts, _ = random_walks(cs, n=40, seed=seed)
            dfa = other.dfa()
            assert len(texts) >= 20
            for t in texts:
                assert other.accepts(t, dfa) and v.is_valid(json.loads(t)), (schema, t)


def test_lazy_recursion_drops_endless_rules_and_leaves_left_recursion_to_the_grammar():
    """A rule with no finite value (its required property holds it again) is nothing as
    a lazy term, as the grammar path drops it; a rule that may begin with itself
    (deriving it would derive it again) takes the grammar path (json_recursive.
    lazy_recursion's conditions). Both exact; jsonschema agrees on the valid ones (it
    loops too on a value that no branch before the self-reference takes)."""
    endless = {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"],
               "additionalProperties": False}
    cases = [({"$defs": {"a": endless}, "anyOf": [{"$ref": "#/$defs/a"}, {"type": "integer"},
                                                   {"type": "array", "items": {"$ref": "#/$defs/a"}}]},
              "lazy", ["1", "[]"], ['{"x":1}', '[{"x":{}}]', "[1]", "{}"]),
             ({"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}, {"$ref": "#"}]},
              "grammar", ["1", "[1,[2,[]]]"], ['"x"', "[1,]"])]
    for schema, path, valid, invalid in cases:
        cs = schema_to_term(schema)
        assert cs.recursion == path, schema
        dfa, v = cs.dfa(), _validator(schema)
        for text in valid + invalid:
            assert cs.accepts(text, dfa) == (text in valid), text
            assert text not in valid or v.is_valid(json.loads(text))
    assert 0x7B not in dfa.live_bytes(dfa.walk(dfa.start, b"[1,"))  # (no object begins: none ends)
    cs = schema_to_term(cases[0][0])
    dfa = cs.dfa()
    assert 0x7B not in dfa.live_bytes(dfa.start) and 0x7B not in dfa.live_bytes(dfa.walk(dfa.start, b"["))


def test_recursive_intersections_relax_in_lenient_mode():
    """Where a recursive reference sits under an intersection or complement (which the
    grammar path cannot make), strict mode refuses naming the keyword and pointer;
    lenient mode warns and relaxes to a superset: an overlapping oneOf to anyOf, `not`
    dropped, if/then/else to then or else, a part beside the recursive one dropped, a
    reference to another document to any value. Walks validate against the relaxed
    schema."""
    ref = {"$ref": "#/$defs/n"}
    def tree(c, extra=None):  # node n: {"c": <c>, "d": [n, n]}
        n = {"type": "object", "properties": {"c": c, "d": {"type": "array", "items": ref, "maxItems": 2}},
             "additionalProperties": False, **(extra or {})}
        return {"$defs": {"n": n}, "$ref": "#/$defs/n"}
    cases = [  # schema, relaxed schema, keyword
        (tree({"oneOf": [ref, {"properties": {"x": {}}}]}), tree({"anyOf": [ref, {"properties": {"x": {}}}]}),
         "oneOf"),  # (an open leaf: with a closed one, keys apart, the oneOf is a union, exact)
        (tree({"not": ref}), tree({}), "not"),
        (tree({"if": {"type": "object"}, "then": ref, "else": {"type": "integer"}}),
         tree({"anyOf": [ref, {"type": "integer"}]}), "if"),
        (tree({"type": "integer"}, {"anyOf": [{"required": ["c"]}, ref]}), tree({"type": "integer"}), "anyOf"),
        ({"type": "object", "properties": {"a": {"$ref": "https://example.com/other.json"}, "b": {"type": "integer"}},
          "required": ["b"], "additionalProperties": False},
         {"type": "object", "properties": {"a": {}, "b": {"type": "integer"}}, "required": ["b"],
          "additionalProperties": False}, "$ref"),
    ]
    for i, (schema, relaxed, keyword) in enumerate(cases):
        with pytest.raises(SchemaError) as e:
            schema_to_term(schema)
        assert e.value.keyword.endswith(keyword) and "strict=False" in str(e.value), (keyword, e.value)
        with pytest.warns(SchemaWarning, match=re.escape(keyword)):
            cs = schema_to_term(schema, strict=False)
        assert cs.relaxed, keyword
        _walks_validate(cs, relaxed, seed=i)


def test_recursive_intersection_the_compiler_left_relaxes_in_the_rules():
    """An intersection holding a recursive reference that no keyword's own relaxation
    caught (`contains` of a recursive schema; swagger-2.0's and tmLanguage's were
    errors in lenient mode too): strict mode refuses it, lenient mode takes one of its
    parts that is no complement (a superset), says so, and its walks validate against
    the schema without `contains`."""
    ref = {"$ref": "#/$defs/n"}

    def tree(extra):
        return {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {
            "type": "array", "items": ref, "maxItems": 2, **extra}}, "additionalProperties": False}},
            "$ref": "#/$defs/n"}
    schema = tree({"contains": {"$ref": "#/$defs/n", "required": ["v"]}})
    with pytest.raises(SchemaError, match="intersection or complement"):
        schema_to_term(schema)
    with pytest.warns(SchemaWarning, match="relaxed to one of its parts"):
        cs = schema_to_term(schema, strict=False)
    assert cs.recursion is not None and cs.relaxed
    _walks_validate(cs, tree({}))
