"""compile_structural_tag: an XGrammar structural-tag document as a Constraint."""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..core.automaton import TokenAutomaton
from ..core.budget import freed_on_timeout, scope
from ..core.dfa import DEFAULT_MAX_STATES
from ..core.options import documented, lists_options, option, resolve, time_budget_option
from ..core.terms import paused_gc
from ..json.source import JsonTermSource
from .build import Builder
from .spec import StructuralTagError, load_spec


@documented
@dataclass(frozen=True)
class StructuralTagOptions:
    """Options of compile_structural_tag (also accepted as its keywords)."""

    max_whitespace: int = option(20, "bytes of JSON whitespace at one place in a json_schema whose "
                                 "max_whitespace_cnt is not given (XGrammar: unbounded)")
    json_checks: str = option("refuse", '"refuse": a json_schema that needs checks beside the automaton (uniqueItems, '
                              'distinct keys of open objects) is a StructuralTagError; "skip": those checks are left '
                              "out (XGrammar's behaviour), listed in the constraint's info.relaxed")
    max_states: int | None = option(None, "cap on DFA states (None: 200,000); beyond it TooLargeError")
    time_budget_s: float | None = time_budget_option()

    def __post_init__(self):
        if self.json_checks not in ("refuse", "skip"):
            raise StructuralTagError(f"json_checks must be 'refuse' or 'skip', not {self.json_checks!r}")
        for name in ("max_whitespace", "max_states"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise StructuralTagError(f"{name} must be a non-negative integer, not {v!r}")


@dataclass(frozen=True)
class StructuralTagInfo:
    """What a compiled structural tag's Constraint tells (`constraint.info`)."""

    relaxed: list  # what json_checks="skip" left unchecked, by path


@lists_options(StructuralTagOptions)
def compile_structural_tag(spec, vocab, options: StructuralTagOptions | None = None, **keywords) -> TokenAutomaton:
    """Compile an XGrammar structural-tag document (a dict or its JSON text:
    `{"type": "structural_tag", "format": {...}}`) for `vocab`: a TokenAutomaton over
    one term of the whole document, so masks are exact at every boundary and cached per
    state (free text costs a cached row). Cached per vocabulary by the document and the
    options. What each format means and what differs from XGrammar:
    docs/structural-tags.md. A malformed or unsupported document: StructuralTagError,
    naming the node by its path."""
    options = resolve(StructuralTagOptions, options, keywords, "compile_structural_tag")
    root = load_spec(spec)  # (checked before the cache: errors name the document's own node)
    text = spec if isinstance(spec, str) else json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return vocab.cached(("structural_tag", text, options), lambda: build(root, vocab, options))


def build(root, vocab, options: StructuralTagOptions) -> TokenAutomaton:
    """compile_structural_tag of a document read by spec.load_spec, without the cache."""
    ms = options.max_states or DEFAULT_MAX_STATES
    b = Builder(options.max_whitespace, options.json_checks)
    with scope(options.time_budget_s, "structural tag"), paused_gc(), freed_on_timeout(b.tb):
        term = b.term(root)
        auto = TokenAutomaton(JsonTermSource(b.tb, ms), term, vocab, "structural tag", ms,
                              info=StructuralTagInfo(b.relaxed))
        paused_gc().collect_young()
    return auto.owns_source()
