"""Batched decode engine: continuous batching over a paged KV cache, constraints in the loop.

>>> from structgen.engine import LLM, SamplingParams                       # doctest: +SKIP
>>> llm = LLM()                      # the embedded SmolLM2-135M-Instruct  # doctest: +SKIP
>>> llm.generate(["2+2="], SamplingParams(max_tokens=4))[0].text  # doctest: +SKIP

The names load on first use, so that a compile worker process (engine/compile_pool.py)
imports its module without importing torch.
"""
from importlib import import_module

_NAMES = {"LLM": ".llm", "RequestOutput": ".llm", "CompletionOutput": ".llm", "SamplingParams": ".sampling_params",
          "EngineConfig": ".config", "BeamSearchParams": ".sampling_params", "BeamSearchOutput": ".beam_search",
          "BeamSearchSequence": ".beam_search"}

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "EngineConfig", "BeamSearchParams",
           "BeamSearchOutput", "BeamSearchSequence"]


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(import_module(_NAMES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_NAMES})
