"""Write each new token's key and value into its paged-cache slot, on the device.

One program per token copies its kv_heads * head_dim values; slot -1 (a token whose
key/value must not be stored) returns at once, so the host never inspects the slots.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _store_kv_kernel(key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, slot_ptr, key_stride, value_stride,
                     cache_stride, WIDTH: tl.constexpr, BLOCK: tl.constexpr):
    token = tl.program_id(0)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    if slot < 0:
        return
    cols = tl.arange(0, BLOCK)
    keep = cols < WIDTH
    k = tl.load(key_ptr + token * key_stride + cols, mask=keep)
    v = tl.load(value_ptr + token * value_stride + cols, mask=keep)
    tl.store(k_cache_ptr + slot * cache_stride + cols, k, mask=keep)
    tl.store(v_cache_ptr + slot * cache_stride + cols, v, mask=keep)


def store_kv_cache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor,
                   v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """The signature of `reference.store_kv_cache`: key/value [T, kv_heads, head_dim],
    caches [num_blocks, block_size, kv_heads, head_dim], slot_mapping [T] (-1: skip)."""
    T, kv_heads, head_dim = key.shape
    if value.shape != key.shape or k_cache.shape != v_cache.shape or k_cache.shape[2:] != key.shape[1:]:
        raise ValueError(f"store_kv_cache: key {tuple(key.shape)}, value {tuple(value.shape)} and caches "
                         f"{tuple(k_cache.shape)} / {tuple(v_cache.shape)} do not agree on [kv_heads, head_dim]")
    if slot_mapping.shape != (T,):
        raise ValueError(f"store_kv_cache: slot_mapping {tuple(slot_mapping.shape)} for {T} tokens")
    # A token's heads must be one contiguous run in both (rows of a fused qkv projection are).
    if key.stride(2) != 1 or key.stride(1) != head_dim or value.stride(2) != 1 or value.stride(1) != head_dim:
        raise ValueError("store_kv_cache: each token's [kv_heads, head_dim] must be contiguous")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("store_kv_cache: the caches must be contiguous")
    if T == 0:
        return
    width = kv_heads * head_dim
    _store_kv_kernel[(T,)](key, value, k_cache, v_cache, slot_mapping, key.stride(0), value.stride(0), width,
                           WIDTH=width, BLOCK=triton.next_power_of_2(width))
