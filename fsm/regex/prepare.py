"""The token tables of the common character classes, built as a vocabulary loads.

A regex's first mask in a run of a class (`\\d{3}`, `[a-z]+`) reads the tokens made of
that class's characters, kept per vocabulary and class (TokenAutomaton._class_tokens);
building them is a pass over the vocabulary, and for a class that takes some non-ASCII
characters but not all (Unicode `\\d`, `\\w`), a walk of every token with a byte past
ASCII: milliseconds on a 131k vocabulary, which a script's first regex would pay inside
its first masks. Vocabulary.prepare() calls `prepare_vocabulary` (registered in PREPARERS)
to build them for the classes below; it is counted in the vocabulary's load. Any other
class is built on its first use, as before, from the nearest of these where few tokens
tell them apart (automaton._near_made_of).
"""
from __future__ import annotations

from ..core.automaton import TokenAutomaton
from ..core.terms import TermBuilder
from ..core.vocabulary import PREPARERS
from .syntax import regex_to_term

CLASSES = (r"\d", r"\s", r"\w", "[0-9]", "[a-z]", "[A-Z]", "[a-zA-Z]", "[a-zA-Z0-9]", "[0-9a-fA-F]")


def prepare_vocabulary(vocab) -> None:
    """Mask a run of each class above (a fresh automaton: no compile cache entry)."""
    tb = TermBuilder()
    for cls in CLASSES:
        auto = TokenAutomaton.from_term(tb, regex_to_term(tb, cls + "+;"), vocab)
        auto.mask(auto.start)


PREPARERS.append(prepare_vocabulary)
