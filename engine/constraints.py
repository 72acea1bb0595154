"""Constraints in the decode loop: specs compiled lazily through fsm and cached.

A request's `SamplingParams.constraint` is either an object with `.matcher()` (an
fsm compiled constraint, or anything honouring the matcher contract) or a spec:

    ("regex", pattern)    ("json", schema)    ("grammar", lark_text)    ("choice", [str, ...])
    ("tool_calls", {"schema": call_schema, "begin": marker, "end": marker})
    ("structural_tag", {"type": "structural_tag", "format": {...}})   (XGrammar's document)

The matcher contract (fsm): `accept_token(id) -> bool`, `fill_next_token_bitmask(row)`
(row: int32 [ceil(V/32)]), `is_terminated()`, `rollback(n)`, `forced_tokens() -> list[int]`.
"""
from __future__ import annotations

import json
import threading

from ..fsm import ConstraintError  # (one error tree: a bad spec fails its own request only)


class ConstraintCompiler:
    """Compile specs against one vocabulary. Compiled constraints are cached by fsm
    itself (per vocabulary, keyed by spec), so a repeated spec costs a lookup.

    >>> cc = ConstraintCompiler(hf_tokenizer, vocab_size=49152)       # doctest: +SKIP
    >>> m = cc.get(("regex", r"[0-9]{3}")).matcher()                   # doctest: +SKIP
    """

    def __init__(self, tokenizer, vocab_size: int):
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self._vocab = None
        self._vocab_lock = threading.Lock()   # compiles run in an AsyncEngine's threads: build once

    @property
    def vocabulary(self):
        if self._vocab is None:
            with self._vocab_lock:
                if self._vocab is None:
                    from .. import fsm
                    self._vocab = fsm.Vocabulary.from_tokenizer(self.tokenizer, vocab_size=self.vocab_size)
        return self._vocab

    def get(self, constraint):
        """Return an object with `.matcher()`; raise ConstraintError if it cannot be built
        or no output can begin (an fsm automaton's require_output)."""
        if hasattr(constraint, "matcher"):
            if hasattr(constraint, "require_output"):
                try:
                    constraint.require_output()
                except ConstraintError:
                    raise
                except ValueError as e:
                    raise ConstraintError(str(e)) from e
            return constraint
        return compile_spec(constraint, self.vocabulary)

    KINDS = ("regex", "json", "grammar", "choice", "tool_calls", "structural_tag")


def compile_spec(spec, vocab):
    """The constraint of a spec `(kind, value)` over `vocab` (cached by fsm per vocabulary),
    or ConstraintError. Module-level, so that compile worker processes can run it
    (engine/compile_pool.py)."""
    if not (isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], str)):
        raise ConstraintError(f"constraint must have .matcher() or be (kind, value); got {spec!r:.200}")
    kind, value = spec
    if kind not in ConstraintCompiler.KINDS:
        raise ConstraintError(f"unknown constraint kind {kind!r} (one of {', '.join(ConstraintCompiler.KINDS)})")
    try:
        from .. import fsm
        if kind == "regex":
            return fsm.compile_regex(value, vocab).require_output()
        if kind == "json":
            if isinstance(value, str):
                value = json.loads(value)
            return fsm.compile_json_schema(value, vocab).require_output()
        if kind == "grammar":
            return fsm.compile_grammar(value, vocab).require_output()
        if kind == "structural_tag":
            return fsm.compile_structural_tag(value, vocab).require_output()
        if kind == "tool_calls":
            return text_or_tool_call(value["schema"], value["begin"], value["end"], vocab).require_output()
        return fsm.compile_choice(list(value), vocab).require_output()  # (fsm checks the options)
    except ConstraintError:
        raise
    except Exception as e:   # any failure in compilation belongs to this request alone
        raise ConstraintError(f"cannot compile {kind} constraint: {type(e).__name__}: {e}") from e


def text_or_tool_call(call_schema, begin: str, end: str, vocab):
    """Either free text in which the marker `begin.strip()` never appears, or `begin` + one
    JSON value of `call_schema` + `end` (tool_choice "auto"): a union of the two automata,
    stepped side by side (docs/serving.md)."""
    import re

    from .. import fsm
    from ..fsm.json.union import UnionAutomaton
    text = fsm.compile_regex(rf"(?s)(?:(?!{re.escape(begin.strip())}).)*", vocab)
    call = fsm.compile_json_schema(call_schema, vocab, prefix=begin, suffix=end)
    branches = [text, *(call.automata if isinstance(call, UnionAutomaton) else [call])]
    union = UnionAutomaton(branches, call.info)
    union.description = f"text, or a tool call between {begin.strip()!r} and {end.strip()!r}"
    return union
