"""Errors raised while compiling constraints. All derive from ConstraintError."""
from __future__ import annotations


class ConstraintError(ValueError):
    """A constraint (regex, schema, grammar) cannot be compiled."""


class RegexError(ConstraintError):
    """Bad or unsupported regex syntax; `pos` is the offset in `pattern`."""

    def __init__(self, message: str, pattern: str, pos: int | None):
        self.pattern, self.pos = pattern, pos
        where = f" at position {pos}" if pos is not None else ""
        caret = ""
        if pos is not None and len(pattern) <= 200:
            caret = f"\n  {pattern}\n  {' ' * pos}^"
        super().__init__(f"{message}{where}{caret}")


class TooLargeError(ConstraintError):
    """An automaton exceeded its documented size limit."""
