"""Per-request sampling parameters."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

MAX_N = 128          # sequences per request
MAX_LOGPROBS = 20    # alternatives per token (OpenAI's top_logprobs allows 20)


@dataclass
class SamplingParams:
    """How to sample one request. Every field is checked here: a bad value raises
    ValueError naming the field and its allowed range, before anything runs.

    `temperature=0` is greedy. `constraint` is either an object with `.matcher()`
    (an fsm compiled constraint) or a spec compiled lazily and cached:
    `("regex", pattern)`, `("json", schema)`, `("grammar", lark_text)`,
    `("choice", ["yes", "no"])`.

    `prompt_logprobs=k`: the output's `prompt_logprobs` holds, for each prompt token after
    the first, {token: logprob} with that token first, then the top k; such a request
    computes its whole prompt (the prefix cache keeps no logits). `best_of=m` (m >= n):
    m samples are drawn and the n with the highest cumulative logprob (raw model logprobs
    of the sampled tokens) are returned, best first.

    >>> p = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=32, seed=1)
    >>> greedy = SamplingParams(max_tokens=16, constraint=("regex", r"[0-9]+"))
    """
    n: int = 1
    temperature: float = 0.0
    top_k: int = 0                   # 0, -1 or None: off
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
    logprobs: int | None = None      # None: no logprobs; 0 <= k <= MAX_LOGPROBS: chosen token + top k
    prompt_logprobs: int | None = None   # the same for each prompt token given the tokens before it
    best_of: int | None = None       # sample this many, return the n best by cumulative logprob
    skip_special_tokens: bool = True
    constraint: Any = None

    def __post_init__(self):
        self.stop = _stop_strings(self.stop)
        self.stop_token_ids = list(self.stop_token_ids or [])
        _integer("n", self.n, 1, MAX_N)
        _real("temperature", self.temperature, 0, None)
        if self.top_k is None or self.top_k == -1:    # (OpenAI-style clients send -1 or null for off)
            self.top_k = 0
        _integer("top_k", self.top_k, 0, None)
        _real("top_p", self.top_p, 0, 1, low_open=True)
        _real("min_p", self.min_p, 0, 1)
        _real("repetition_penalty", self.repetition_penalty, 0, None, low_open=True)
        _real("presence_penalty", self.presence_penalty, -2, 2)
        _real("frequency_penalty", self.frequency_penalty, -2, 2)
        if self.seed is not None:
            _integer("seed", self.seed, -2**63, 2**64 - 1 - MAX_N)    # (torch's range; sample i uses seed + i)
        _integer("max_tokens", self.max_tokens, 1, None)
        _integer("min_tokens", self.min_tokens, 0, self.max_tokens)
        if self.logprobs is not None:
            _integer("logprobs", self.logprobs, 0, MAX_LOGPROBS)
        if self.prompt_logprobs is not None:
            _integer("prompt_logprobs", self.prompt_logprobs, 0, MAX_LOGPROBS)
        if self.best_of is not None:
            _integer("best_of", self.best_of, self.n, MAX_N)
            if self.best_of > 1 and self.temperature == 0:
                raise ValueError(f"SamplingParams.best_of={self.best_of} needs sampling (temperature > 0): "
                                 "greedy samples are all the same")
        for i, t in enumerate(self.stop_token_ids):
            _integer(f"stop_token_ids[{i}]", t, 0, None)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def has_penalties(self) -> bool:
        return (self.repetition_penalty != 1.0 or self.presence_penalty != 0.0
                or self.frequency_penalty != 0.0)


MAX_BEAM_WIDTH = 64


@dataclass(frozen=True)
class BeamSearchParams:
    """How to beam-search one prompt (`LLM.beam_search`), as vLLM names it, with the
    semantics of transformers' `generate(num_beams=beam_width, length_penalty=...,
    early_stopping=...)`: see docs/engine.md, "Beam search".

    `length_penalty`: a finished beam scores cum_logprob / output_length ** length_penalty.
    `early_stopping`: False (stop once no running beam can still beat the worst kept
    hypothesis, judged at the current length), True (stop as soon as `beam_width`
    hypotheses are finished) or "never" (judged at `max_tokens` when length_penalty > 0).
    `constraint`: as in SamplingParams; every beam keeps its own matcher.
    `stop`: as in SamplingParams: a candidate whose text then holds a stop string is a
    finished hypothesis (its text ends before the stop string, or after it with
    `include_stop_str_in_output`; its token_ids keep every token), as transformers'
    `generate(stop_strings=...)` finishes it.

    >>> BeamSearchParams(beam_width=4, max_tokens=16, length_penalty=0.8)   # doctest: +ELLIPSIS
    BeamSearchParams(beam_width=4, max_tokens=16, ...)
    """
    beam_width: int
    max_tokens: int
    ignore_eos: bool = False
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    constraint: Any = None
    stop: tuple[str, ...] | list[str] | str | None = None     # kept as a tuple
    include_stop_str_in_output: bool = False

    def __post_init__(self):
        object.__setattr__(self, "stop", tuple(_stop_strings(self.stop, "BeamSearchParams")))
        _integer("beam_width", self.beam_width, 1, MAX_BEAM_WIDTH, "BeamSearchParams")
        _integer("max_tokens", self.max_tokens, 1, None, "BeamSearchParams")
        _real("length_penalty", self.length_penalty, -10, 10, owner="BeamSearchParams")
        for name in ("ignore_eos", "include_stop_str_in_output"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"BeamSearchParams.{name} must be a bool, not {getattr(self, name)!r}")
        if not (isinstance(self.early_stopping, bool) or self.early_stopping == "never"):
            raise ValueError("BeamSearchParams.early_stopping must be True, False or \"never\", "
                             f"not {self.early_stopping!r}")


def _stop_strings(stop, owner: str = "SamplingParams") -> list[str]:
    """`stop` as a list: one string, or a list (any iterable) of non-empty strings."""
    if isinstance(stop, str):
        stop = [stop]
    try:
        stop = list(stop or [])
    except TypeError:
        raise ValueError(f"{owner}.stop must be a string or a list of strings, not {stop!r}") from None
    for i, s in enumerate(stop):
        if not isinstance(s, str) or not s:
            raise ValueError(f"{owner}.stop[{i}] must be a non-empty string, not {s!r}")
    return stop


def _integer(name: str, value, low: int, high: int | None, owner: str = "SamplingParams") -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{owner}.{name} must be an integer, not {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{owner}.{name} must be in [{low}, {'inf' if high is None else high}], "
                         f"not {value}")


def _real(name: str, value, low: float, high: float | None, low_open: bool = False,
          owner: str = "SamplingParams") -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{owner}.{name} must be a finite number, not {value!r}")
    if value < low or (low_open and value == low) or (high is not None and value > high):
        raise ValueError(f"{owner}.{name} must be in {'(' if low_open else '['}{low}, "
                         f"{'inf)' if high is None else f'{high}]'}, not {value}")
