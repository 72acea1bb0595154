"""Errors raised while compiling constraints. All derive from ConstraintError; SchemaWarning
(lenient JSON Schema compilation) is a warning."""
from __future__ import annotations


class ConstraintError(ValueError):
    """A constraint (regex, schema, grammar) cannot be compiled."""

    def __reduce__(self):
        # (pickled as it is, attributes included: a compile in another process raises it here)
        return _restore, (type(self), self.args, self.__dict__)


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


class TimeBudgetError(TooLargeError):
    """A compile ran past its time budget (`time_budget_s`, or an enclosing
    `fsm.compile_budget`): `budget_s`, `elapsed_s`, `what` it compiled, the `stage` it
    had reached and, where known, the JSON `pointer` of the subschema it was building."""

    def __init__(self, budget_s: float, elapsed_s: float, what: str, stage: str, pointer: str | None = None):
        self.budget_s, self.elapsed_s, self.what, self.stage, self.pointer = budget_s, elapsed_s, what, stage, pointer
        super().__init__(budget_s, elapsed_s, what, stage, pointer)

    def __str__(self) -> str:
        where = f" at {self.pointer}" if self.pointer else ""
        return (f"compiling the {self.what} reached its time budget of {self.budget_s:g} s (time_budget_s, or "
                f"the enclosing compile_budget; stopped at {self.elapsed_s:.2f} s, the rest left for unwinding) "
                f"while {self.stage}{where}; simplify it or raise the budget")

    def note_where(self, pointer: str) -> None:
        """Record the innermost subschema being built (the first pointer noted wins)."""
        if self.pointer is None:
            self.pointer = pointer


class SchemaError(ConstraintError):
    """A schema (or one keyword of it) cannot be enforced exactly."""

    def __init__(self, message: str, keyword: str | None = None, pointer: str = "#"):
        self.keyword, self.pointer = keyword, pointer
        where = f"{keyword!r} at {pointer}" if keyword else pointer
        super().__init__(f"{where}: {message}")


class GrammarError(ConstraintError):
    """A grammar cannot be compiled: bad syntax, an LALR(1) conflict, an unsupported
    terminal, an undefined symbol."""


class SchemaWarning(UserWarning):
    """Lenient mode: a keyword was dropped (the output may violate it)."""


def _restore(cls, args, attributes):
    e = cls.__new__(cls, *args)
    e.args = args
    e.__dict__.update(attributes)
    return e
