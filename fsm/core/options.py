"""Compile options as frozen dataclasses: one per compiler, each field documented in its
metadata, every field accepted as a keyword of the compile function too."""
from __future__ import annotations

from dataclasses import MISSING, field, fields, replace


def option(default, doc: str, compare: bool = True):
    """A dataclass field with its one line of documentation (describe reads it).
    compare=False: not part of equality and hash, so not of the compile cache's key (a
    budget, which decides whether a compile finishes, not what it makes)."""
    return field(default=default, metadata={"doc": doc}, compare=compare)


TIME_BUDGET_DOC = ("seconds a compile may take, checked inside its long loops; past it TimeBudgetError (a "
                   "TooLargeError). None: the enclosing fsm.compile_budget's deadline, else 2 s; math.inf: none. "
                   "Covers the compile call, not the states built lazily by later masks (max_states bounds those)")


def time_budget_option():
    """The `time_budget_s` field every compiler's options have (fsm/core/budget.py)."""
    return option(None, TIME_BUDGET_DOC, compare=False)


def resolve(cls, options, keywords: dict, caller: str):
    """`options` (an instance of `cls`, or None for the defaults) with `keywords` in place
    of its fields. TypeError names an unknown keyword and lists the known ones."""
    if options is None:
        options = cls()
    elif not isinstance(options, cls):
        raise TypeError(f"{caller}: options must be a {cls.__name__}, not {type(options).__name__}")
    if keywords:
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(keywords) - set(known))
        if unknown:
            raise TypeError(f"{caller}: unknown option(s) {', '.join(map(repr, unknown))}; "
                            f"{cls.__name__} has {', '.join(known)}")
        options = replace(options, **keywords)
    return options


def describe(cls) -> str:
    """The options of `cls` as docstring lines: `name = default`: what it does."""
    lines = []
    for f in fields(cls):
        default = f.default if f.default is not MISSING else f.default_factory()
        lines.append(f"    {f.name} = {default!r}: {f.metadata.get('doc', '')}")
    return "\n".join(lines)


def lists_options(cls):
    """Decorator: append the options of `cls` (describe) to the decorated function's
    docstring, so that help() shows every option where it is taken."""
    def add(obj):
        obj.__doc__ = f"{(obj.__doc__ or '').rstrip()}\n\n{describe(cls)}\n"
        return obj
    return add


def documented(cls):
    """Class decorator: the options dataclass lists its own fields."""
    return lists_options(cls)(cls)
