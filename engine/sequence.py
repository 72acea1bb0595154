"""One sequence being generated: its tokens, KV blocks and output state.

A request with `n > 1` becomes n sequences that share the prompt (and, with prefix
caching, the prompt's KV blocks).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum, auto
from typing import Any

from .sampling_params import SamplingParams


class SequenceStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


@dataclass(eq=False)
class Sequence:
    seq_id: int                 # also the FCFS order
    request_id: int
    sample_index: int
    token_ids: list[int]        # prompt + output (sampled and forced tokens)
    num_prompt_tokens: int
    params: SamplingParams
    matcher: Any = None
    generator: Any = None       # torch.Generator when the request has a seed
    status: SequenceStatus = SequenceStatus.WAITING
    num_computed_tokens: int = 0     # tokens whose KV is in the cache
    num_cached_tokens: int = 0       # of those, how many came from the prefix cache
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)   # chained hashes of full, computed blocks
    finish_reason: str | None = None  # "stop" | "length" | "constraint" | "error"
    stop_reason: Any = None           # the stop string or token id that ended it
    error: str | None = None
    logprobs: list | None = None      # per output token: {token_id: logprob}; None for a forced
                                      # token until the next forward computes it (model_runner)
    prompt_logprobs: list | None = None   # per prompt token {token_id: logprob}; [0] stays None
    # Incremental detokenisation state (engine.detokenizer).
    text: str = ""
    prefix_offset: int = 0
    read_offset: int = 0
    num_preemptions: int = 0
    prefix_hit_tokens: int = 0        # prompt tokens served by the prefix cache at first admission
    # Speculative decoding (engine.speculative), only within a step: unverified tokens that
    # ride at the end of this step's chunk, never in token_ids; and, with a matcher, its
    # bitmasks at the positions of the chunk's last token and of each draft; for sampled
    # drafts of a draft model, the distributions they were drawn from.
    draft_token_ids: list[int] = field(default_factory=list)
    draft_masks: Any = None           # np.int32 [len(draft_token_ids) + 1, mask words] or None
    draft_probs: Any = None           # a draft model's proposal q: torch [len(draft_token_ids), V] or None

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def num_uncomputed_tokens(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def fork(self, seq_id: int, matcher: Any = None) -> Sequence:
        """A copy at the same point with its own token list and logprobs, and the given
        matcher (a beam of this one). Blocks are not copied: BlockManager.fork shares them."""
        return replace(self, seq_id=seq_id, token_ids=list(self.token_ids), matcher=matcher,
                       num_computed_tokens=0, num_cached_tokens=0, block_table=[], block_hashes=[],
                       logprobs=None if self.logprobs is None else list(self.logprobs),
                       prompt_logprobs=None, draft_token_ids=[], draft_masks=None,
                       draft_probs=None)
