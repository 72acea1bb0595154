"""Compile regexes, choices, JSON Schemas and grammars into token automata.

    >>> from structgen import fsm
    >>> vocab = fsm.Vocabulary.from_tokenizer(tokenizer)           # doctest: +SKIP
    >>> m = fsm.compile_regex(r"\\d{4}-\\d{2}-\\d{2}", vocab).matcher()  # doctest: +SKIP

numpy only: this package never imports torch.
"""
from __future__ import annotations

from .core.automaton import TokenAutomaton
from .core.errors import ConstraintError, GrammarError, RegexError, SchemaError, SchemaWarning, TooLargeError
from .core.matcher import Matcher
from .core.terms import TermBuilder
from .core.vocabulary import Vocabulary
from .regex.syntax import regex_to_term

__all__ = ["Vocabulary", "TokenAutomaton", "Matcher", "compile_regex", "compile_choice",
           "compile_json_schema", "compile_grammar",
           "ConstraintError", "RegexError", "SchemaError", "GrammarError", "TooLargeError", "SchemaWarning"]

def compile_regex(pattern: str, vocab: Vocabulary, flags: int = 0,
                  max_states: int | None = None) -> TokenAutomaton:
    """Compile a Python-syntax regex; outputs are its full matches (re.fullmatch).

    `flags`: re.IGNORECASE, re.DOTALL, re.VERBOSE, re.ASCII, re.MULTILINE.
    `max_states`: cap on DFA states (default 200,000); exceeding it raises TooLargeError.
    Compiled constraints are cached per vocabulary by (pattern, flags, max_states).
    """
    def build():
        tb = TermBuilder()
        return TokenAutomaton.from_term(tb, regex_to_term(tb, pattern, flags), vocab,
                                        f"regex {pattern!r}", max_states).owns_source()
    return vocab.cached(("regex", pattern, flags, max_states), build)


def compile_choice(options, vocab: Vocabulary) -> TokenAutomaton:
    """Exactly one of the given strings."""
    options = tuple(options)
    if not options or not all(isinstance(o, str) for o in options):
        raise ConstraintError("choice needs a non-empty list of strings")

    def build():
        tb = TermBuilder()
        root = tb.alt(tb.literal(o.encode("utf-8")) for o in options)
        return TokenAutomaton.from_term(tb, root, vocab, f"choice {list(options)!r}").owns_source()
    return vocab.cached(("choice", options), build)


def compile_json_schema(schema, vocab: Vocabulary, **options):
    """Compile a JSON Schema (dict, JSON text, or Pydantic model class) to a TokenAutomaton,
    or where a root anyOf is split (uniqueItems that its branches set apart: tsconfig's) a
    UnionAutomaton with the same `.matcher()` contract; see fsm/json_schema.py."""
    from .json.schema import compile_json_schema as compile_
    return compile_(schema, vocab, **options)


def compile_grammar(grammar: str, vocab: Vocabulary, start: str = "start", **options) -> TokenAutomaton:
    """Compile a Lark grammar; see fsm/grammar.py."""
    from .grammar.automaton import compile_grammar as compile_
    return compile_(grammar, vocab, start=start, **options)
