"""Structured generation for users: constrained generators over a loaded model.

    >>> from structgen import guided
    >>> model = guided.load()                                   # the embedded SmolLM2   # doctest: +SKIP
    >>> guided.choice(model, ["yes", "no"])("Is water wet?")     # doctest: +SKIP
    'yes'
    >>> guided.json(model, Person)("Describe a person.")         # a Person instance     # doctest: +SKIP
"""
from .generate import GenerationError, Generator, GuidedOutput, IncompleteOutputError, choice, grammar, json, regex
from .logits_processor import ConstraintLogitsProcessor
from .model import Model, load

__all__ = ["load", "Model", "regex", "choice", "json", "grammar", "Generator", "GuidedOutput",
           "IncompleteOutputError", "GenerationError", "ConstraintLogitsProcessor"]
