"""The attention interface over the paged KV cache, and its plain-torch reference.

Every model layer calls two functions with these signatures; a Triton version of
each (kernels/, a later issue) must keep them:

    store_kv_cache(key, value, k_cache, v_cache, slot_mapping) -> None
    paged_attention(query, k_cache, v_cache, meta, scale, sliding_window=None) -> out

Shapes (T = new tokens in the step, S = sequences in the step):
    key, value         [T, kv_heads, head_dim]
    k_cache, v_cache   [num_blocks, block_size, kv_heads, head_dim] (one pair per layer)
    query, out         [T, heads, head_dim]
    meta.slot_mapping  [T]  int64, slot = block * block_size + offset; -1 = do not store
    meta.block_tables  [S, max_blocks] int32 (unused entries are 0)
    meta.seq_lens      [S]  int32: tokens in the cache after this step's writes
    meta.query_start_loc [S+1] int32: sequence s owns query rows qsl[s]:qsl[s+1],
                        which are its *last* q_len positions (causal within the sequence)
The first `meta.num_decodes` sequences have exactly one query token each (decodes
are put first so they can be batched); the rest are prefill chunks of any length,
with or without cached context before them (prefix cache, chunked prefill,
jump-forward tokens).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class AttentionMetadata:
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


def store_kv_cache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor,
                   v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Write each new token's key/value into its cache slot.

    >>> kc = torch.zeros(2, 4, 1, 2); vc = torch.zeros_like(kc)
    >>> store_kv_cache(torch.ones(1, 1, 2), torch.ones(1, 1, 2), kc, vc, torch.tensor([5]))
    >>> kc[1, 1].tolist()
    [[1.0, 1.0]]
    """
    kv_heads, head_dim = key.shape[1], key.shape[2]
    kf = k_cache.view(-1, kv_heads, head_dim)
    vf = v_cache.view(-1, kv_heads, head_dim)
    keep = slot_mapping >= 0
    if not bool(keep.all()):
        key, value, slot_mapping = key[keep], value[keep], slot_mapping[keep]
    kf.index_copy_(0, slot_mapping, key)
    vf.index_copy_(0, slot_mapping, value)


def _slots(block_table: torch.Tensor, length: int, block_size: int) -> torch.Tensor:
    pos = torch.arange(length, device=block_table.device)
    return block_table[pos // block_size].long() * block_size + pos % block_size


def paged_attention(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    meta: AttentionMetadata, scale: float,
                    sliding_window: int | None = None) -> torch.Tensor:
    """Causal attention of each sequence's new queries over its cached keys/values.

    Reference implementation in plain torch (CPU path, and the oracle for kernels).
    Key position k is visible to query position q iff k <= q and, with a sliding
    window w, k > q - w.
    """
    num_heads, head_dim = query.shape[1], query.shape[2]
    kv_heads = k_cache.shape[2]
    group = num_heads // kv_heads
    kf = k_cache.view(-1, kv_heads, head_dim)
    vf = v_cache.view(-1, kv_heads, head_dim)
    out = torch.empty_like(query)
    nd = meta.num_decodes

    if nd:
        # Decodes: one batched gather of every sequence's keys through its block table,
        # padded to the longest context and masked.
        key = ("decode", sliding_window)
        if key not in meta.cache:
            lens = meta.seq_lens[:nd].long()
            max_len = max(meta.seq_lens_host[:nd])
            pos = torch.arange(max_len, device=query.device)
            idx = (meta.block_tables[:nd, pos // meta.block_size].long() * meta.block_size
                   + pos % meta.block_size)                                   # [B, L]
            valid = pos[None, :] < lens[:, None]
            if sliding_window is not None:
                valid &= pos[None, :] > (lens[:, None] - 1 - sliding_window)
            # Padding reads the sequence's first slot instead of unwritten cache memory,
            # which may hold NaN (0 * NaN would poison the output despite the mask).
            idx = torch.where(pos[None, :] < lens[:, None], idx, idx[:, :1])
            bias = torch.zeros(valid.shape, dtype=query.dtype, device=query.device)
            bias.masked_fill_(~valid, float("-inf"))
            meta.cache[key] = (idx.view(-1), bias[:, None, None, :], max_len)
        idx, bias, max_len = meta.cache[key]
        q = query[:nd].view(nd, kv_heads, group, head_dim)
        k = kf.index_select(0, idx).view(nd, max_len, kv_heads, head_dim).permute(0, 2, 3, 1)
        v = vf.index_select(0, idx).view(nd, max_len, kv_heads, head_dim).transpose(1, 2)
        scores = torch.matmul(q, k) * scale + bias                           # [B, kvh, g, L]
        probs = torch.softmax(scores.float(), dim=-1).to(v.dtype)
        out[:nd] = torch.matmul(probs, v).reshape(nd, num_heads, head_dim)

    qsl = nd
    for s in range(nd, len(meta.query_lens_host)):
        q_len, kv_len = meta.query_lens_host[s], meta.seq_lens_host[s]
        key = ("prefill", s, sliding_window)
        if key not in meta.cache:
            slots = _slots(meta.block_tables[s], kv_len, meta.block_size)
            mask = None
            if q_len != kv_len or sliding_window is not None:
                qpos = torch.arange(kv_len - q_len, kv_len, device=query.device)[:, None]
                kpos = torch.arange(kv_len, device=query.device)[None, :]
                mask = kpos <= qpos
                if sliding_window is not None:
                    mask &= kpos > qpos - sliding_window
            meta.cache[key] = (slots, mask)
        slots, mask = meta.cache[key]
        q = query[qsl:qsl + q_len].transpose(0, 1).unsqueeze(0)             # [1, H, q, d]
        k = kf.index_select(0, slots).transpose(0, 1)                        # [kvh, L, d]
        v = vf.index_select(0, slots).transpose(0, 1)
        if group > 1:
            k = k.repeat_interleave(group, dim=0)
            v = v.repeat_interleave(group, dim=0)
        o = F.scaled_dot_product_attention(q, k.unsqueeze(0), v.unsqueeze(0), attn_mask=mask,
                                           is_causal=mask is None, scale=scale)
        out[qsl:qsl + q_len] = o[0].transpose(0, 1)
        qsl += q_len
    return out
