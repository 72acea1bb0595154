"""Run from the repository root (`python -c`, `python -m`), this folder shadows Hugging
Face's `kernels` package, which transformers imports when it builds a model. Imported
under that name, it hands the name over to the installed package."""
import importlib.machinery
import importlib.util
import os
import sys


def hugging_face_kernels() -> None:
    """Load the `kernels` package found on sys.path past this repository into
    sys.modules["kernels"] (the import that found this folder then returns it)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for entry in sys.path:
        if os.path.abspath(entry or os.curdir) == repo:
            continue
        spec = importlib.machinery.PathFinder.find_spec("kernels", [entry])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules["kernels"] = module
            spec.loader.exec_module(module)
            return
    raise ImportError("`kernels` resolved to structgen's kernels/ folder (the repository root is on sys.path) "
                      "and no other `kernels` package is installed; import it as structgen.kernels")
