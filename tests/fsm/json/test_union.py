"""A root anyOf that uniqueItems sets apart, split into an automaton per branch
(fsm/json_union.py): checked against jsonschema, and the masks against the branches'
schemas written out by hand, compiled on their own."""
from __future__ import annotations

import copy
import json
import random
import warnings

import jsonschema
import numpy as np
import pytest
from oracles import small_vocab

from structgen.fsm.core.errors import SchemaError
from structgen.fsm.json.schema import compile_json_schema, schema_to_term
from structgen.fsm.json.union import UnionAutomaton, UnionMatcher, UnionSchema

UNIQUE = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
# two keys, each unique in one branch and free in the other
TWO = {"anyOf": [{"properties": {"a": copy.deepcopy(UNIQUE)}}, {"properties": {"b": copy.deepcopy(UNIQUE)}}]}
# tsconfig's shape: the union under the root's allOf, its branches behind $refs, beside other keys
TSCONFIG = {
    "type": "object",
    "allOf": [{"$ref": "#/definitions/options"},
              {"anyOf": [{"$ref": "#/definitions/files"}, {"$ref": "#/definitions/include"},
                         {"$ref": "#/definitions/references"}]}],
    "definitions": {
        "options": {"properties": {"strict": {"type": "boolean"}}},
        "files": {"properties": {"files": copy.deepcopy(UNIQUE)}},
        "include": {"properties": {"include": copy.deepcopy(UNIQUE) | {"minItems": 1}}},
        "references": {"properties": {"references": {"type": "array", "uniqueItems": True, "items": {
            "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
            "additionalProperties": False}}}},
    },
}


# arrays unique, or of short strings (oracles.STRINGS beside a free array)
SHORT_OR_UNIQUE = {"anyOf": [copy.deepcopy(UNIQUE), {"type": "array", "items": {"type": "string", "maxLength": 3}}]}
UNIQUE_OR_LONG = {"anyOf": [copy.deepcopy(UNIQUE), {"type": "array", "items": {"type": "string"}, "minItems": 3}]}


def valid(schema, inst) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(inst)


def _branches_by_hand(schema: dict) -> list[dict]:
    """TWO's and TSCONFIG's branch schemas, written out here (not by json_union): the
    anyOf replaced by its branch, as an allOf branch."""
    if schema is TWO:
        return [{"allOf": [b]} for b in copy.deepcopy(TWO["anyOf"])]
    out = []
    for ref in ("files", "include", "references"):
        s = copy.deepcopy(TSCONFIG)
        s["allOf"][1] = {"allOf": [{"$ref": f"#/definitions/{ref}"}]}
        out.append(s)
    return out


@pytest.mark.parametrize("schema, instances", [
    (TWO, [{}, {"a": ["x", "x"]}, {"b": ["y", "y"]}, {"a": ["x", "x"], "b": ["y", "y"]}, {"a": ["x", "x"], "b": ["y"]},
           {"a": ["x"], "b": ["y", "y"]}, {"a": ["x"], "b": ["y"], "c": [1, 1]}, {"a": ["x", "y", "x"], "b": []},
           {"a": "x", "b": ["y", "y"]}, {"a": ["x", "x"], "b": 1}]),
    (TSCONFIG, [{}, {"strict": True}, {"files": ["a", "a"]}, {"files": ["a", "a"], "include": ["b", "b"]},
                {"files": ["a", "a"], "include": ["b", "b"], "references": [{"path": "p"}, {"path": "p"}]},
                {"files": ["a", "a"], "include": ["b", "b"], "references": [{"path": "p"}, {"path": "q"}]},
                {"files": ["a"], "include": [], "references": [{"path": "p"}, {"path": "p"}]},
                {"files": ["a", "a"], "include": [], "references": [{"path": "p"}, {"path": "p"}]},
                {"strict": 1, "files": ["a"]}, {"include": ["b", "c", "b"], "strict": False}]),
    (SHORT_OR_UNIQUE, [[], ["a", "a"], ["abcd", "abcd"], ["abcd", "a", "a"], ["abcd", "b"], "x", [1, 1]]),
    (UNIQUE_OR_LONG, [["a", "a"], ["a", "a", "a"], ["a", "b"], ["a", "b", "a", "c"], []]),
])
def test_texts_agree_with_jsonschema(schema, instances):
    """Strict compiles split the union (no refusal), and the canonical text of an
    instance is accepted exactly when it is valid, compact and with flexible whitespace."""
    cs = schema_to_term(schema)
    flexible = schema_to_term(schema, whitespace="flexible")
    assert isinstance(cs, UnionSchema) and not cs.relaxed
    dfa = cs.dfa()  # (as tests/json_suite.py reads a compiled schema)
    for inst in instances:
        assert cs.accepts(cs.canonical(inst), dfa) == valid(schema, inst), inst
        assert flexible.accepts(flexible.canonical(inst, indent=1)) == valid(schema, inst), inst


def test_lenient_mode_splits_without_relaxing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cs = schema_to_term(TWO, strict=False)
    assert isinstance(cs, UnionSchema) and cs.relaxed == []


@pytest.mark.parametrize("schema", [
    # the union applies below too (an item of `more`): a branch per place, not one split
    {"$defs": {"u": TWO}, "allOf": [{"$ref": "#/$defs/u"}],
     "properties": {"more": {"type": "array", "items": {"$ref": "#/$defs/u"}}}},
    # oneOf: its branches must exclude each other, which a union of automata does not check
    {"oneOf": copy.deepcopy(TWO["anyOf"])},
    # below a property: each object may take another branch
    {"properties": {"x": TWO}},
    # which branches hold decides what unevaluatedProperties sees: both may be needed
    {"anyOf": [{"properties": {"a": copy.deepcopy(UNIQUE)}}, {"properties": {"b": {}}}],
     "unevaluatedProperties": False},
])
def test_unions_that_are_not_split_stay_refused(schema):
    with pytest.raises(SchemaError, match="uniqueItems"):
        schema_to_term(schema)


def _allowed(m, width) -> set:
    row = np.zeros(width, dtype=np.int32)
    m.fill_next_token_bitmask(row)
    return set(np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist())


@pytest.mark.parametrize("schema, start", [
    (TWO, []), (TWO, [b'{"', b'a', b'":', b'["', b'x', b'",', b'"x"']),
    (TSCONFIG, [b'{"', b'files', b'":', b'["', b'a', b'",', b'"a"'])])
def test_masks_are_the_union_of_the_branches(schema, start):
    """Along random walks, the mask is the union of the masks of the branches (compiled
    from schemas written out by hand) that took every token so far, and the forced
    token the one it allows where it allows one; walks that end are valid, and some
    pass a repeat that only some branches allow."""
    pieces = [b'{"', b'"', b'a', b'b', b'x', b'y', b'":', b'["', b'",', b'"]', b',"', b'}', b']', b'[', b'{',
              b'files', b'include', b'references', b'strict', b'path', b'true', b'1', b'"a"', b'"x"', b',',
              b':', b'"}', b'"}]', b'"]}']
    vocab = small_vocab(pieces)
    auto = compile_json_schema(schema, vocab)
    assert isinstance(auto, UnionAutomaton)
    hand = [compile_json_schema(b, vocab) for b in _branches_by_hand(schema)]
    rng, ended, narrowed, hits = random.Random(7), 0, 0, 0
    index = {b: t for t, b in enumerate(vocab.token_bytes)}
    for _ in range(60):
        m, alive, text = auto.matcher(), [h.matcher() for h in hand], b""
        for k in range(40):
            allowed = _allowed(m, vocab.num_words)
            assert allowed == set().union(*(_allowed(h, vocab.num_words) for h in alive))
            forced = m.forced_tokens(limit=1)  # (the one token allowed, where it is only one and no end)
            hits += bool(forced)
            assert forced == (sorted(allowed) if len(allowed) == 1 and not m.is_accepting() else [])
            t = index[start[k]] if k < len(start) else rng.choice(sorted(allowed))
            assert m.accept_token(t)
            before = len(alive)
            alive = [h for h in alive if h.accept_token(t)]
            narrowed += len(alive) < before and bool(vocab.token_bytes[t])
            if m.is_terminated():
                ended += 1
                assert valid(schema, json.loads(text)), text
                break
            text += vocab.token_bytes[t]
    assert ended and narrowed and hits


def test_matcher_contract(smol_tokenizer, smol_vocab):
    """accept_tokens refuses a text no branch takes and changes nothing; the branches
    alive are those (compiled from schemas written out by hand) that take the text so
    far, after rollback and in a copy too; forced bytes are those every live branch
    starts with, forced tokens the only ones allowed."""
    auto = compile_json_schema(TSCONFIG, smol_vocab)
    hand = [compile_json_schema(b, smol_vocab) for b in _branches_by_hand(TSCONFIG)]
    enc = lambda s: smol_tokenizer.encode(s, add_special_tokens=False)  # noqa: E731

    def alive(text: str) -> int:
        return sum(h.matcher().accept_tokens(enc(text)) for h in hand)
    m = auto.matcher()
    assert isinstance(m, UnionMatcher) and m.forced_bytes() == b"{"
    bad = '{"files":["a","a"],"include":["b","b"],"references":[{"path":"p"},{"path":"p"}]}'
    assert not m.accept_tokens(enc(bad)) and len(m.live) == 3 and alive(bad) == 0
    start = '{"files":["a","a"]'
    assert m.accept_tokens(enc(start)) and len(m.live) == alive(start) == 2
    c = m.copy()
    more = ',"include":["b","b"]'
    assert m.accept_tokens(enc(more)) and len(m.live) == alive(start + more) == 1
    assert not m.accept_tokens(enc(',"references":[{"path":"p"},{"path":"p"}]'))
    m.rollback(len(enc(more)))
    assert len(m.live) == 2 and m.accept_tokens(enc(',"include":["b"]}')) and m.is_accepting()
    assert len(m.live) == alive(start + ',"include":["b"]}')
    assert c.accept_tokens(enc('}')) and c.is_accepting() and len(c.live) == alive(start + "}") == 2
    d = auto.matcher()  # (an item of references: its one key in that branch, any key in the others)
    assert d.accept_tokens(enc('{"references":[{"')) and len(d.live) == alive('{"references":[{"') == 3
    assert d.forced_bytes() == b"" and d.forced_tokens() == []
    assert d.accept_tokens(enc('path":"q"}]}')) and d.accept_token(smol_vocab.eos_ids[0]) and d.is_terminated()
