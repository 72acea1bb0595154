"""Compile regexes, choices, JSON Schemas and grammars into token automata.

    >>> from structgen import fsm
    >>> vocab = fsm.Vocabulary.from_tokenizer(tokenizer)                 # doctest: +SKIP
    >>> m = fsm.compile_regex(r"\\d{4}-\\d{2}-\\d{2}", vocab).matcher()  # doctest: +SKIP

numpy only: this package never imports torch. The JSON and grammar front ends load on
first use (`fsm.compile_json_schema`, `fsm.JsonOptions`...).
"""
from __future__ import annotations

from importlib import import_module

from .core.automaton import TokenAutomaton
from .core.constraint import Constraint
from .core.errors import ConstraintError, GrammarError, RegexError, SchemaError, SchemaWarning, TooLargeError
from .core.matcher import Matcher, TokenMatcher
from .core.terms import TermBuilder
from .core.vocabulary import Vocabulary
from .regex import RegexOptions, compile_choice, compile_regex, regex_to_term

_FRONT_ENDS = {"compile_json_schema": ".json", "JsonOptions": ".json", "JsonInfo": ".json",
               "compile_grammar": ".grammar", "GrammarOptions": ".grammar"}

__all__ = ["Vocabulary", "Constraint", "TokenAutomaton", "Matcher", "TokenMatcher", "TermBuilder",
           "compile_regex", "compile_choice", "compile_json_schema", "compile_grammar", "regex_to_term",
           "RegexOptions", "JsonOptions", "JsonInfo", "GrammarOptions",
           "ConstraintError", "RegexError", "SchemaError", "GrammarError", "TooLargeError", "SchemaWarning"]


def __getattr__(name: str):
    if name in _FRONT_ENDS:
        return getattr(import_module(_FRONT_ENDS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_FRONT_ENDS})
