"""Constraints in the decode loop: specs compiled lazily through fsm and cached.

A request's `SamplingParams.constraint` is either an object with `.matcher()` (an
fsm compiled constraint, or anything honouring the matcher contract) or a spec:

    ("regex", pattern)    ("json", schema)    ("grammar", lark_text)    ("choice", [str, ...])

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
        if not (isinstance(constraint, (tuple, list)) and len(constraint) == 2
                and isinstance(constraint[0], str)):
            raise ConstraintError(
                f"constraint must have .matcher() or be (kind, value); got {constraint!r:.200}")
        return self._compile(*constraint)

    KINDS = ("regex", "json", "grammar", "choice")

    def _compile(self, kind: str, value):
        if kind not in self.KINDS:
            raise ConstraintError(f"unknown constraint kind {kind!r} (one of {', '.join(self.KINDS)})")
        try:
            from .. import fsm
            vocab = self.vocabulary
            if kind == "regex":
                return fsm.compile_regex(value, vocab).require_output()
            if kind == "json":
                if isinstance(value, str):
                    value = json.loads(value)
                return fsm.compile_json_schema(value, vocab).require_output()
            if kind == "grammar":
                return fsm.compile_grammar(value, vocab).require_output()
            if kind == "choice":  # fsm checks the options (non-empty, strings)
                return fsm.compile_choice(list(value), vocab).require_output()
        except ConstraintError:
            raise
        except Exception as e:   # any failure in compilation belongs to this request alone
            raise ConstraintError(f"cannot compile {kind} constraint: {type(e).__name__}: {e}") from e
