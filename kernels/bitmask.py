"""Apply a batch of token bitmasks to logits: -inf wherever a token's bit is 0.

One program per (row, block of tokens): it reads the block's mask words, never the
logits, and writes -inf only where a token is disallowed.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import reference

BLOCK = 4096


@triton.jit
def _bitmask_kernel(logits_ptr, bitmask_ptr, indices_ptr, vocab, num_words, logits_stride,
                    mask_stride, HAS_INDICES: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(indices_ptr + pid) if HAS_INDICES else pid
    tokens = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    word = tokens // 32
    # Tokens past the mask's words read 0: disallowed.
    bits = tl.load(bitmask_ptr + row * mask_stride + word, mask=word < num_words, other=0)
    allowed = ((bits >> (tokens % 32)) & 1) != 0
    tl.store(logits_ptr + row * logits_stride + tokens, float("-inf"), mask=(tokens < vocab) & ~allowed)


def apply_token_bitmask_inplace(logits: torch.Tensor, bitmask: torch.Tensor,
                                indices: torch.Tensor | list[int] | None = None) -> None:
    """Set disallowed logits to -inf, in place; the signature of
    `reference.apply_token_bitmask_inplace`. Logits off CUDA take the torch reference
    (unless TRITON_INTERPRET=1), so one name serves every device."""
    if reference.takes_reference(logits):
        return reference.apply_token_bitmask_inplace(logits, bitmask, indices)
    if logits.dim() != 2 or bitmask.dim() != 2 or bitmask.dtype != torch.int32:
        raise ValueError("apply_token_bitmask_inplace: logits [batch, vocab] and an int32 "
                         f"bitmask [batch, words], not {tuple(logits.shape)} and "
                         f"{bitmask.dtype} {tuple(bitmask.shape)}")
    if logits.stride(1) != 1 or bitmask.stride(1) != 1:
        raise ValueError("apply_token_bitmask_inplace: rows must be contiguous")
    batch, vocab = logits.shape
    if bitmask.shape[0] != batch:
        raise ValueError(f"apply_token_bitmask_inplace: {bitmask.shape[0]} mask rows for {batch} logits rows")
    if indices is not None:
        indices = torch.as_tensor(indices, dtype=torch.int32, device=logits.device)
        if indices.numel() == 0:
            return
    rows = batch if indices is None else indices.numel()
    grid = (rows, triton.cdiv(vocab, BLOCK))
    _bitmask_kernel[grid](logits, bitmask, indices if indices is not None else bitmask,
                          vocab, bitmask.shape[1], logits.stride(0), bitmask.stride(0),
                          HAS_INDICES=indices is not None, BLOCK=BLOCK)
