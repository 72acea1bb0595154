"""Compile regexes, choices, JSON Schemas, grammars and structural tags into token automata.

    >>> from structgen import fsm
    >>> vocab = fsm.Vocabulary.from_tokenizer(tokenizer)                 # doctest: +SKIP
    >>> m = fsm.compile_regex(r"\\d{4}-\\d{2}-\\d{2}", vocab).matcher()  # doctest: +SKIP

numpy only: this package never imports torch. The front ends load with it (once per
process, not inside a first constraint).
"""
from __future__ import annotations

from .core.automaton import TokenAutomaton
from .core.budget import compile_budget
from .core.constraint import Constraint
from .core.errors import (
    ConstraintError,
    GrammarError,
    RegexError,
    SchemaError,
    SchemaWarning,
    TimeBudgetError,
    TooLargeError,
)
from .core.matcher import Matcher, TokenMatcher
from .core.terms import TermBuilder
from .core.vocabulary import Vocabulary
from .grammar import GrammarOptions, compile_grammar
from .json import JsonInfo, JsonOptions, compile_json_schema
from .regex import RegexOptions, compile_choice, compile_regex, regex_to_term
from .structural import StructuralTagError, StructuralTagOptions, compile_structural_tag

__all__ = ["Vocabulary", "Constraint", "TokenAutomaton", "Matcher", "TokenMatcher", "TermBuilder",
           "compile_regex", "compile_choice", "compile_json_schema", "compile_grammar", "compile_structural_tag",
           "regex_to_term", "compile_budget",
           "RegexOptions", "JsonOptions", "JsonInfo", "GrammarOptions", "StructuralTagOptions",
           "ConstraintError", "RegexError", "SchemaError", "GrammarError", "TooLargeError", "TimeBudgetError",
           "SchemaWarning", "StructuralTagError"]
