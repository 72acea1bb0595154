"""structgen: structured generation for LLMs.

    >>> import structgen
    >>> model = structgen.load()                               # doctest: +SKIP
    >>> structgen.choice(model, ["yes", "no"])("Is water wet?")  # doctest: +SKIP
    'yes'

The user API lives here; the layers below stay importable: `structgen.fsm` (compile
constraints, numpy only), `structgen.kernels`, `structgen.engine`, `structgen.guided`.
The generators load on first use, so that `import structgen.fsm` never imports torch.
"""
from .fsm.core.errors import (
    ConstraintError,
    GrammarError,
    RegexError,
    SchemaError,
    SchemaWarning,
    TimeBudgetError,
    TooLargeError,
)

_GUIDED = ("load", "Model", "regex", "choice", "json", "grammar", "Generator", "GuidedOutput",
           "IncompleteOutputError", "GenerationError", "ConstraintLogitsProcessor")

__all__ = [*_GUIDED, "ConstraintError", "RegexError", "SchemaError", "GrammarError", "TooLargeError", "TimeBudgetError",
           "SchemaWarning"]


def __getattr__(name: str):
    if name in _GUIDED:
        from . import guided
        return getattr(guided, name)
    raise AttributeError(f"module 'structgen' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_GUIDED})
