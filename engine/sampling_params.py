"""Per-request sampling parameters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class SamplingParams:
    """How to sample one request.

    `temperature=0` is greedy. `constraint` is either an object with `.matcher()`
    (an fsm compiled constraint) or a spec compiled lazily and cached:
    `("regex", pattern)`, `("json", schema)`, `("grammar", lark_text)`,
    `("choice", ["yes", "no"])`.

    >>> p = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=32, seed=1)
    >>> greedy = SamplingParams(max_tokens=16, constraint=("regex", r"[0-9]+"))
    """
    n: int = 1
    temperature: float = 0.0
    top_k: int = 0                   # 0 or -1: off
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0  # HF style, on prompt and output tokens
    presence_penalty: float = 0.0    # OpenAI style, on output tokens
    frequency_penalty: float = 0.0
    seed: int | None = None          # sample i of the request uses seed + i
    max_tokens: int = 16
    min_tokens: int = 0              # EOS and stop ids are masked before this many tokens
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    logprobs: int | None = None      # None: no logprobs; k >= 0: chosen token + top k
    skip_special_tokens: bool = True
    constraint: Any = None

    def __post_init__(self):
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        self.stop_token_ids = list(self.stop_token_ids or [])
        if self.top_k is None or self.top_k < 0:
            self.top_k = 0
        if self.n < 1:
            raise ValueError("n must be >= 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if not 0 <= self.min_p <= 1:
            raise ValueError("min_p must be in [0, 1]")
        if self.repetition_penalty <= 0:
            raise ValueError("repetition_penalty must be > 0")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def has_penalties(self) -> bool:
        return (self.repetition_penalty != 1.0 or self.presence_penalty != 0.0
                or self.frequency_penalty != 0.0)
