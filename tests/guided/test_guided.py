"""guided on the real embedded model: outputs always fullmatch, truncation is reported."""
from __future__ import annotations

import re

import pytest
import torch

from structgen import fsm, guided

PATTERNS = [r"[0-9]{4}-[0-9]{2}-[0-9]{2}", r"(中文|日本語|😀{1,3})( [a-z]{1,6})?", r"[A-Z][a-z]+ (is|was) [a-z ]{1,20}\."]


@pytest.fixture(scope="module")
def hf_model():
    return guided.load(backend="transformers")


@pytest.fixture(scope="module")
def engine_model():
    return guided.load(backend="engine")


def test_regex_on_engine_fullmatches(engine_model):
    gen = guided.regex(engine_model, PATTERNS[0])
    out = gen(["When did Apollo 11 land? Give the date.", "Today's date, please."], max_tokens=20)
    assert all(re.fullmatch(PATTERNS[0], o) for o in out)


def test_choice_on_engine(engine_model):
    ans = guided.choice(engine_model, ["yes", "no", "unsure"])("Is Paris the capital of France?")
    assert ans in ("yes", "no", "unsure")


def test_truncation_is_reported(engine_model):
    gen = guided.regex(engine_model, r"[a-z]{30,40}")
    with pytest.raises(guided.IncompleteOutputError) as err:
        gen("Write letters.", max_tokens=3)
    (o,) = err.value.outputs
    assert not o.complete and o.finish_reason == "length" and o.value is None
    assert re.fullmatch(r"[a-z]*", o.text) and len(o.token_ids) == 3


def test_constraint_without_outputs_is_refused(engine_model):
    """A schema whose keywords contradict each other compiles to an empty language: the
    generator refuses it at once, rather than running the model into a step where no
    token is allowed."""
    for schema in ({"allOf": [{"type": "string"}, {"type": "integer"}]}, False,
                   {"type": "integer", "minimum": 5, "maximum": 3}):
        with pytest.raises(fsm.ConstraintError, match="accepts no output"):
            guided.json(engine_model, schema)
    guided.json(engine_model, {"type": "integer", "minimum": 3, "maximum": 3})  # one value: fine


# One grammar by default (20-45 s each on CI's CPU); the masks of all four are checked against
# brute force in tests/fsm/grammar, so the other three end-to-end runs are slow-only.
@pytest.mark.parametrize("name,prompt", [
    ("arith", "Write an arithmetic expression with parentheses that equals 12."),
    pytest.param("json", "Describe a cat as a JSON object with its name, age and colours.", marks=pytest.mark.slow),
    pytest.param("sql", "Table users(id, name, age). Write a SQL query for the names of users over 30.",
                 marks=pytest.mark.slow),
    pytest.param("toy", "Copy this program exactly: x = 1; print(x);", marks=pytest.mark.slow),
])
def test_grammar_on_engine_outputs_parse_with_lark(engine_model, name, prompt):
    """Every complete output of the real model under a grammar is a sentence for lark's
    Earley parser (the oracle of tests/test_grammar.py): greedy, and sampled with five
    seeds, so that the outputs differ. An output cut short is only a prefix, which the
    brute-force mask tests check."""
    from lark import Lark
    from oracles import GRAMMARS
    earley = Lark(GRAMMARS[name], parser="earley", lexer="dynamic_complete")
    gen = guided.grammar(engine_model, GRAMMARS[name])
    outs = gen.generate([prompt], max_tokens=48)
    for seed in (1, 2, 3, 4, 5):
        outs += gen.generate([prompt], max_tokens=48, temperature=0.8, seed=seed)
    done = [o for o in outs if o.complete]
    assert done, [o.text for o in outs]  # (else nothing below is checked)
    for o in done:
        earley.parse(o.text)  # raises where it is not a sentence


# (CI time: left padding is the same whatever the pattern; the other two are slow-only: the
# CJK/emoji one is sampled on transformers below, the sentence one is test_guided_stream's)
@pytest.mark.parametrize("pattern", [PATTERNS[0]] + [pytest.param(p, marks=pytest.mark.slow) for p in PATTERNS[1:]])
def test_transformers_greedy_batch_left_padding(hf_model, pattern):
    prompts = ["Say something.", "A much longer prompt that forces left padding of the short one."]
    outs = guided.regex(hf_model, pattern).generate(prompts, max_tokens=24)
    for o in outs:
        assert re.fullmatch(pattern + ("" if o.complete else "|.*"), o.text) or not o.complete
        if o.complete:
            assert re.fullmatch(pattern, o.text), o


def test_transformers_sampling_and_chinese_emoji(hf_model):
    outs = guided.regex(hf_model, PATTERNS[1]).generate(["Write something."] * 4, temperature=1.0,
                                                       top_p=0.95, top_k=50, seed=0, max_tokens=16)
    done = [o for o in outs if o.complete]
    assert done and all(re.fullmatch(PATTERNS[1], o.text) for o in done)


def test_logits_processor_with_beam_search(hf_model):
    tok, model, vocab = hf_model.tokenizer, hf_model.hf_model, hf_model.vocab
    pattern = r"(red|green|blue) (car|tree|sky)"
    proc = guided.ConstraintLogitsProcessor(fsm.compile_regex(pattern, vocab))
    enc = tok(["The colour of grass and the thing it is:", "Tell me:"], return_tensors="pt",
              padding=True, padding_side="left")
    with torch.inference_mode():
        out = model.generate(**enc, logits_processor=[proc], num_beams=3, num_return_sequences=2,
                             max_new_tokens=8, do_sample=False, pad_token_id=tok.eos_token_id)
    width = enc.input_ids.shape[1]
    for row in out:
        ids = [t for t in row[width:].tolist() if t != tok.eos_token_id]
        text = b"".join(vocab.token_bytes[t] for t in ids).decode()
        assert re.fullmatch(pattern, text), text


def test_processor_refuses_forbidden_token():
    vocab = fsm.Vocabulary((b"a", b"b", None), (2,), 3)
    proc = guided.ConstraintLogitsProcessor(fsm.compile_regex("a+", vocab))
    scores = torch.zeros(1, 3)
    proc(torch.tensor([[0]]), scores)
    assert scores.tolist() == [[0.0, float("-inf"), float("-inf")]]
    with pytest.raises(RuntimeError, match="forbids"):
        proc(torch.tensor([[0, 1]]), torch.zeros(1, 3))
    with pytest.raises(fsm.ConstraintError, match="accepts no output"):  # every score -inf
        guided.ConstraintLogitsProcessor(fsm.compile_regex("c", vocab))
