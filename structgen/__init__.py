"""structgen: structured generation for LLMs.

    >>> import structgen
    >>> model = structgen.load()                               # doctest: +SKIP
    >>> structgen.choice(model, ["yes", "no"])("Is water wet?")  # doctest: +SKIP
    'yes'

The user API lives here; the layers below stay importable: `structgen.fsm` (compile
constraints, numpy only), `structgen.kernels`, `structgen.engine`, `structgen.guided`.
"""
from .fsm import ConstraintError, GrammarError, RegexError, SchemaError, SchemaWarning, TooLargeError
from .guided import (ConstraintLogitsProcessor, Generator, GuidedOutput, IncompleteOutputError, Model, choice,
                     grammar, json, load, regex)

__all__ = ["load", "Model", "regex", "choice", "json", "grammar", "Generator", "GuidedOutput",
           "IncompleteOutputError", "ConstraintLogitsProcessor", "ConstraintError", "RegexError",
           "SchemaError", "GrammarError", "TooLargeError", "SchemaWarning"]
