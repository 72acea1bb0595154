"""Batched decode engine: continuous batching over a paged KV cache, constraints in the loop.

>>> from engine import LLM, SamplingParams                       # doctest: +SKIP
>>> llm = LLM()                                                  # embedded SmolLM2-135M-Instruct
>>> llm.generate(["2+2="], SamplingParams(max_tokens=4))[0].text  # doctest: +SKIP
"""
from engine.config import EngineConfig
from engine.llm import LLM, CompletionOutput, RequestOutput
from engine.sampler import apply_token_bitmask
from engine.sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "EngineConfig",
           "apply_token_bitmask"]
