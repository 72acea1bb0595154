"""The docstrings' examples are tests too: every module of structgen, through doctest."""
import doctest
import importlib
import pkgutil

import pytest

from structgen import engine, fsm, guided, kernels

PACKAGES = (fsm, engine, guided, kernels)  # (mapped from the repository's top-level folders)
MODULES = sorted({"structgen", *(p.__name__ for p in PACKAGES)}
                 | {m.name for p in PACKAGES for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")})


def test_every_layer_is_walked():
    assert {"structgen.fsm.json.schema", "structgen.fsm.core.automaton", "structgen.engine.llm"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"
