"""Oracles and helpers shared by the test files (and by benchmarks/: gpu_check.py,
grammar_bench.py, regex_bench.py, schema_fuzz.py). Pytest fixtures stay in the
conftest.py files; everything here is a plain import: `from oracles import ...`
(pyproject's `pythonpath = ["tests"]`; scripts insert tests/ into sys.path)."""
from __future__ import annotations

import importlib.util
import itertools
import json
import random
import threading
import time
from decimal import Decimal
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import strategies as st

from structgen import fsm
from structgen.fsm.json.schema import schema_to_term
from structgen.fsm.json.source import JsonTermSource
from structgen.fsm.json.unique_matcher import ends_new


# -- tokenizers and vocabularies -------------------------------------------------------
def mistral_data(name: str) -> Path:
    """A file of mistral-common's tokenizer data (SentencePiece and tekken vocabularies)."""
    spec = importlib.util.find_spec("mistral_common")
    assert spec is not None, "test extra missing: pip install --no-deps mistral-common"
    return Path(list(spec.submodule_search_locations)[0]) / "data" / name


def tekken_encoding(path) -> tuple:
    """(tiktoken's own BPE over the tekken ranks: an independent oracle, its ids the ranks;
    the number of special tokens before them in our vocabulary)."""
    import base64

    import tiktoken
    data = json.loads(Path(path).read_text())
    cfg = data["config"]
    n = cfg["default_vocab_size"] - cfg["default_num_special_tokens"]
    ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in data["vocab"][:n]}
    return tiktoken.Encoding("tekken", pat_str=cfg["pattern"], mergeable_ranks=ranks,
                             special_tokens={}), cfg["default_num_special_tokens"]


def small_vocab(tokens, eos=True) -> fsm.Vocabulary:
    """A toy vocabulary: the given byte strings, then an EOS token (no bytes)."""
    toks = tuple(tokens) + ((None,) if eos else ())
    return fsm.Vocabulary(toks, (len(toks) - 1,) if eos else (), len(toks) + 5)  # padded width


def live_tokens_brute_force(a, s) -> set:
    """Token ids whose bytes keep state s of automaton a's DFA alive, one token at a time
    (the oracle masks are compared with)."""
    return {i for i, b in enumerate(a.vocab.token_bytes) if b and a.dfa.walk(s, b) != 0}


# -- JSON: validators, and a compiled schema's acceptance -----------------------------------
def distinct_keys(pairs: list) -> dict:
    """json.loads' object_pairs_hook that asserts no key comes twice in one object."""
    assert len({k for k, _ in pairs}) == len(pairs), pairs
    return dict(pairs)


def exact_validator(schema):
    """jsonschema's validator of schema (its numbers read as Decimal too) for instances
    read with Decimal numbers (`json.loads(text, parse_float=Decimal)`), as exact as the
    automaton: an integer is a number without a fraction part (jsonschema's own check
    takes only int and float), multipleOf and bounds without rounding."""
    import jsonschema

    def is_integer(checker, inst):
        if isinstance(inst, Decimal):
            return inst.is_finite() and inst == inst.to_integral_value()
        return jsonschema.Draft202012Validator.TYPE_CHECKER.is_type(inst, "integer")
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", is_integer)
    cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)
    return cls(json.loads(json.dumps(schema), parse_float=Decimal))


def compiled(schema, **opts):
    cs = schema_to_term(schema, **opts)
    dfa = cs.dfa()
    return lambda text: cs.accepts(text, dfa), cs


def valid(schema, inst) -> bool:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).is_valid(inst)


def valid_no_formats(schema, inst) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(inst)


def validator(schema):
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


# -- JSON: random walks, and instances against jsonschema -------------------------------------
def random_walks(cs, n=150, max_len=300, seed=0):
    """Random byte walks that stop in accepting states; yields the texts."""
    src = JsonTermSource(cs.tb)
    dfa = cs.dfa()
    rng = random.Random(seed)
    out = []
    plan = cs.unique  # (uniqueItems checked beside the automaton: bytes closing a repeat are out)
    for _ in range(n):
        s, data = dfa.start, bytearray()
        track = plan and plan.start
        while len(data) < max_len:
            if dfa.accepting[s] and rng.random() < 0.3:
                out.append(bytes(data))
                break
            live = dfa.live_bytes(s)
            if plan:  # (and none after which an item can only end as an earlier one: UniqueMatcher's rule)
                live = [b for b in live if (t := plan.feed(track, bytes([b]))) is not None
                        and (plan.item_prefix(t) is None or ends_new(dfa, plan, dfa.step(s, b), t))]
            if not live:
                out.append(bytes(data))  # only possible in an accepting state
                break
            if rng.random() < 0.5:
                b = rng.choice(live)
            elif cs.rules is None:  # towards the shortest completion
                b = min(live, key=lambda b: src.minlen(dfa.keys[dfa.step(s, b)]))
            else:  # grammar states: prefer closing brackets and short values
                closers = [b for b in live if b in b"]}0"]
                b = rng.choice(closers or live)
            data.append(b)
            s = dfa.step(s, b)
            track = plan and plan.feed(track, bytes([b]))
    return out, dfa


_TOKEN_CLASSES: dict = {}


def token_classes(vocab, leads: tuple) -> tuple:
    """(Whether each token id below vocab.size is an EOS, whether its bytes begin with one of
    `leads`): boolean arrays for random walks that pick from tens of thousands of allowed
    tokens a step (`allowed[is_eos[allowed]]`: those tokens, in order). Kept per vocabulary."""
    import numpy as np
    key = (id(vocab), leads)
    hit = _TOKEN_CLASSES.get(key)
    if hit is None or hit[0] is not vocab:   # (the vocabulary is held: its id is not reused)
        data = vocab.token_bytes[:vocab.size]
        is_eos = np.isin(np.arange(vocab.size), list(vocab.eos_ids))
        is_lead = np.array([(b or b"")[:1] in leads for b in data], dtype=bool)
        hit = _TOKEN_CLASSES[key] = (vocab, is_eos, is_lead)
    return hit[1], hit[2]


@pytest.mark.slow
def token_walks(auto, vocab, check, seed, n=12, steps=400, closing=(b"}", b'"'), p_close=0.5,
                 p_eos=0.7) -> int:
    """n random walks over auto's token masks: EOS with p_eos where allowed, else with
    p_close a token led by a byte of `closing` where there is one, else any allowed
    token. No mask is empty, each chosen token is accepted, and check(text) holds for
    every walk that ends, which holds no key twice in one object; returns how many ended."""
    import numpy as np
    rng, row, data, done = np.random.default_rng(seed), np.zeros(vocab.num_words, dtype=np.int32), vocab.token_bytes, 0
    is_eos, is_closer = token_classes(vocab, tuple(closing))
    for _ in range(n):
        m, out = auto.matcher(), []
        for _ in range(steps):
            m.fill_next_token_bitmask(row)
            allowed = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[: vocab.size])
            assert len(allowed)
            eos = allowed[is_eos[allowed]]
            if len(eos) and rng.random() < p_eos:
                assert m.accept_token(int(eos[0]))
                break
            closers = allowed[is_closer[allowed]]
            t = int(rng.choice(closers if len(closers) and rng.random() < p_close else allowed))
            assert m.accept_token(t)
            if t in vocab.eos_ids:
                break
            out.append(t)
        if m.is_terminated():
            text = b"".join(data[t] for t in out).decode("utf-8")
            assert check(text)
            json.loads(text, object_pairs_hook=distinct_keys)
            done += 1
    return done


def stepped_along(dfa, text: bytes) -> int:
    """The state after `text`, every byte's successor of each state along it made first
    (the states a mask's walk meets: their emptiness checks run)."""
    s = dfa.start
    for b in text:
        for c in range(256):
            dfa.step(s, c)
        s = dfa.step(s, b)
    return s


def recursive_with_oracle(schema, seed: int):
    """schema compiled (recursive, exact), its DFA, jsonschema's validator of
    it and a seeded random generator, for tests that check random instances."""
    cs = schema_to_term(schema)
    assert cs.recursion is not None
    return cs, cs.dfa(), jsonschema.Draft202012Validator(schema), random.Random(seed)


def agrees_on(pool, cs, dfa, check, least: int) -> None:
    """Each instance of pool's canonical text is accepted exactly when jsonschema's
    `check` validates it; at least `least` valid and `least` invalid among them."""
    seen = {True: 0, False: 0}
    for inst in pool:
        ok = check.is_valid(inst)
        seen[ok] += 1
        assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert min(seen.values()) >= least, seen


def exact_recursive(schema, **options):
    """schema compiled strict as a recursive schema, with nothing relaxed."""
    cs = schema_to_term(schema, **options)
    assert cs.recursion is not None and not cs.relaxed
    return cs


def instances_agree(cs, schema, node, n, least):
    """n instances node(0): the canonical text is accepted iff jsonschema says valid;
    at least `least` of each."""
    dfa, v = cs.dfa(), validator(schema)
    seen = {True: 0, False: 0}
    for _ in range(n):
        inst = node(0)
        ok = v.is_valid(inst)
        seen[ok] += 1
        assert cs.accepts(cs.canonical(inst), dfa) == ok, inst
    assert min(seen.values()) >= least, seen


def walks_validate(cs, schema, seed=0):
    texts, dfa = random_walks(cs, n=80, seed=seed)
    assert len(texts) > 40  # most walks end
    v = validator(schema)
    for t in texts:
        assert v.is_valid(json.loads(t)), (schema, t)
    return texts


# -- uniqueItems schemas (fsm/json/test_unique_items.py, test_unique_masks.py) --------------------
STRINGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
TAGGED = {"type": "object", "properties": {
    "tags": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string", "minLength": 1},
                                            "uniqueItems": True, "maxItems": 5}, {"type": "null"}]},
    "n": {"type": "integer"}, "free": {"type": "array", "items": {"type": "string"}}},
    "required": ["tags"]}
# a oneOf of object variants that both keep `labels` unique; keys by pattern
VARIANTS = {"oneOf": [
    {"type": "object", "properties": {"kind": {"const": "a"}, "labels": {"$ref": "#/$defs/set"}},
     "required": ["kind"], "additionalProperties": False},
    {"type": "object", "properties": {"kind": {"const": "b"}, "labels": {"$ref": "#/$defs/set"}},
     "required": ["kind"], "patternProperties": {"^x-": {"$ref": "#/$defs/set"}}, "additionalProperties": {
         "type": "array", "items": {"type": "string"}}}],
    "$defs": {"set": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}
TREE = {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["tags"]}}}
SHORT_TREE = json.loads(json.dumps(TREE).replace('"items": {"type": "string"}', '"items": {"type": "string", "maxLength": 2}'))
OPEN_THEN_SHORT = {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "string", "maxLength": 2},
                   "uniqueItems": True}
TUPLE = {"type": "array", "prefixItems": [{"type": "integer"}, STRINGS], "items": STRINGS}
# bounded strings: the tracker also drops the tokens after which the item can only end
# as an earlier one
SHORT = {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True}
NAMES = {"type": "object", "properties": {"who": {"oneOf": [
    {"$ref": "#/$defs/name"}, {"type": "array", "items": {"$ref": "#/$defs/name"}, "uniqueItems": True}]},
    "when": {"type": "array", "items": {"type": "string", "format": "date"}, "uniqueItems": True}}, "$defs": {
    "name": {"type": "string", "maxLength": 39, "pattern": "^[a-zA-Z0-9](-?[a-zA-Z0-9])*$"}}}


INTS = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
NUMS = {"type": "array", "items": {"type": "number"}, "uniqueItems": True}
# winget's success codes: integers but for a few that a `not` lists
INTS_BUT = {"type": "array", "items": {"type": "integer", "not": {"enum": [0, 1, 10]}}, "uniqueItems": True}
# a lower bound of 0 or more leaves them endless (set[conint(ge=0)], PositiveInt)
NATURALS = {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True}
POSITIVE = {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0.5}, "uniqueItems": True}
# compose-spec's `expose`: strings and numbers, kept apart ("1" is not 1)
PORTS = {"type": "object", "properties": {"expose": {"type": "array", "items": {"type": ["string", "integer"]},
                                                     "uniqueItems": True}, "n": {"type": "number"}}}
NUM_TREE = json.loads(json.dumps(TREE).replace('"items": {"type": "string"}', '"items": {"type": "integer"}'))
TUPLE_NUMS = {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "uniqueItems": True}
# gitlab-ci's hidden jobs: `anyOf: [job, {}]` always holds, so its unique exit codes do
# not bind there (they do under other keys); an anyOf with a `true` branch
JOB = {"type": "object", "properties": {"exit_codes": INTS, "tags": STRINGS}}
HIDDEN = {"type": "object", "patternProperties": {"^[.]": {"anyOf": [JOB, {"title": "anything"}]}},
          "additionalProperties": JOB, "properties": {"v": {"anyOf": [True, STRINGS]}}}
# JSON-stat's links: keys are 77 link relation names, one pattern, whose DFA passes 256
# states (the tracker's table of it was capped there: the unique notes below were
# read as maybe applying, and refused); here 80 names of 8 random characters
_rng = random.Random(5)
RELATIONS = ["edit-form", "self"] + ["".join(_rng.choice("abcdefghijklmnopqrstuvwxyz-") for _ in range(8))
                                     for _ in range(78)]
LINKS = {"type": "object", "properties": {"note": STRINGS, "link": {"type": "object", "patternProperties": {
    "^(" + "|".join(RELATIONS) + ")$": {"type": "array", "items": {"type": "object", "properties": {
        "href": {"type": "string"}, "note": STRINGS}}}}}}}
BOUNDED_CODES = {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True}  # (refused)
# localazy's upload files: an untyped `{items: ...}` branch takes every object, so the
# unique features of an upload object bind nothing at `files` (they do inside its list)
UPLOAD = {"type": "object", "properties": {"features": STRINGS}}
FILES = {"type": "object", "properties": {"files": {"type": ["string", "array", "object"], "anyOf": [
    {"type": "string"}, UPLOAD, {"items": {"anyOf": [{"type": "string"}, UPLOAD]}}]}}}
# listed strings (an enum): once every value came, the comma that would begin another
# item is refused too
LETTERS = ["a", "ab", "b", "ba", "c"]
LISTED = {"type": "array", "items": {"enum": LETTERS}, "uniqueItems": True, "minItems": 1}
# and strings of fewer than 65536 values, counted (citation's languages: ^[a-z]{2,3}$)
PAIRED = ["a", "b", "aa", "ab", "ba", "bb"]
COUNTED = {"type": "array", "items": {"type": "string", "pattern": "^[ab]{1,2}$"}, "uniqueItems": True}
# travis' osx_image: a value or a unique array of them, through a $ref (20 values: more
# than the compiler's own finite sets take)
XCODES = [f"xcode{i}" for i in range(20)]
# gitlab-ci's stages: strings or lists of strings (a list repeats by its values)
STAGES = {"type": "object", "properties": {"stages": {"type": "array", "items": {"anyOf": [
    {"type": "string"}, {"type": "array", "items": {"type": "string"}}]}, "uniqueItems": True, "minItems": 1}}}
# compose's ports: numbers, strings, or objects that take `x-` keys with any value
SPEC = {"type": "object", "properties": {"ports": {"type": "array", "items": {"oneOf": [
    {"type": "number"}, {"type": "string"}, {"type": "object", "properties": {
        "name": {"type": "string"}, "target": {"type": ["integer", "string"]}, "bind": {"type": "object", "properties": {
            "create": {"type": "boolean"}}, "additionalProperties": False}},
        "additionalProperties": False, "patternProperties": {"^x-": {}}}]}, "uniqueItems": True}}}
# closed objects (travis' {"secure": ...}, citation's authors): the tracker also drops the
# tokens after which the item can only end as an earlier one
SECURE = {"type": "object", "properties": {"env": {"type": "array", "uniqueItems": True, "items": {"oneOf": [
    {"type": "string"}, {"type": "object", "properties": {"secure": {"type": "string"}},
                         "additionalProperties": False}]}}}}
PAIRS = {"type": "array", "uniqueItems": True, "items": {"type": "object", "additionalProperties": False,
         "required": ["s", "n"], "properties": {"s": {"type": "string", "maxLength": 1},
                                                "n": {"type": "integer", "minimum": 0, "maximum": 2}}}}
AUTHORS = {"type": "array", "uniqueItems": True, "minItems": 1, "items": {"anyOf": [
    {"type": "object", "additionalProperties": False, "properties": {
        "family": {"type": "string", "minLength": 1}, "given": {"type": "string"},
        "email": {"type": "string", "format": "email"}, "age": {"type": "number", "minimum": 0},
        "alias": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "additionalProperties": False, "required": ["name"], "properties": {
        "name": {"type": "string"}, "email": {"type": "string", "format": "email"}, "tags": {
            "type": "array", "items": {"type": "object", "properties": {"k": {"type": "boolean"}},
                                       "additionalProperties": False}}}}]}}
# github-issue-forms: items whose `type` decides, through if/then, whether their options
# are unique (dropdown, checks) or not (textarea); `tag` before `type` in the key order
FORM_ITEM = {"type": "object", "properties": {"tag": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                                              "type": {"enum": ["dropdown", "textarea", "checks"]},
                                              "id": {"type": "string"}}, "allOf": [
    {"if": {"properties": {"type": {"const": "dropdown"}}}, "then": {"properties": {
        "tag": True, "type": True, "id": True, "options": {"type": "array", "items": {"type": "string"},
                                                          "uniqueItems": True}}, "additionalProperties": False}},
    {"if": {"properties": {"type": {"const": "textarea"}}}, "then": {"properties": {
        "tag": True, "type": True, "id": True, "options": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": False}},
    {"if": {"properties": {"type": {"const": "checks"}}, "required": ["type"]}, "then": {"properties": {
        "options": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}},
     "else": {"properties": {"id": {"maxLength": 5}}}}]}
FORMS = {"type": "array", "items": FORM_ITEM | {"required": ["type"]}}
LOOSE_FORMS = {"type": "array", "items": FORM_ITEM}  # (type may be absent: dropdown's `then` holds)
# compose's volumes: open objects as items, with a unique list of labels below
VOLUMES = {"type": "object", "properties": {"volumes": {"type": "array", "uniqueItems": True, "items": {"oneOf": [
    {"type": "string"}, {"type": "object", "required": ["type"], "additionalProperties": False,
                         "patternProperties": {"^x-": {}}, "properties": {
        "type": {"enum": ["bind", "volume"]}, "volume": {"type": "object", "additionalProperties": False,
                                                      "properties": {"labels": {"oneOf": [
                                                          {"type": "object", "additionalProperties": {"type": "string"}},
                                                          {"type": "array", "items": {"type": "string"},
                                                           "uniqueItems": True}]}}}}}]}}}}
# closed objects that hold a unique array (travis' notifications, citation's references):
# read with their frames, walked on both levels; `t` of two listed values, so an item
# {"n":"x","t":["a"... may only go on as `]` once {"n":"x","t":["a","b"]} came
CAPS = {"type": "array", "uniqueItems": True, "items": {"type": "object", "additionalProperties": False, "properties": {
    "n": {"type": "string", "maxLength": 1}, "t": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}}}}
# travis' shape: a notification object (reached by a pointer through a key that is no
# keyword) or a unique array of them, whose rooms are a unique array of patterned strings
# or closed {"secure": ...} objects
NOTIFY = {"definitions": {"room": {"oneOf": [{"type": "string", "pattern": ".+:.+"}, {
    "type": "object", "additionalProperties": False, "properties": {"secure": {"type": "string", "minLength": 1}}}]},
    "notification": {"slack": {"type": "object", "additionalProperties": False, "properties": {
        "enabled": {"type": "boolean"}, "rooms": {"type": "array", "uniqueItems": True, "minItems": 1,
                                                  "items": {"$ref": "#/definitions/room"}},
        "on": {"enum": ["always", "never"]}}}}},
    "type": "object", "properties": {"slack": {"oneOf": [{"$ref": "#/definitions/notification/slack"}, {
        "type": "array", "uniqueItems": True, "minItems": 1, "items": {"$ref": "#/definitions/notification/slack"}}]}}}
# any values (the test suite's uniqueItems): literals by their first byte, lists and
# objects whole, as values; two booleans first, then anything; literals beside strings
ANY = {"uniqueItems": True}
FLAGS_FIRST = {"prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "uniqueItems": True}
MIXED = {"type": "array", "items": {"type": ["boolean", "string", "null"]}, "uniqueItems": True}
# stylelint's rule pairs: a literal narrowed (an enum of one) beside open objects
NARROWED_LITERALS = {"type": "array", "maxItems": 3, "uniqueItems": True, "items": {
    "type": ["boolean", "object"], "anyOf": [{"type": "boolean", "enum": [True, {}]},
                                             {"type": "object", "properties": {"m": {"type": "string"}}}]}}
OPEN_ITEMS = {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}},
              "uniqueItems": True}
XCODE = {"type": "object", "properties": {"osx": {"oneOf": [{"$ref": "#/$defs/v"}, {
    "type": "array", "items": {"$ref": "#/$defs/v"}, "uniqueItems": True, "minItems": 1}]}},
    "$defs": {"v": {"enum": XCODES}}}


# -- random regexes (hypothesis) and byte walks --------------------------------------------
REGEX_ALPHABET = "ab0-. é中😀\n_"
REGEX_ATOMS = ["a", "b", "0", "é", "中", "😀", r"\.", "-", " ", ".", r"\d", r"\w", r"\s", r"\D", r"\W",
               r"\S", "[ab]", "[^a]", "[a-z]", "[0-9é]", "[^ab0]", "[é-😀]", r"[\d.]", r"\n", r"[\s\S]"]


def patterns():
    atom = st.sampled_from(REGEX_ATOMS)

    def extend(inner):
        return st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}|{t[1]}"),
            inner.map(lambda p: f"({p})"),
            inner.map(lambda p: f"(?:{p})"),
            inner.map(lambda p: f"(?P<g>{p})"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}",
                                              "*?", "+?", "??", "{1,2}?"]))
              .map(lambda t: f"(?:{t[0]}){t[1]}"),
        )
    return st.recursive(atom, extend, max_leaves=8).map(_number_groups)


def _number_groups(pattern: str) -> str:
    """Give each named group its own name (re rejects duplicates)."""
    parts = pattern.split("(?P<g>")
    return parts[0] + "".join(f"(?P<g{i}>{p}" for i, p in enumerate(parts[1:]))


def dfa_fullmatch(dfa, text: str) -> bool:
    s = dfa.walk(dfa.start, text.encode())
    return bool(dfa.accepting[s])


def strings_near(pattern: str, rng) -> list[str]:
    out = ["".join(rng.choice(list(REGEX_ALPHABET), size=int(rng.integers(0, 7)))) for _ in range(40)]
    for n in range(0, 3):  # every short string over a small alphabet
        out += ["".join(p) for p in itertools.product("a0é.\n", repeat=n)]
    return out


# -- the grammars (also used by benchmarks/grammar_bench.py) ---------------------------
ARITH_GRAMMAR = r"""
?start: sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: atom | product "*" atom -> mul | product "/" atom -> div
?atom: NUMBER -> number | "-" atom -> neg | "(" sum ")"
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""

JSON_GRAMMAR = r"""
?start: value
?value: object | array | string | SIGNED_NUMBER -> number
      | "true" -> true | "false" -> false | "null" -> null
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

SQL_GRAMMAR = r"""
start: select_stmt [";"]
select_stmt: SELECT [DISTINCT] select_list FROM table_ref join* [where] [group] [order] [limit]
select_list: "*" | item ("," item)*
item: expr [[AS] NAME]
table_ref: NAME [[AS] NAME]
join: JOIN table_ref ON cond
where: WHERE cond
group: GROUP BY column ("," column)*
order: ORDER BY order_item ("," order_item)*
order_item: column [ASC | DESC]
limit: LIMIT INT
?cond: cond OR conj | conj
?conj: conj AND neg | neg
?neg: NOT neg | comparison | "(" cond ")"
comparison: expr CMP expr | expr IS [NOT] NULL
?expr: column | INT | STRING | FUNC "(" (expr | "*") ")"
column: NAME ["." NAME]
CMP: "=" | "<>" | "!=" | "<" | ">" | "<=" | ">="
FUNC: "count"i | "sum"i | "avg"i | "min"i | "max"i
SELECT: "select"i
DISTINCT: "distinct"i
FROM: "from"i
AS: "as"i
JOIN: "join"i
ON: "on"i
WHERE: "where"i
GROUP: "group"i
ORDER: "order"i
BY: "by"i
ASC: "asc"i
DESC: "desc"i
LIMIT: "limit"i
AND: "and"i
OR: "or"i
NOT: "not"i
IS: "is"i
NULL: "null"i
NAME: /[a-z_][a-z0-9_]*/i
STRING: /'[^']*'/
%import common.INT
%import common.WS
%ignore WS
"""

TOY_GRAMMAR = r"""
start: stmt*
?stmt: assign | if_stmt | while_stmt | block | print_stmt
assign: NAME "=" expr ";"
print_stmt: "print" "(" expr ")" ";"
if_stmt: "if" "(" expr ")" block ["else" block]
while_stmt: "while" "(" expr ")" block
block: "{" stmt* "}"
?expr: expr CMP sum | sum
?sum: sum ADD term | term
?term: term MUL atom | atom
?atom: NUMBER | NAME | STRING | "(" expr ")" | NAME "(" [expr ("," expr)*] ")"
CMP: "==" | "!=" | "<" | ">" | "<=" | ">="
ADD: "+" | "-"
MUL: "*" | "/" | "%"
NAME: /[a-zA-Z_][a-zA-Z0-9_]*/
STRING: /"[^"\n]*"/
COMMENT: "//" /[^\n]*/ | "/*" /(.|\n)*?/ "*/"
%import common.NUMBER
%import common.WS
%ignore WS
%ignore COMMENT
"""

GRAMMARS = {"arith": ARITH_GRAMMAR, "json": JSON_GRAMMAR, "sql": SQL_GRAMMAR, "toy": TOY_GRAMMAR}


LALR_EXTRA = {
    "nullable": 'start: a b c [";"]\na: "x" |\nb: b "y" |\nc: "z" a c |\n',
    "cycles": 'start: a\na: "x" b | "y" | c\nb: "z" a | "w"\nc: "q" c | "r" a |\n',
}


# -- the engine: prompts, transformers' greedy continuations, a fake constraint ----------------
# Prompts of quite different lengths; the last two share a long prefix (prefix caching).
LONG = ("You are a careful assistant. Answer briefly and precisely, in plain English, "
        "without lists. The user will ask about geography, arithmetic and poetry; keep "
        "every answer under twenty words and never invent facts you are unsure of. ")
PROMPTS = [
    "The capital of France is",
    "1, 2, 3, 4,",
    "Write a haiku about the sea.\n",
    LONG + "Question: what is the largest ocean?\nAnswer: The largest ocean is",
    LONG + "Question: what is seven times six?\nAnswer: Seven times six is",
]


def hf_greedy(hf_model, tokenizer, prompts, max_new_tokens, **gen_kw):
    """transformers' greedy continuation of each prompt, one at a time (no padding), on
    the model's device."""
    outs = []
    for p in prompts:
        ids = tokenizer(p, return_tensors="pt").input_ids.to(hf_model.device)
        with torch.inference_mode():
            g = hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                  do_sample=False, pad_token_id=tokenizer.eos_token_id, **gen_kw)
        outs.append(g[0, ids.shape[1]:].tolist())
    return outs


class FakeConstraint:
    """Allows any of `allowed` for `length` tokens, then only EOS. Optionally forces
    a fixed token sequence first (to exercise jump-forward)."""

    def __init__(self, allowed, length, eos, vocab_size, forced=()):
        self.allowed, self.length, self.eos, self.vocab_size = list(allowed), length, eos, vocab_size
        self.forced = list(forced)

    def matcher(self):
        return FakeMatcher(self)


class FakeMatcher:
    def __init__(self, c: FakeConstraint):
        self.c = c
        self.accepted: list[int] = []
        self.terminated = False

    def _allowed(self):
        n = len(self.accepted)
        if n < len(self.c.forced):
            return [self.c.forced[n]]
        if n < len(self.c.forced) + self.c.length:
            return self.c.allowed
        return [self.c.eos]

    def accept_token(self, t):
        if self.terminated or t not in self._allowed():
            return False
        if t == self.c.eos:
            self.terminated = True
        self.accepted.append(t)
        return True

    def fill_next_token_bitmask(self, row):
        row = np.asarray(row)
        row[:] = 0
        for t in self._allowed():
            row[t // 32] |= np.int32(np.uint32(1 << (t % 32)).view(np.int32))

    def is_terminated(self):
        return self.terminated

    def rollback(self, n):
        for _ in range(n):
            self.accepted.pop()
        self.terminated = False

    def forced_tokens(self):
        n = len(self.accepted)
        return self.c.forced[n:] if n < len(self.c.forced) else []


# -- paged attention: a batch over a scattered cache (tests/kernels, gpu_check.py) ----------------
def paged_batch(decodes, prefills, block_size, heads, kv_heads, head_dim, dtype=torch.float32, seed=0,
                device="cpu"):
    """decodes: kv_len of each decode; prefills: (kv_len, q_len) of each chunk after them.
    Blocks are scattered at random, the block table has spare zero columns, and every
    slot left unwritten is NaN. Returns query, k_cache, v_cache, meta."""
    from structgen.kernels import AttentionMetadata
    from structgen.kernels.reference import store_kv_cache
    gen = torch.Generator().manual_seed(seed)
    shapes = [(n, 1) for n in decodes] + list(prefills)
    need = [-(-kv_len // block_size) for kv_len, _ in shapes]
    num_blocks = sum(need) + 3
    k_cache = torch.full((num_blocks, block_size, kv_heads, head_dim), float("nan"), dtype=dtype)
    v_cache = torch.full_like(k_cache, float("nan"))
    free = torch.randperm(num_blocks, generator=gen).tolist()
    tables = []
    for (kv_len, _), n in zip(shapes, need):
        table = [free.pop() for _ in range(n)]
        slots = torch.tensor([table[p // block_size] * block_size + p % block_size for p in range(kv_len)])
        k, v = (torch.randn(kv_len, kv_heads, head_dim, generator=gen).to(dtype) for _ in range(2))
        store_kv_cache(k, v, k_cache, v_cache, slots)
        tables.append(table)
    width = max(need) + 2
    q_lens = [q for _, q in shapes]
    seq_lens = [kv for kv, _ in shapes]
    to = dict(device=device)
    meta = AttentionMetadata(
        slot_mapping=torch.full((sum(q_lens),), -1, dtype=torch.int64, **to),
        block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32, **to),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, **to),
        query_start_loc=torch.tensor([0] + q_lens, dtype=torch.int32).cumsum(0).int().to(device),
        num_decodes=len(decodes), seq_lens_host=seq_lens, query_lens_host=q_lens, block_size=block_size)
    query = torch.randn(sum(q_lens), heads, head_dim, generator=gen).to(dtype)
    return query.to(device), k_cache.to(device), v_cache.to(device), meta


def cached_kv(cache, meta, s):
    """Sequence s's keys (or values) [kv_len, kv_heads, head_dim], read back from the cache."""
    bs, n = meta.block_size, meta.seq_lens_host[s]
    slots = [meta.block_tables[s, p // bs].item() * bs + p % bs for p in range(n)]
    return cache.view(-1, *cache.shape[2:])[slots]


def in_threads(work, n: int, timeout: float = 120) -> list:
    """Run work(0) .. work(n - 1) in n threads at once; the exceptions they raised."""
    errors = []

    def run(i):
        try:
            work(i)
        except Exception as e:  # noqa: BLE001 - returned to the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return errors


class ExclusiveUse:
    """A tokenizer proxy that records every time two threads are inside it at once (a fast
    tokenizer must not be used so). Each call first sleeps `hold_s` (releasing the GIL),
    so that a thread that shares it does get in meanwhile. Its deep copy is a plain copy
    of the tokenizer."""

    def __init__(self, inner, hold_s: float = 0.002):
        self._inner, self._lock, self._inside, self.hold_s = inner, threading.Lock(), {}, hold_s
        self.calls, self.overlaps = 0, []

    def _enter(self, name):
        me = threading.current_thread().name
        with self._lock:
            others = [t for t, n in self._inside.items() if n and t != me]
            if others:
                self.overlaps.append((name, me, others))
            self._inside[me] = self._inside.get(me, 0) + 1
            self.calls += 1
        time.sleep(self.hold_s)
        return me

    def _exit(self, me):
        with self._lock:
            self._inside[me] -= 1

    def _wrapped(self, name, fn):
        def call(*args, **kwargs):
            me = self._enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit(me)
        return call

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        return self._wrapped(name, value) if callable(value) else value

    def __call__(self, *args, **kwargs):
        return self._wrapped("__call__", self._inner)(*args, **kwargs)

    def __len__(self):
        return len(self._inner)

    def __deepcopy__(self, memo):
        import copy
        return copy.deepcopy(self._inner, memo)
