"""Plain-torch references of the kernels, with the Triton versions' signatures:

    store_kv_cache(key, value, k_cache, v_cache, slot_mapping) -> None
    paged_attention(query, k_cache, v_cache, meta, scale, sliding_window=None) -> out
    apply_token_bitmask_inplace(logits, bitmask, indices=None) -> None

The engine's CPU path, and the oracle the kernels are tested against. Shapes: see
`metadata.py` and docs/engine.md, "Model runner and attention".
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from .metadata import AttentionMetadata


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


def _additive(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where visible, -inf elsewhere: SDPA would convert a boolean mask like this on
    every call, i.e. in every layer; built once per step instead."""
    return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill_(
        ~visible, float("-inf"))


def _gather_blocks(cache: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
    """Copy whole blocks [n, block_size, kv_heads, dim] out of the cache: one contiguous
    row per block is far cheaper to gather than one per token."""
    return cache.index_select(0, blocks).view(-1, cache.shape[2], cache.shape[3])


# Decodes attended per SDPA call on CPU: a small group keeps its gathered K/V small
# enough to stay in cache, and pads only to its own longest context. (Not faster: a
# head-major cache layout, one gather for K and V together, one SDPA call per sequence
# without padding, bmm/softmax/bmm in place of SDPA.)
DECODE_GROUP = 8
# On CUDA a kernel launch costs more than the padding it saves, so decodes go together,
# as many per SDPA call as fit in this many gathered token slots.
CUDA_DECODE_SLOTS = 1 << 18


def _first_slot(blocks: torch.Tensor, block_size: int) -> int | None:
    """On CPU, the first slot of `blocks` when they are consecutive in the cache (as a lone
    sequence's usually are: free blocks are handed out in order), so that its K/V are read
    as a view instead of gathered; else None. Built once per step: the host list is free on
    CPU, a device sync on CUDA (where it is not used)."""
    if blocks.is_cuda or blocks.numel() == 0:
        return None
    ids = blocks.tolist()
    return ids[0] * block_size if ids == list(range(ids[0], ids[0] + len(ids))) else None


def _read_kv(cache: torch.Tensor, blocks: torch.Tensor, start: int | None, length: int) -> torch.Tensor:
    """The first `length` slots of `blocks` [length, kv_heads, dim]: a view of the cache when
    the blocks are consecutive (`start`: _first_slot), else a gathered copy."""
    if start is not None:
        return cache.view(-1, cache.shape[2], cache.shape[3])[start:start + length]
    return _gather_blocks(cache, blocks)[:length]


def _decode_groups(meta: AttentionMetadata, cuda: bool) -> list[tuple[int, int]]:
    """(lo, hi) ranges of the decodes attended together, computed once per step."""
    nd, bs = meta.num_decodes, meta.block_size
    if not cuda:
        return [(lo, min(nd, lo + DECODE_GROUP)) for lo in range(0, nd, DECODE_GROUP)]
    groups = meta.cache.get("groups")
    if groups is None:
        groups, lo, longest = [], 0, 0
        for i, n in enumerate(meta.seq_lens_host[:nd]):
            longest = max(longest, -(-n // bs) * bs)
            if (i + 1 - lo) * longest > CUDA_DECODE_SLOTS and i > lo:
                groups.append((lo, i))
                lo, longest = i, -(-n // bs) * bs
        groups += [(lo, nd)] if nd else []
        meta.cache["groups"] = groups
    return groups


def _attend_decodes(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    meta: AttentionMetadata, lo: int, scale: float,
                    sliding_window: int | None) -> torch.Tensor:
    """Attention for decodes lo:lo+len(query), one query token each: their blocks are
    gathered at once, padded to the group's longest context and masked. The query heads
    sharing a KV head become that head's query rows, so K/V are never repeated."""
    n, num_heads, head_dim = query.shape
    kv_heads = k_cache.shape[2]
    hi, bs = lo + n, meta.block_size
    key = ("decode", lo, sliding_window)
    if n == 1 and sliding_window is None:
        # A lone decode (batch-1 decoding) sees every position up to its own: its written
        # slots alone, unpadded, need no mask and no zeroing.
        if key not in meta.cache:
            L = meta.seq_lens_host[lo]
            blocks = meta.block_tables[lo, :-(-L // bs)].long()
            meta.cache[key] = (blocks, _first_slot(blocks, bs), L)
        blocks, start, L = meta.cache[key]
        k = _read_kv(k_cache, blocks, start, L).transpose(0, 1)[None]       # [1, kvh, L, d]
        v = _read_kv(v_cache, blocks, start, L).transpose(0, 1)[None]
        q = query.view(1, kv_heads, num_heads // kv_heads, head_dim)
        return F.scaled_dot_product_attention(q, k, v, scale=scale).view(1, num_heads, head_dim)
    if key not in meta.cache:
        lens_host = meta.seq_lens_host[lo:hi]
        nb = -(-max(lens_host) // bs)
        blocks = meta.block_tables[lo:hi, :nb].reshape(-1).long()
        pos = torch.arange(nb * bs, device=query.device)
        lens = meta.seq_lens[lo:hi, None].long()
        valid = pos < lens
        if sliding_window is not None:
            valid &= pos > lens - 1 - sliding_window
        # Slots past a sequence's length may never have been written and hold NaN,
        # which a masked-out probability of 0 would still spread (0 * NaN): zero them.
        unwritten = (torch.arange(nb * bs) >= torch.tensor(lens_host)[:, None]).view(-1)
        unwritten = unwritten.nonzero().squeeze(1).to(query.device)
        meta.cache[key] = (blocks, _additive(valid[:, None, None, :], query.dtype), unwritten,
                           nb * bs)
    blocks, mask, unwritten, L = meta.cache[key]
    k = _gather_blocks(k_cache, blocks)                                      # [n*L, kvh, d]
    v = _gather_blocks(v_cache, blocks)
    k.index_fill_(0, unwritten, 0.0)
    v.index_fill_(0, unwritten, 0.0)
    k = k.view(n, L, kv_heads, head_dim).transpose(1, 2)                     # [n, kvh, L, d]
    v = v.view(n, L, kv_heads, head_dim).transpose(1, 2)
    q = query.view(n, kv_heads, num_heads // kv_heads, head_dim)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return o.reshape(n, num_heads, head_dim)


def paged_attention(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    meta: AttentionMetadata, scale: float,
                    sliding_window: int | None = None) -> torch.Tensor:
    """Causal attention of each sequence's new queries over its cached keys/values.

    Reference implementation in plain torch (CPU path, and the oracle for kernels).
    Key position k is visible to query position q iff k <= q and, with a sliding
    window w, k > q - w.
    """
    group = query.shape[1] // k_cache.shape[2]
    bs = meta.block_size
    nd = meta.num_decodes
    if nd == len(meta.query_lens_host) == 1:     # batch-1 decoding: no output to assemble
        return _attend_decodes(query, k_cache, v_cache, meta, 0, scale, sliding_window)
    out = torch.empty_like(query)
    for lo, hi in _decode_groups(meta, query.is_cuda):
        out[lo:hi] = _attend_decodes(query[lo:hi], k_cache, v_cache, meta, lo, scale,
                                     sliding_window)

    qsl = nd
    for s in range(nd, len(meta.query_lens_host)):
        q_len, kv_len = meta.query_lens_host[s], meta.seq_lens_host[s]
        key = ("prefill", s, sliding_window)
        if key not in meta.cache:
            blocks = meta.block_tables[s, :-(-kv_len // bs)].long()
            mask = None
            if q_len != kv_len or sliding_window is not None:
                qpos = torch.arange(kv_len - q_len, kv_len, device=query.device)[:, None]
                kpos = torch.arange(kv_len, device=query.device)[None, :]
                mask = kpos <= qpos
                if sliding_window is not None:
                    mask &= kpos > qpos - sliding_window
                mask = _additive(mask, query.dtype)
            meta.cache[key] = (blocks, _first_slot(blocks, bs), mask)
        blocks, start, mask = meta.cache[key]
        # Only the first kv_len slots are read: nothing unwritten.
        k = _read_kv(k_cache, blocks, start, kv_len).transpose(0, 1)         # [kvh, L, d]
        v = _read_kv(v_cache, blocks, start, kv_len).transpose(0, 1)
        q = query[qsl:qsl + q_len].transpose(0, 1)                           # [H, q, d]
        # 4-D, as transformers calls it: on CPU 3-D inputs miss the flash kernel and take
        # the unfused math path (several times slower on a long prefill).
        o = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask,
                                           is_causal=mask is None, scale=scale,
                                           enable_gqa=group > 1)
        out[qsl:qsl + q_len] = o[0].transpose(0, 1)
        qsl += q_len
    return out


def apply_token_bitmask_inplace(logits: torch.Tensor, bitmask: torch.Tensor,
                                indices: torch.Tensor | list[int] | None = None) -> None:
    """Set disallowed logits to -inf, in place.

    `bitmask` is int32 [batch, ceil(V/32)]: bit j of word i allows token 32*i + j; columns
    of `logits` beyond the mask's 32*words are disallowed. With `indices`, only those rows
    of `logits` (and of `bitmask`) are masked; the others have no constraint.

    >>> lg = torch.zeros(1, 40)
    >>> apply_token_bitmask_inplace(lg, torch.tensor([[0b101, 0]], dtype=torch.int32))
    >>> lg[0, :4].tolist()
    [0.0, -inf, 0.0, -inf]
    """
    if indices is not None:
        indices = torch.as_tensor(indices, dtype=torch.long, device=logits.device)
        if indices.numel() == 0:
            return
        bitmask = bitmask[indices.to(bitmask.device)]
    rows = logits if indices is None else logits[indices]
    batch, vocab = rows.shape
    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)
    allowed = ((bitmask.unsqueeze(-1) >> shifts) & 1).bool().view(batch, -1)
    width = allowed.shape[1]
    if width >= vocab:
        allowed = allowed[:, :vocab]
    else:
        allowed = torch.cat([allowed, allowed.new_zeros(batch, vocab - width)], dim=1)
    rows.masked_fill_(~allowed.to(rows.device), float("-inf"))
    if indices is not None:
        logits[indices] = rows


def takes_reference(t: torch.Tensor) -> bool:
    """Whether a Triton entry point given `t` runs this module's torch version instead: off
    CUDA, Triton runs only in its interpreter (TRITON_INTERPRET=1)."""
    return not t.is_cuda and os.environ.get("TRITON_INTERPRET") != "1"
