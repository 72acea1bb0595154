"""What a step's attention needs to know: where its tokens go and which blocks each
sequence reads. Built once per step by the model runner, shared by every layer."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class AttentionMetadata:
    """Where a step's tokens go, with S sequences in the step:
    slot_mapping [T] int64, slot = block * block_size + offset (-1: do not store);
    block_tables [S, max_blocks] int32 (unused entries 0); seq_lens [S] int32, tokens in
    the cache after this step's writes; query_start_loc [S+1] int32, sequence s owns
    query rows qsl[s]:qsl[s+1], its *last* q_len positions (causal within it)."""
    slot_mapping: torch.Tensor
    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    query_start_loc: torch.Tensor
    num_decodes: int
    # Host copies, so the torch reference never synchronises with the device.
    seq_lens_host: list[int]
    query_lens_host: list[int]
    block_size: int
    # Derived gather indices, built by the first layer and reused by the others.
    cache: dict = field(default_factory=dict)
