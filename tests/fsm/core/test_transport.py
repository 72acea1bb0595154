"""fsm/core/transport.py: a compiled constraint pickled and loaded back (as a compile
worker process ships it) gives the masks, steps, forced tokens and ends of the same
constraint compiled here, along random token walks that build most of its states after
the trip; JSON outputs that end are valid under jsonschema. Errors cross too."""
from __future__ import annotations

import json
import pickle
import types

import json_suite
import jsonschema
import numpy as np
import pytest
from oracles import token_classes

from structgen import fsm
from structgen.fsm.core import transport
from structgen.fsm.json.schema import build_automaton

SCHEMAS = {
    "formats": {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                                  "mail": {"type": "string", "format": "email"}},
                "required": ["when"]},
    "free_keys": {"type": "object", "properties": {"a": {"type": "integer"}},
                  "additionalProperties": {"type": "boolean"}},
    "unique": {"type": "array", "items": {"enum": ["x", "y", "z", 1, 2]}, "uniqueItems": True, "maxItems": 4},
    "split_union": {"anyOf": [{"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
                              {"type": "object", "properties": {"k": {"type": "string", "maxLength": 5}}}]},
    "multiple_of": {"type": "integer", "multipleOf": 7, "minimum": -50, "maximum": 5000},
    "recursive": {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"},
                                                                    "next": {"$ref": "#/$defs/n"}}}},
                  "$ref": "#/$defs/n"},
    "pattern_props": {"type": "object", "patternProperties": {"^x_[a-z]+$": {"type": "number"}},
                      "additionalProperties": False, "not": {"required": ["x_a"]}},
}
OTHERS = {
    "regex": lambda v: fsm.compile_regex(r"(?i)[a-z]{2,6}-\d{1,3}( [^\n]{0,12})?", v),
    "choice": lambda v: fsm.compile_choice(["red", "green", "greenish", "blue"], v),
    "grammar": lambda v: fsm.compile_grammar('start: "(" expr ")"\nexpr: NUM | expr "+" NUM\nNUM: /[0-9]{1,3}/\n',
                                             v),
    "recursive_grammar_path": lambda v: build_automaton(SCHEMAS["recursive"], v, recursion="grammar"),
}


def roundtrip(c, vocab):
    return transport.loads(transport.dumps(c), vocab)


def lockstep(a, b, vocab, seed, steps=80):
    """Walk matchers of a and b together, the same random tokens (closers preferred so that
    walks end); every mask, step, forced run and end must agree. The text if it ended."""
    rng = np.random.default_rng(seed)
    is_eos, is_closer = token_classes(vocab, (b"}", b"]", b'"', b")"))
    ma, mb = a.matcher(), b.matcher()
    ra, rb = np.zeros(vocab.num_words, np.int32), np.zeros(vocab.num_words, np.int32)
    out = []
    for _ in range(steps):
        mb.fill_next_token_bitmask(rb)     # (the copy first: it builds its own states)
        ma.fill_next_token_bitmask(ra)
        assert np.array_equal(ra, rb)
        assert ma.forced_tokens(8) == mb.forced_tokens(8)
        assert ma.is_accepting() == mb.is_accepting()
        allowed = np.flatnonzero(np.unpackbits(ra.view(np.uint8), bitorder="little")[: vocab.size])
        eos, words = allowed[is_eos[allowed]], allowed[~is_eos[allowed]]   # (in order)
        if len(eos) and (not len(words) or rng.random() < 0.3):
            assert ma.accept_token(int(eos[0])) and mb.accept_token(int(eos[0]))
            return b"".join(vocab.token_bytes[t] for t in out).decode()
        closers = words[is_closer[words]]
        t = int(rng.choice(closers if len(closers) and rng.random() < 0.4 else words))
        assert ma.accept_token(t) and mb.accept_token(t)
        out.append(t)
    return None


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_json_schema_roundtrip(smol_vocab, name):
    schema = SCHEMAS[name]
    original = build_automaton(schema, smol_vocab).require_output()
    copy = roundtrip(original, smol_vocab)
    assert type(copy) is type(original) and copy is not original
    ended = 0
    for seed in range(4):
        text = lockstep(original, copy, smol_vocab, seed)
        if text is not None:
            jsonschema.validate(json.loads(text), schema)
            ended += 1
    assert ended


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_kinds_roundtrip(smol_vocab, name):
    original = OTHERS[name](smol_vocab).require_output()
    copy = roundtrip(original, smol_vocab)
    for seed in range(3):
        lockstep(original, copy, smol_vocab, seed, steps=40)


@pytest.mark.skipif(not json_suite.SUITE.is_dir(), reason="test suite data not present (../shared/data)")
def test_json_schema_suite_sample(smol_vocab):
    """The schemas of a few files of the JSON Schema Test Suite (those that compile)."""
    names = ("anyOf", "oneOf", "not", "properties", "enum", "if-then-else")
    schemas = [g["schema"] for n in names for g in json.loads((json_suite.SUITE / f"{n}.json").read_text())]
    shipped = 0
    for k, schema in enumerate(schemas):
        try:
            original = build_automaton(schema, smol_vocab).require_output()
        except fsm.ConstraintError:
            continue
        lockstep(original, roundtrip(original, smol_vocab), smol_vocab, k, steps=20)
        shipped += 1
    assert shipped >= 40


def test_read_only_arrays_stay_read_only(smol_vocab):
    copy = roundtrip(fsm.compile_regex("[0-9]{3}", smol_vocab).require_output(), smol_vocab)
    mask = copy.matcher().next_token_mask()
    assert not mask.flags.writeable


def test_module_objects_stay_themselves(smol_vocab):
    """fsm's module-level objects (sentinels compared with `is`, process-wide tables) arrive
    as the receiver's own, not as copies."""
    from structgen.fsm.core.terms import LAZY_PROGRAMS
    from structgen.fsm.json import unique
    sent = types.SimpleNamespace(vocab=smol_vocab, other=unique._OTHER, programs=LAZY_PROGRAMS)
    back = transport.loads(transport.dumps(sent), smol_vocab)
    assert back.other is unique._OTHER and back.programs is LAZY_PROGRAMS and back.vocab is smol_vocab


def test_another_vocabulary_is_refused(smol_vocab, sp_vocab):
    data = transport.dumps(fsm.compile_regex("[0-9]+", smol_vocab))
    with pytest.raises(fsm.ConstraintError, match="another vocabulary"):
        transport.loads(data, sp_vocab)


def test_errors_cross_with_their_fields(smol_vocab):
    with pytest.raises(fsm.RegexError) as regex:
        fsm.compile_regex("ab[c-", smol_vocab)
    with pytest.raises(fsm.SchemaError) as schema:
        fsm.compile_json_schema({"type": "strnig"}, smol_vocab)
    for e in (regex.value, schema.value):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and vars(back) == vars(e)
