"""compile_regex and compile_choice: a regex, or a list of strings, as a Constraint."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.automaton import TokenAutomaton
from ..core.budget import scope
from ..core.errors import ConstraintError
from ..core.options import documented, lists_options, option, resolve, time_budget_option
from ..core.terms import TermBuilder, paused_gc
from ..core.vocabulary import Vocabulary
from .syntax import regex_to_term


@documented
@dataclass(frozen=True)
class RegexOptions:
    """Options of compile_regex (also accepted as its keywords)."""

    flags: int = option(0, "re flags: re.IGNORECASE, re.DOTALL, re.VERBOSE, re.ASCII, re.MULTILINE")
    max_states: int | None = option(None, "cap on DFA states (None: 200,000); beyond it TooLargeError")
    time_budget_s: float | None = time_budget_option()


@lists_options(RegexOptions)
def compile_regex(pattern: str, vocab: Vocabulary, options: RegexOptions | None = None,
                  **keywords) -> TokenAutomaton:
    """Compile a Python-syntax regex; outputs are its full matches (re.fullmatch), exact
    over bytes. Cached per vocabulary by the pattern and the options. Supported syntax:
    docs/regex.md. Options: a RegexOptions, or its fields as keywords."""
    options = resolve(RegexOptions, options, keywords, "compile_regex")

    def build():
        with scope(options.time_budget_s, "regex " + (repr(pattern) if len(pattern) <= 60 else
                                                      repr(pattern[:60]) + "...")), paused_gc():
            tb = TermBuilder()
            auto = TokenAutomaton.from_term(tb, regex_to_term(tb, pattern, options.flags), vocab,
                                            f"regex {pattern!r}", options.max_states).owns_source()
            paused_gc().collect_young()  # (as a JSON compile: a large pattern's terms, not a decoding step's)
            return auto
    return vocab.cached(("regex", pattern, options), build)


def compile_choice(options, vocab: Vocabulary) -> TokenAutomaton:
    """Exactly one of the given strings."""
    options = tuple(options)
    if not options or not all(isinstance(o, str) for o in options):
        raise ConstraintError("choice needs a non-empty list of strings")

    def build():
        with scope(None, "choice"):
            tb = TermBuilder()
            root = tb.alt(tb.literal(o.encode("utf-8")) for o in options)
            return TokenAutomaton.from_term(tb, root, vocab, f"choice {list(options)!r}").owns_source()
    return vocab.cached(("choice", options), build)
