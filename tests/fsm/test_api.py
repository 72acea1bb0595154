"""The public surface of structgen.fsm: one error tree, one Constraint type, the Matcher
protocol, and options as typed dataclasses that keywords fill too."""
from __future__ import annotations

import dataclasses
import inspect
import pydoc
import re
import subprocess
import sys

import pytest

import structgen
from structgen import fsm, guided
from structgen.fsm import ConstraintError, GrammarError, RegexError, SchemaError, SchemaWarning, TooLargeError

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
GRAMMAR = 'start: "(" start ")" | "x"'


def test_one_error_tree():
    for e in (RegexError, SchemaError, GrammarError, TooLargeError):
        assert issubclass(e, ConstraintError)
        assert getattr(structgen, e.__name__) is e
    assert issubclass(SchemaWarning, UserWarning)
    from structgen.engine.constraints import ConstraintError as engine_error
    assert engine_error is ConstraintError


def test_each_front_end_raises_its_own_error(smol_vocab):
    with pytest.raises(RegexError, match="position"):
        fsm.compile_regex("a(b", smol_vocab)
    with pytest.raises(SchemaError, match="strng"):
        fsm.compile_json_schema({"type": "strng"}, smol_vocab)
    with pytest.raises(GrammarError):
        fsm.compile_grammar("start: undefined_rule", smol_vocab)
    a = smol_vocab.token_bytes.index(b"a")
    m = fsm.compile_regex("[a-z]{100}", smol_vocab, max_states=20).matcher()
    with pytest.raises(TooLargeError, match="20"):  # (a state per count: the 21st is one too many)
        for _ in range(40):
            assert m.accept_token(a)


@pytest.mark.parametrize("compile_", ["regex", "choice", "json", "grammar"])
def test_every_compile_returns_a_constraint_whose_matchers_satisfy_the_protocol(smol_vocab, compile_):
    c = {"regex": lambda: fsm.compile_regex("[0-9]+", smol_vocab),
         "choice": lambda: fsm.compile_choice(["yes", "no"], smol_vocab),
         "json": lambda: fsm.compile_json_schema(SCHEMA, smol_vocab),
         "grammar": lambda: fsm.compile_grammar(GRAMMAR, smol_vocab)}[compile_]()
    assert isinstance(c, fsm.Constraint)
    assert c.require_output() is c
    assert isinstance(c.matcher(), fsm.Matcher)


def test_json_matchers_and_info(smol_vocab):
    unique = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    free_keys = {"type": "object", "additionalProperties": {"type": "integer"}}
    split = {"anyOf": [{"type": "object", "properties": {"a": unique}},
                       {"type": "object", "properties": {"b": unique}, "required": ["b"]}]}
    for schema in (SCHEMA, unique, free_keys, split):
        c = fsm.compile_json_schema(schema, smol_vocab)
        assert isinstance(c, fsm.Constraint) and isinstance(c.matcher(), fsm.Matcher)
        assert isinstance(c.info, fsm.JsonInfo)
    info = fsm.compile_json_schema(SCHEMA, smol_vocab).info
    assert info.key_order[:1] == ["a"] and info.canonical({"a": 1}) == '{"a":1}' and info.relaxed == []
    assert type(fsm.compile_json_schema(unique, smol_vocab).matcher()).__name__ == "UniqueMatcher"
    assert type(fsm.compile_json_schema(free_keys, smol_vocab).matcher()).__name__ == "KeyMatcher"
    assert fsm.compile_regex("a", smol_vocab).info is None


@pytest.mark.parametrize("compile_, cls, spec, options", [
    (fsm.compile_regex, fsm.RegexOptions, "[a-z]+", {"flags": re.IGNORECASE, "max_states": 1000}),
    (fsm.compile_json_schema, fsm.JsonOptions, SCHEMA, {"whitespace": "flexible", "strict": False}),
    (fsm.compile_grammar, fsm.GrammarOptions, 'start: a\na: "x"', {"start": "a", "max_states": 1000}),
])
def test_options_as_a_dataclass_or_as_keywords(smol_vocab, compile_, cls, spec, options):
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    by_keywords = compile_(spec, smol_vocab, **options)
    assert compile_(spec, smol_vocab, cls(**options)) is by_keywords  # one cache entry
    assert compile_(spec, smol_vocab) is not by_keywords
    with pytest.raises(TypeError, match="'nonsense'"):
        compile_(spec, smol_vocab, nonsense=1)
    with pytest.raises(TypeError, match=cls.__name__):
        compile_(spec, smol_vocab, dict(options))


def test_bad_option_values_are_refused_early():
    for bad in ({"whitespace": "pretty"}, {"recursion": "deep"}, {"custom_formats": "yes"},
                {"max_depth": -1}, {"max_states": "many"}, {"documents": ["a.json"]}):
        with pytest.raises(SchemaError, match=next(iter(bad))):
            fsm.JsonOptions(**bad)


def test_pydantic_defaults_follow_the_source():
    from pydantic import BaseModel

    class M(BaseModel):
        x: int
    assert fsm.JsonOptions().for_source(M) == fsm.JsonOptions(python_dates=True, python_sets=True,
                                                                allow_extra_properties=False)
    assert fsm.JsonOptions().for_source({}) == fsm.JsonOptions(python_dates=False, python_sets=False,
                                                                 allow_extra_properties=True)
    assert fsm.JsonOptions(python_sets=False).for_source(M).python_sets is False


@pytest.mark.parametrize("function, cls", [
    (fsm.compile_regex, fsm.RegexOptions), (fsm.compile_json_schema, fsm.JsonOptions),
    (fsm.compile_grammar, fsm.GrammarOptions), (guided.regex, fsm.RegexOptions),
    (guided.json, fsm.JsonOptions), (guided.grammar, fsm.GrammarOptions), (structgen.json, fsm.JsonOptions),
])
def test_help_shows_every_option(function, cls):
    text = pydoc.render_doc(function)
    for f in dataclasses.fields(cls):
        assert f.metadata.get("doc"), f"{cls.__name__}.{f.name} has no documentation"
        assert f"{f.name} = {f.default!r}" in text, f.name
    assert "options" in inspect.signature(function).parameters


def test_fsm_never_imports_torch():
    code = ("import sys, structgen.fsm, structgen.fsm.json, structgen.fsm.grammar\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "import structgen\nstructgen.ConstraintError\nassert 'torch' not in sys.modules\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
