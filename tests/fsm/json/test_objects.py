"""JSON objects: declared, pattern and additional properties, key order and the canonical
text, property counts and dependencies, open objects' key masks, long objects."""
from __future__ import annotations

import json
import random

import jsonschema
import pytest
from oracles import compiled, live_tokens_brute_force, valid
from oracles import token_walks as _token_walks
from oracles import validator as _validator

from structgen.fsm.json.schema import SchemaError, canonical_json, schema_to_term


def test_object_declared_order_optional_and_extra():
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
              "required": ["a"]}
    acc, cs = compiled(schema)
    assert cs.key_order == ["b", "a"]
    assert acc('{"b":1,"a":"x"}') and acc('{"a":"x"}') and acc('{"a":"x","zz":[1,{"q":null}]}')
    assert not acc('{"a":"x","b":1}')  # declared order
    assert not acc('{"b":1}')  # required
    assert not acc('{"a":"x","a":"y"}')  # a declared key twice
    assert not acc('{"a":"x","b":1}')
    # other keys only after the declared ones: a small model cannot open the object with
    # made-up keys and wander off before the required ones (it did when they could)
    assert not acc('{"zz":1,"a":"x"}') and not acc('{"zz":1,"b":1,"a":"x"}')
    assert canonical_json({"zz": 1, "a": "x", "b": 2}, cs.key_order) == '{"b":2,"a":"x","zz":1}'


def test_key_exclusion_tries_exact():
    """StringTerms.not_in (other keys of an object, a trie of deferred nodes): a string
    content is accepted iff it is none of the words, for words and contents mixing
    ASCII, non-ASCII, escaped and control characters; deferred terms refuse export."""
    from structgen.fsm.core.dfa import LazyDFA, TermSource
    from structgen.fsm.core.terms import LAZY, TermBuilder
    from structgen.fsm.json.strings import StringTerms, encode_string
    rng = random.Random(1)
    alphabet = ["a", "b", "é", '"', "\\", "\x01", "\x7f", " ", "z", "~", "日"]
    for _ in range(120):
        words = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
                 for _ in range(rng.randint(0, 5))}
        tb = TermBuilder()
        t = StringTerms(tb).not_in(words)
        dfa = LazyDFA(TermSource(tb), t)
        for _ in range(40):
            w = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
            assert bool(dfa.accepting[dfa.walk(dfa.start, encode_string(w))]) == (w not in words), (words, w)
        for raw in (b"\x01", b'"', b"\\"):  # never contents as such
            assert not dfa.accepting[dfa.walk(dfa.start, raw)]
        # a node's derivative by a plain byte is taken without its body
        # (StringTerms._not_in_step): it must be the body's, term for term
        todo, seen = [t], set()
        while todo:
            x = todo.pop()
            if x.kind != LAZY or x.id in seen:
                continue
            seen.add(x.id)
            for b in range(0x20, 0x80):
                d = tb.derive(x, b)
                assert d is tb.derive(tb.body(x), b), (words, x, chr(b))
                todo.append(d)
    with pytest.raises(ValueError, match="deferred"):
        tb.export(t)


def test_open_object_key_masks_equal_token_walks(smol_vocab):
    """At key positions of open objects, a key other than the object's own ones is
    masked as any string content minus the own keys' continuations
    (TokenAutomaton._cofinite_words): every mask must equal a token-by-token walk,
    mid-key and at own-key ends too (`kind":"` must die: kind is an integer)."""
    from structgen.fsm.json.schema import build_automaton
    schema = {"type": "object", "properties": {
        "kind": {"type": "integer"}, "name": {"type": "string"},
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "app": {"enum": ["x"]}}}}}
    auto = build_automaton(schema, smol_vocab)
    eos = set(smol_vocab.eos_ids)
    data = smol_vocab.token_bytes
    for prefix in [b'{"', b'{"k', b'{"kin', b'{"kind', b'{"kinds', b'{"x', b'{"kind":1,"', b'{"kind":1,"na',
                   b'{"kind":1,"spec":{"', b'{"kind":1,"spec":{"ap', b'{"kind":1,"spec":{"app',
                   b'{"kind":1,"spec":{"replicas":2,"', b'{"kind":1,"\\u0001', b'{"\xc3\xa9']:
        s = auto.dfa.walk(auto.start, prefix)
        assert s != 0, prefix
        assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), prefix
    m = auto.matcher()  # an own key's end: the token that closes it as another key dies
    for t in [b'{"', b"kind"]:
        assert m.accept_token(data.index(t)), t
    assert data.index(b'":"') not in set(auto.allowed_tokens(m.state).tolist())


def test_token_level_random_walks_open_objects(smol_vocab):
    """Open objects (other keys allowed, masked as any key but the known ones:
    TokenAutomaton._cofinite_words): random token walks never meet an empty mask, and
    every walk that ends validates with jsonschema."""
    from structgen.fsm.json.schema import compile_json_schema
    schema = {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"},
        "tags": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 5}}},
        "required": ["name"]}
    auto = compile_json_schema(schema, smol_vocab)
    v = _validator(schema)
    assert _token_walks(auto, smol_vocab, lambda text: v.is_valid(json.loads(text)), seed=1) >= 6


def test_additional_properties_false_and_schema():
    acc, _ = compiled({"properties": {"a": {}}, "additionalProperties": False})
    assert acc('{"a":1}') and acc("{}") and not acc('{"b":1}')
    acc, _ = compiled({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}})
    assert acc('{"a":"s","b":1}') and not acc('{"a":1,"b":"s"}') and not acc('{"b":1,"a":1}')
    # keys known elsewhere are other keys in an object that does not declare them (no
    # keyword intersects objects): after its own keys, in any order, wherever they come
    # in the key order
    d = {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}
    acc, cs = compiled({"properties": {"b": {}, "d": d, "a": {}, "c": {}}})
    assert cs.key_order == ["b", "d", "a", "c"]
    assert acc('{"d":{"a":1,"c":2,"b":3}}') and acc('{"d":{"c":2,"b":3}}') and acc('{"d":{"b":3,"c":2}}')
    assert not acc('{"d":{"b":2,"a":1}}') and not acc('{"d":{"a":1,"a":2}}') and not acc('{"d":{"a":1,"c":"s"}}')
    assert cs.canonical({"c": 0, "d": {"c": 2, "b": 3, "a": 1}, "b": 4}) == '{"b":4,"d":{"a":1,"b":3,"c":2},"c":0}'
    assert cs.canonical({"d": {"b": 3, "a": 1}}, indent=1) == '{\n "d": {\n  "a": 1,\n  "b": 3\n }\n}'
    # with an allOf whose objects intersect, every known key has its place
    acc, _ = compiled({"properties": {"d": d, "a": {}, "b": {}, "c": {}},
                       "allOf": [{"required": ["d"], "minProperties": 1},
                                 {"if": {"required": ["a"]}, "then": {"required": ["b"]}}]})
    assert acc('{"d":{"a":1,"b":3,"c":2}}') and not acc('{"d":{"a":1,"c":2,"b":3}}')
    # a type list merges per type (_type_split): an object that intersects nothing, or null
    acc, _ = compiled({"properties": {"d": d, "a": {}, "b": {}, "c": {}},
                       "allOf": [{"required": ["d"], "minProperties": 1}, {"type": ["object", "null"]}]})
    assert acc('{"d":{"a":1,"b":3,"c":2}}') and acc('{"d":{"a":1,"c":2,"b":3}}') and acc("null")
    assert not acc("{}") and not acc('"s"')
    # one that merges into one object intersects nothing: own keys first
    acc, _ = compiled({"properties": {"d": d, "a": {}, "b": {}, "c": {}},
                       "allOf": [{"required": ["d"], "minProperties": 1}]})
    assert acc('{"d":{"a":1,"b":3,"c":2}}') and acc('{"d":{"a":1,"c":2,"b":3}}') and not acc('{}')
    # an allOf that only says which keys are present intersects nothing: own keys first
    acc, _ = compiled({"properties": {"d": d, "a": {}, "b": {}, "c": {}}, "allOf": [{"required": ["d"]}]})
    assert acc('{"d":{"a":1,"b":3,"c":2}}') and acc('{"d":{"a":1,"c":2,"b":3}}') and not acc('{"a":1}')


def test_canonical_text_follows_the_schema():
    """CompiledSchema.canonical puts an object's own keys first where objects slot only
    their own keys: under each anyOf branch in turn, the first arrangement accepted."""
    schema = {"anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"properties": {"b": {"$ref": "#/$defs/o"}}, "required": ["b"]}],
              "$defs": {"o": {"properties": {"c": {}}}}}
    acc, cs = compiled(schema)
    assert cs.own_slots is not None
    for inst, text in [({"b": 2, "a": 1}, '{"a":1,"b":2}'),  # both branches: the first one's
                       ({"b": 2, "a": "x"}, '{"b":2,"a":"x"}'),  # the second branch only
                       ({"a": "x", "b": {"a": 1, "c": 2}}, '{"b":{"c":2,"a":1},"a":"x"}')]:
        assert cs.canonical(inst) == text and acc(text) == valid(schema, inst), inst
    assert not acc('{"a":"x","b":2}')  # the second branch's own key comes first there
    for inst in [{"a": "x"}, {"c": {}}]:  # invalid: written under the first branch
        assert cs.canonical(inst) == json.dumps(inst, separators=(",", ":")) and not acc(cs.canonical(inst))


def test_objects_beside_each_other_keep_the_key_order():
    """Two parts of one schema that may both hold objects are intersected: their objects
    then slot every known key, in key order (own keys only would disagree)."""
    for schema, text in [({"type": "object", "properties": {"a": {}}, "anyOf": [{"properties": {"b": {}}}]},
                          '{"a":1,"b":2}'),
                         ({"type": "array", "items": {"properties": {"a": {}}},
                           "anyOf": [{"items": {"properties": {"b": {}}}}]}, '[{"a":1,"b":2}]'),
                         ({"properties": {"b": {}, "a": {}}, "const": {"b": 1, "a": 2}}, '{"b":1,"a":2}')]:
        acc, cs = compiled(schema)
        assert acc(text) and cs.canonical(json.loads(text)) == text, schema


def test_allow_extra_properties_false_option():
    acc, _ = compiled({"properties": {"a": {"type": "integer"}}}, allow_extra_properties=False)
    assert acc('{"a":1}') and not acc('{"a":1,"b":2}')


def test_min_max_properties_pattern_properties_names():
    schema = {"patternProperties": {"^x": {"type": "integer"}}, "propertyNames": {"maxLength": 3},
              "minProperties": 1, "maxProperties": 2}
    acc, _ = compiled(schema)
    for inst in [{}, {"x1": 1}, {"x1": "s"}, {"abcd": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, {"xa": 1, "y": None}]:
        assert acc(canonical_json(inst, [])) == valid(schema, inst), inst


def test_dependent_required_and_schemas():
    schema = {"properties": {"a": {}, "b": {}, "c": {}}, "dependentRequired": {"a": ["b"]},
              "dependentSchemas": {"c": {"properties": {"a": {"type": "integer"}}, "required": ["a"]}}}
    acc, cs = compiled(schema)
    for inst in [{}, {"a": 1}, {"a": 1, "b": 2}, {"c": 1}, {"c": 1, "a": 1, "b": 0}, {"c": 1, "a": "s", "b": 0}, {"b": 1}]:
        assert acc(cs.canonical(inst)) == valid(schema, inst), inst


def test_many_pattern_properties_partitioned_by_their_overlaps():
    """Past MAX_PATTERN_PROPERTIES_PARTITION (5) patternProperties, only the sets of
    patterns a key can match together are compiled (appsettings' 8 names, pyrseas' 6
    prefixes: more than 5 was refused): 7 patterns, two of which overlap, exact
    against jsonschema on random objects; patterns that all overlap past
    MAX_PATTERN_SUBSETS ways are refused naming the keyword and place."""
    from structgen.fsm.json.schema import MAX_PATTERN_SUBSETS
    pats = {"^a": {"type": "integer"}, "^ab": {"minimum": 5}, "^c$": {"type": "string"},
            "^d": {"type": "boolean"}, "^e": {"type": "null"}, "^f": {"type": "string", "maxLength": 1},
            "^g": {"type": "array"}}
    schema = {"type": "object", "properties": {"z": {"type": "integer"}}, "patternProperties": pats,
              "additionalProperties": False}
    acc, cs = compiled(schema)
    v = jsonschema.Draft202012Validator(schema)
    rng = random.Random(11)
    values = [1, 7, "x", "xy", True, None, [], 2.5]
    seen = {True: 0, False: 0}
    for _ in range(400):
        keys = rng.sample(["a", "ab1", "abc", "c", "cc", "d1", "e", "f", "g", "h", "z"], rng.randint(0, 3))
        inst = {k: rng.choice(values) for k in keys}
        ok = v.is_valid(inst)
        seen[ok] += 1
        assert acc(cs.canonical(inst)) == ok, inst
    assert min(seen.values()) > 50, seen
    wide = {f"^{'x' * i}": {"type": "integer"} for i in range(1, 8)}  # (each a prefix of the next: 128 ways)
    with pytest.raises(SchemaError, match=f"more than {MAX_PATTERN_SUBSETS} combinations") as e:
        schema_to_term({"type": "object", "properties": {"q": {"patternProperties": wide}}})
    assert e.value.keyword == "patternProperties" and e.value.pointer == "#/properties/q"


@pytest.mark.parametrize("pats", [("^(nlog|NLog)$", "^(cdn|Cdn)$", "^pwa$"), ("^n", "^nl", "^pwa$")])
def test_object_valued_patterns_apart_or_meeting(pats):
    """patternProperties of object values: apart where no key matches two patterns
    (appsettings' names: objects then slot only their own keys), intersected where
    some key does (`^n` and `^nl`); both exact against jsonschema, nested objects' keys
    in either order (each value object slots its own keys: met, their orders differ)."""
    values = [{"type": "object", "properties": {"c": {"type": "integer"}, "a": {"type": "string"}}, "required": ["a"]},
              {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}},
              {"type": "object", "properties": {"a": {"minimum": 3}}, "required": ["b"]}]
    schema = {"type": "object", "properties": {"Kestrel": {"type": "object", "properties": {"b": {"type": "null"}}}},
              "patternProperties": dict(zip(pats, values))}
    acc, cs = compiled(schema)
    v = jsonschema.Draft202012Validator(schema)
    rng = random.Random(5)
    inner = [1, 5, "x", None]
    seen = {True: 0, False: 0}
    for _ in range(300):
        keys = rng.sample(["nlog", "NLog", "nl", "n", "cdn", "pwa", "Kestrel", "x"], rng.randint(0, 2))
        inst = {k: {m: rng.choice(inner) for m in rng.sample("abcq", rng.randint(0, 3))} for k in keys}
        ok = v.is_valid(inst)
        seen[ok] += 1
        assert acc(cs.canonical(inst)) == ok, inst
    assert min(seen.values()) > 30, seen


def test_long_objects_compile():
    """An object of 1000 required members (concatenations re-nest in a loop: 200 passed
    Python's stack), and a recursive union of two objects that share 400 leading members,
    as lazy terms and on the grammar path (which merges them one member a rule: the
    rules are made by a worklist, not nested calls, as in argo-workflows' Kubernetes
    definitions)."""
    keys = {f"k{i}": {"type": "string"} for i in range(1000)}
    cs = schema_to_term({"type": "object", "properties": keys, "required": list(keys)})
    body = ",".join(f'"k{i}":"x"' for i in range(1000))
    assert cs.accepts("{" + body + "}") and not cs.accepts("{" + body[:-8] + "}")
    keys = {f"k{i}": {"type": "string"} for i in range(3000)}  # (optional: rows and derivatives
    # along 3000 nullable members, made in a loop; megalinter's configuration passed the stack)
    cs = schema_to_term({"type": "object", "properties": keys, "additionalProperties": False})
    assert cs.accepts('{"k2999":"x"}') and cs.accepts('{"k7":"x","k5":"y"}') is False and cs.accepts("{}")
    assert cs.tb.matches(cs.term, b'{"k1":"x","k2998":"y"}')
    keys = {f"k{i}": {"type": "string"} for i in range(400)}
    node = {"anyOf": [{"type": "object", "properties": {**keys, side: {"$ref": "#/$defs/node"}}, "required": list(keys),
                       "additionalProperties": False} for side in "ab"]}
    schema = {"$defs": {"node": node}, "$ref": "#/$defs/node"}
    for recursion in ("auto", "grammar"):
        cs = schema_to_term(schema, recursion=recursion)
        assert cs.recursion == ("lazy" if recursion == "auto" else "grammar")
        leaf = {k: "x" for k in keys}
        for inst in [leaf, dict(leaf, a=leaf), dict(leaf, a=dict(leaf, b=leaf)), dict(leaf, a={"k0": "x"}),
                     {"k0": "x"}]:
            assert cs.accepts(canonical_json(inst, cs.key_order)) == valid(schema, inst)
