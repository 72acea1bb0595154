"""JsonOptions prefix/suffix: literal text around the JSON value (a tool-call marker). Random
token walks end in prefix + JSON + suffix whose JSON jsonschema accepts, with no key twice
in an object; texts that break the schema, repeat a key or an item, or miss the markers
are refused; markers with JSON structure characters are refused."""
from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
from oracles import distinct_keys

from structgen import fsm
from structgen.fsm.json.schema import build_automaton

BEGIN, END = "<tool_call>\n", "\n</tool_call>"
SCHEMAS = {
    "free_keys": {"type": "object", "properties": {"name": {"const": "f"},
                                                    "arguments": {"type": "object",
                                                                  "additionalProperties": {"type": "integer"}}},
                  "required": ["name", "arguments"], "additionalProperties": False},
    "unique": {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b", "c", 1, 2]},
                                                         "uniqueItems": True}}, "required": ["tags"]},
    "split_union": {"anyOf": [{"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
                              {"type": "object", "properties": {"k": {"type": "boolean"}}, "required": ["k"]}]},
    "recursive_grammar": {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"},
                                                                          "next": {"$ref": "#/$defs/n"}}}},
                          "$ref": "#/$defs/n"},
}


def compiled(schema, vocab, name):
    opts = {"recursion": "grammar"} if name == "recursive_grammar" else {}
    return build_automaton(schema, vocab, prefix=BEGIN, suffix=END, **opts).require_output()


def accepts(auto, tokenizer, text: str) -> bool:
    m = auto.matcher()
    return m.accept_tokens(tokenizer.encode(text, add_special_tokens=False)) and m.is_accepting()


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_walks_end_in_markers_around_valid_json(smol_vocab, name):
    schema, vocab = SCHEMAS[name], smol_vocab
    auto = compiled(schema, vocab, name)
    rng, row, ended = np.random.default_rng(0), np.zeros(vocab.num_words, np.int32), 0
    # (per token, once: the walks below pick from tens of thousands of allowed tokens a step)
    is_eos = np.isin(np.arange(vocab.size), list(vocab.eos_ids))
    is_closer = np.array([(b or b"")[:1] in (b"}", b"]", b"\n", b"<") for b in vocab.token_bytes[:vocab.size]])
    for _ in range(8):
        m, out = auto.matcher(), []
        for _ in range(200):
            m.fill_next_token_bitmask(row)
            allowed = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[: vocab.size])
            eos = allowed[is_eos[allowed]]            # (in order, as the allowed tokens are)
            words = allowed[~is_eos[allowed]]
            if len(eos) and (not len(words) or rng.random() < 0.7):
                assert m.accept_token(int(eos[0]))
                break
            closers = words[is_closer[words]]
            t = int(rng.choice(closers if len(closers) and rng.random() < 0.5 else words))
            assert m.accept_token(t)
            out.append(t)
        if m.is_terminated():
            text = b"".join(vocab.token_bytes[t] for t in out).decode()
            assert text.startswith(BEGIN) and text.endswith(END)
            value = json.loads(text[len(BEGIN):-len(END)], object_pairs_hook=distinct_keys)
            jsonschema.validate(value, schema)
            ended += 1
    assert ended


def test_refuses_what_breaks_it(smol_tokenizer, smol_vocab):
    free = compiled(SCHEMAS["free_keys"], smol_vocab, "free_keys")
    assert accepts(free, smol_tokenizer, BEGIN + '{"name":"f","arguments":{"x":1,"y":2}}' + END)
    for bad in (BEGIN + '{"name":"f","arguments":{"x":1,"x":2}}' + END,    # a key twice
                BEGIN + '{"name":"g","arguments":{}}' + END,                 # not the schema
                '{"name":"f","arguments":{}}',                                # no markers
                BEGIN + '{"name":"f","arguments":{}}'):                       # no end marker
        assert not accepts(free, smol_tokenizer, bad), bad
    unique = compiled(SCHEMAS["unique"], smol_vocab, "unique")
    assert accepts(unique, smol_tokenizer, BEGIN + '{"tags":["a",1,"b"]}' + END)
    assert not accepts(unique, smol_tokenizer, BEGIN + '{"tags":["a",1,"a"]}' + END)


@pytest.mark.parametrize("marker", ['{"call":', "[", "a,b", "x:y", '"'])
def test_markers_with_json_structure_are_refused(marker, smol_vocab):
    with pytest.raises(fsm.SchemaError, match="prefix must be a string without"):
        fsm.compile_json_schema({"type": "integer"}, smol_vocab, prefix=marker)
