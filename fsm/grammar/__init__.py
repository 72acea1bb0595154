"""Lark grammars as constraints: compile_grammar."""
from .automaton import GrammarOptions, compile_grammar

__all__ = ["GrammarOptions", "compile_grammar"]
