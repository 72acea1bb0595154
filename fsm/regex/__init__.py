"""Regexes (Python `re` syntax) as byte-level terms and as constraints: compile_regex."""
from . import prepare  # noqa: F401 (registers the per-vocabulary tables: Vocabulary.prepare)
from .compile import RegexOptions, compile_choice, compile_regex
from .syntax import regex_to_term

__all__ = ["RegexOptions", "compile_regex", "compile_choice", "regex_to_term"]
