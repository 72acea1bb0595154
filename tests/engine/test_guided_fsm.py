"""Real fsm constraints in the engine loop on SmolLM2: outputs checked by independent oracles."""
from __future__ import annotations

import json
import re

import pytest
from oracles import PROMPTS

from structgen import fsm
from structgen.engine import SamplingParams

PHONE = r"[0-9]{3}-[0-9]{4}"
RECORD = r'\{"name": "[a-z]{1,8}", "age": [0-9]{1,2}\}'


def test_regex_constraints_fullmatch_mixed_with_free(llm):
    prompts = ["My phone number is", "Describe a person as JSON:", PROMPTS[0], "Call me at"]
    params = [SamplingParams(max_tokens=24, constraint=("regex", PHONE)),
              SamplingParams(max_tokens=32, constraint=("regex", RECORD), temperature=0.8, seed=0),
              SamplingParams(max_tokens=8),
              SamplingParams(max_tokens=24, constraint=("regex", PHONE), temperature=1.0, seed=1)]
    outs = llm.generate(prompts, params, use_tqdm=False)
    for i in (0, 1, 3):
        assert outs[i].finish_reason == "constraint", outs[i]
        pattern = params[i].constraint[1]
        assert re.fullmatch(pattern, outs[i].text), outs[i].text
    assert outs[2].finish_reason in ("length", "stop") and outs[2].text
    # The RECORD regex forces '{"name": "' at the start: appended by jump-forward.
    assert llm.stats["forced_tokens"] > 0
    assert llm.block_manager.num_free_blocks == llm.block_manager.num_blocks
    # Compiled once per spec, reused across requests.
    assert llm.constraints.get(("regex", PHONE)) is llm.constraints.get(("regex", PHONE))


def test_choice_and_bad_regex(llm):
    params = [SamplingParams(max_tokens=8, constraint=("choice", ["yes", "no", "maybe"])),
              SamplingParams(max_tokens=8, constraint=("regex", "(unclosed")),
              SamplingParams(max_tokens=8, constraint=("regex", PHONE))]
    outs = llm.generate(["Is water wet? Answer:", "x", "Phone:"], params, use_tqdm=False)
    assert outs[0].text in ("yes", "no", "maybe") and outs[0].finish_reason == "constraint"
    assert outs[1].finish_reason == "error" and "regex" in outs[1].error
    assert re.fullmatch(PHONE, outs[2].text)


@pytest.mark.skipif(not hasattr(fsm, "compile_json_schema"), reason="no JSON Schema compiler yet")
def test_json_schema_outputs_validate(llm):
    import jsonschema
    schema = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
              "properties": {"name": {"type": "string", "maxLength": 12},
                             "age": {"type": "integer", "minimum": 0, "maximum": 120}}}
    params = SamplingParams(max_tokens=48, constraint=("json", schema))
    outs = llm.generate(["Give a person as JSON:", "A JSON record of Ada Lovelace:"], params,
                        use_tqdm=False)
    for o in outs:
        if o.finish_reason == "length":      # whitespace may run long; then it's a valid prefix
            continue
        assert o.finish_reason == "constraint", o
        jsonschema.validate(json.loads(o.text), schema)
    assert any(o.finish_reason == "constraint" for o in outs)


def test_compiler_takes_pydantic_classes_and_reuses_fsm_cache(smol_tokenizer):
    from pydantic import BaseModel

    from structgen.engine.constraints import ConstraintCompiler

    class Point(BaseModel):
        x: int
        y: int

    cc = ConstraintCompiler(smol_tokenizer, vocab_size=49152)
    a = cc.get(("json", Point))
    assert a is cc.get(("json", Point))  # fsm's per-vocabulary cache
    m = a.matcher()
    for t in smol_tokenizer.encode('{"x":1,"y":-2}', add_special_tokens=False):
        assert m.accept_token(t)
    assert m.is_accepting()


def test_compiler_refuses_constraints_without_outputs(smol_tokenizer):
    """A spec (or compiled automaton) that no output can begin fails its request at
    submission, with the reason, not at its first decoding step."""
    from structgen import fsm
    from structgen.engine.constraints import ConstraintCompiler, ConstraintError

    cc = ConstraintCompiler(smol_tokenizer, vocab_size=49152)
    for spec in [("json", False), ("json", {"allOf": [{"type": "string"}, {"type": "integer"}]}),
                 ("regex", r"[^\s\S]")]:
        with pytest.raises(ConstraintError, match="accepts no output at all"):
            cc.get(spec)
    with pytest.raises(ConstraintError, match="accepts no output at all"):
        cc.get(fsm.compile_regex(r"[^\s\S]", cc.vocabulary))
    assert cc.get(("json", {"const": 1})).matcher()
