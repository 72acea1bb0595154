"""Batched decode engine: continuous batching over a paged KV cache, constraints in the loop.

>>> from structgen.engine import LLM, SamplingParams                       # doctest: +SKIP
>>> llm = LLM()                                                  # embedded SmolLM2-135M-Instruct
>>> llm.generate(["2+2="], SamplingParams(max_tokens=4))[0].text  # doctest: +SKIP
"""
from .config import EngineConfig
from .llm import LLM, CompletionOutput, RequestOutput
from .sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "EngineConfig"]
