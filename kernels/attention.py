"""Paged attention over a mixed batch (decodes and prefill chunks) in one Triton launch.

A program takes one block of query positions of one sequence and all the query heads that
share one KV head, and runs an online softmax over that sequence's KV tiles. Decode-only
batches over long block tables split each sequence's keys into segments (flash-decoding),
reduced by a second kernel. No host values are read: the grid depends on shapes only.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import reference
from .metadata import AttentionMetadata

# Keys per inner-loop tile, independent of the cache's block size (each key looks up its
# own block); 32 keeps tl.dot's operands at its 16-wide minimum or more.
TILE = 32
# Query rows (query positions x heads of a group) per program, at least: tl.dot's minimum.
MIN_BLOCK_M = 16
# Decode-only batches split each sequence into up to MAX_SEGMENTS segments, one per
# SEGMENT_TOKENS of the block table's width (rounded up to a power of two), unless their
# (sequence, KV head) programs are SPLIT_MAX_PROGRAMS or more: those already fill the GPU,
# and splitting would only add the partials' traffic.
SEGMENT_TOKENS = 512
MAX_SEGMENTS = 16
SPLIT_MAX_PROGRAMS = 256

_TL_DTYPES = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
_DTYPES = tuple(_TL_DTYPES)


@triton.jit
def _find_seq(qsl_ptr, q_block, num_seqs, BLOCK_Q: tl.constexpr):
    """The sequence owning global query block `q_block`: sequence s's blocks start at
    qsl[s] // BLOCK_Q + s, which bounds the count by T // BLOCK_Q + S without host data."""
    lo: tl.int32 = 0
    hi = num_seqs
    while lo < hi:
        mid = (lo + hi) // 2
        if tl.load(qsl_ptr + mid) // BLOCK_Q + mid <= q_block:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@triton.jit
def _attention_kernel(out_ptr, q_ptr, k_ptr, v_ptr, block_tables_ptr, seq_lens_ptr, qsl_ptr,
                      part_out_ptr, part_max_ptr, part_sum_ptr, qk_scale, window, num_seqs,
                      stride_qt, stride_qh, stride_ot, stride_oh, stride_kb, stride_ks, stride_kh,
                      stride_vb, stride_vs, stride_vh, stride_bt, num_heads,
                      GROUP: tl.constexpr, GROUP_P: tl.constexpr, HEAD_DIM: tl.constexpr,
                      HEAD_P: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr,
                      TILE: tl.constexpr, HAS_WINDOW: tl.constexpr, SPLIT: tl.constexpr,
                      NUM_SEGMENTS: tl.constexpr, DOT_TY: tl.constexpr, PRECISION: tl.constexpr):
    BLOCK_M: tl.constexpr = BLOCK_Q * GROUP_P
    kv_head = tl.program_id(1)
    if SPLIT:   # decode-only: one query per sequence, grid axis 0 is the sequence
        seq = tl.program_id(0)
        q_block = 0
    else:
        seq = _find_seq(qsl_ptr, tl.program_id(0), num_seqs, BLOCK_Q)
        q_block = tl.program_id(0) - (tl.load(qsl_ptr + seq) // BLOCK_Q + seq)
    q_start = tl.load(qsl_ptr + seq)
    q_len = tl.load(qsl_ptr + seq + 1) - q_start
    if q_block * BLOCK_Q >= q_len:   # a spare block of the bound T // BLOCK_Q + S
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    context = seq_len - q_len

    # Row r is query position r // GROUP_P of this block, head r % GROUP_P of the group.
    rows = tl.arange(0, BLOCK_M)
    q_idx = q_block * BLOCK_Q + rows // GROUP_P
    head = kv_head * GROUP + rows % GROUP_P
    row_ok = (q_idx < q_len) & (rows % GROUP_P < GROUP)
    dims = tl.arange(0, HEAD_P)
    dim_ok = dims < HEAD_DIM
    q_row = (q_start + q_idx).to(tl.int64)
    q = tl.load(q_ptr + q_row[:, None] * stride_qt + head[:, None] * stride_qh + dims[None, :],
                mask=row_ok[:, None] & dim_ok[None, :], other=0.0).to(DOT_TY)
    q_pos = context + q_idx

    # Keys any row of this block can see: [first visible, last query position].
    first_q = context + q_block * BLOCK_Q
    key_end = context + tl.minimum(q_block * BLOCK_Q + BLOCK_Q, q_len)
    key_start = 0
    if HAS_WINDOW:
        key_start = tl.maximum(first_q - window + 1, 0)
    tile_lo = key_start // TILE
    tile_hi = (key_end + TILE - 1) // TILE
    if SPLIT:   # this program's share of the sequence's tiles; may be empty
        per_segment = (tile_hi - tile_lo + NUM_SEGMENTS - 1) // NUM_SEGMENTS
        tile_lo = tile_lo + tl.program_id(2) * per_segment
        tile_hi = tl.minimum(tile_hi, tile_lo + per_segment)

    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_P], tl.float32)
    table = block_tables_ptr + seq.to(tl.int64) * stride_bt
    for t in range(tile_lo, tile_hi):
        keys = t * TILE + tl.arange(0, TILE)
        # key_end <= seq_len: slots past the sequence (garbage, NaN) are never loaded.
        key_ok = keys < key_end
        block = tl.load(table + keys // BLOCK_SIZE, mask=key_ok, other=0).to(tl.int64)
        slot = keys % BLOCK_SIZE
        k = tl.load(k_ptr + block[None, :] * stride_kb + slot[None, :] * stride_ks + kv_head * stride_kh
                    + dims[:, None], mask=dim_ok[:, None] & key_ok[None, :], other=0.0).to(DOT_TY)
        v = tl.load(v_ptr + block[:, None] * stride_vb + slot[:, None] * stride_vs + kv_head * stride_vh
                    + dims[None, :], mask=key_ok[:, None] & dim_ok[None, :], other=0.0).to(DOT_TY)
        # Scores in log2 units (qk_scale folds in log2(e)), for exp2.
        s = tl.dot(q, k, input_precision=PRECISION) * qk_scale
        visible = row_ok[:, None] & key_ok[None, :] & (keys[None, :] <= q_pos[:, None])
        if HAS_WINDOW:
            visible = visible & (keys[None, :] > q_pos[:, None] - window)
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        # A row with nothing visible yet keeps m = -inf: shift by 0 so exp2 gives 0, not NaN.
        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_shift[:, None])
        alpha = tl.exp2(m - m_shift)
        l_sum = l_sum * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_TY), v, input_precision=PRECISION)
        m = m_new

    store = row_ok[:, None] & dim_ok[None, :]
    if SPLIT:
        # Unnormalised partials, fp32 [T, heads, NUM_SEGMENTS, (HEAD_P)]; an empty segment
        # writes the neutral m = -inf, l = 0, acc = 0.
        part = (q_row * num_heads + head) * NUM_SEGMENTS + tl.program_id(2)
        tl.store(part_out_ptr + part[:, None] * HEAD_P + dims[None, :], acc, mask=store)
        tl.store(part_max_ptr + part, m, mask=row_ok)
        tl.store(part_sum_ptr + part, l_sum, mask=row_ok)
    else:
        # Rows with no visible key (a padded sequence of length 0) give 0, not 0 / 0.
        out = acc / tl.where(l_sum > 0, l_sum, 1.0)[:, None]
        tl.store(out_ptr + q_row[:, None] * stride_ot + head[:, None] * stride_oh + dims[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=store)


@triton.jit
def _reduce_segments_kernel(out_ptr, part_out_ptr, part_max_ptr, part_sum_ptr, stride_ot, stride_oh,
                            num_heads, HEAD_DIM: tl.constexpr, HEAD_P: tl.constexpr,
                            NUM_SEGMENTS: tl.constexpr):
    """One (query, head): rescale each segment's partials to the common max and combine."""
    row = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    part = (row * num_heads + head) * NUM_SEGMENTS + tl.arange(0, NUM_SEGMENTS)
    seg_max = tl.load(part_max_ptr + part)
    top = tl.max(seg_max, 0)
    top = tl.where(top == float("-inf"), 0.0, top)
    weight = tl.exp2(seg_max - top)
    total = tl.sum(tl.load(part_sum_ptr + part) * weight, 0)
    dims = tl.arange(0, HEAD_P)
    acc = tl.sum(tl.load(part_out_ptr + part[:, None] * HEAD_P + dims[None, :]) * weight[:, None], 0)
    out = acc / tl.where(total > 0, total, 1.0)
    tl.store(out_ptr + row * stride_ot + head * stride_oh + dims, out.to(out_ptr.dtype.element_ty),
             mask=dims < HEAD_DIM)


def _num_segments(num_seqs: int, kv_heads: int, max_blocks: int, block_size: int) -> int:
    """Segments per sequence for a decode-only batch, from shapes only (so a captured
    CUDA graph stays valid); 1 means no split."""
    if num_seqs * kv_heads >= SPLIT_MAX_PROGRAMS:
        return 1
    wanted = triton.cdiv(max_blocks * block_size, SEGMENT_TOKENS)
    return min(MAX_SEGMENTS, triton.next_power_of_2(max(wanted, 1)))


def _check(query, k_cache, v_cache, meta, sliding_window) -> None:
    if query.dim() != 3 or k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError("paged_attention: query [T, heads, head_dim] and k_cache, v_cache [num_blocks, "
                         f"block_size, kv_heads, head_dim] of one shape, not {tuple(query.shape)}, "
                         f"{tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    heads, head_dim = query.shape[1:]
    block_size, kv_heads = k_cache.shape[1:3]
    if k_cache.shape[3] != head_dim or heads % kv_heads:
        raise ValueError(f"paged_attention: {heads} query heads of dim {head_dim} do not fit {kv_heads} "
                         f"kv heads of dim {k_cache.shape[3]}")
    if query.dtype not in _DTYPES or k_cache.dtype != query.dtype or v_cache.dtype != query.dtype:
        raise ValueError(f"paged_attention: query, k_cache, v_cache must share one of {_DTYPES}, not "
                         f"{query.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    if query.stride(2) != 1 or k_cache.stride(3) != 1 or v_cache.stride(3) != 1:
        raise ValueError("paged_attention: query, k_cache and v_cache need a contiguous last dim")
    if meta.block_size != block_size:
        raise ValueError(f"paged_attention: meta.block_size {meta.block_size} != cache block size {block_size}")
    S = meta.seq_lens.shape[0]
    for name, t, shape in (("block_tables", meta.block_tables, (S, meta.block_tables.shape[-1])),
                           ("seq_lens", meta.seq_lens, (S,)), ("query_start_loc", meta.query_start_loc, (S + 1,))):
        if t.dtype != torch.int32 or tuple(t.shape) != shape or t.device != query.device or t.stride(-1) != 1:
            raise ValueError(f"paged_attention: meta.{name} must be int32 {shape}, contiguous rows, on "
                             f"{query.device}, not {t.dtype} {tuple(t.shape)} on {t.device}")
    if sliding_window is not None and sliding_window < 1:
        raise ValueError(f"paged_attention: sliding_window must be None or >= 1, not {sliding_window}")


def paged_attention(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    meta: AttentionMetadata, scale: float,
                    sliding_window: int | None = None) -> torch.Tensor:
    """Causal attention of each sequence's new queries over its cached keys/values; the
    signature and semantics of `reference.paged_attention`. Tensors off CUDA take the
    torch reference (unless TRITON_INTERPRET=1), so one name serves every device."""
    if reference.takes_reference(query):
        return reference.paged_attention(query, k_cache, v_cache, meta, scale, sliding_window)
    _check(query, k_cache, v_cache, meta, sliding_window)
    T, heads, head_dim = query.shape
    kv_heads, S = k_cache.shape[2], meta.seq_lens.shape[0]
    out = torch.empty(query.shape, dtype=query.dtype, device=query.device)
    if T == 0:
        return out
    group = heads // kv_heads
    group_p = triton.next_power_of_2(group)
    block_q = max(MIN_BLOCK_M, group_p) // group_p
    head_p = max(16, triton.next_power_of_2(head_dim))
    # Triton's interpreter multiplies bf16's raw bits in tl.dot: there, bf16 operands go to fp32.
    fp32_dot = query.dtype == torch.float32 or (query.dtype == torch.bfloat16 and not query.is_cuda)
    # Split only decode-only batches (num_decodes is a host int, fixed for a captured graph);
    # a mixed batch's prefill blocks give the GPU enough programs.
    segments = 1
    if meta.num_decodes == S:
        segments = _num_segments(S, kv_heads, meta.block_tables.shape[1], meta.block_size)
    split = segments > 1
    if split:
        part_out = torch.empty(T, heads, segments, head_p, dtype=torch.float32, device=query.device)
        part_max = torch.empty(T, heads, segments, dtype=torch.float32, device=query.device)
        part_sum = torch.empty_like(part_max)
        grid = (S, kv_heads, segments)
    else:
        part_out = part_max = part_sum = out   # unused
        grid = (T // block_q + S, kv_heads)
    _attention_kernel[grid](
        out, query, k_cache, v_cache, meta.block_tables, meta.seq_lens, meta.query_start_loc,
        part_out, part_max, part_sum, scale * 1.4426950408889634, sliding_window or 0, S,
        query.stride(0), query.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), meta.block_tables.stride(0), heads,
        GROUP=group, GROUP_P=group_p, HEAD_DIM=head_dim, HEAD_P=head_p, BLOCK_SIZE=meta.block_size,
        BLOCK_Q=block_q, TILE=TILE, HAS_WINDOW=sliding_window is not None, SPLIT=split,
        NUM_SEGMENTS=segments, DOT_TY=tl.float32 if fp32_dot else _TL_DTYPES[query.dtype],
        PRECISION="ieee" if fp32_dot else None)   # fp32 means fp32: no tf32 rounding
    if split:
        _reduce_segments_kernel[(T, heads)](out, part_out, part_max, part_sum, out.stride(0), out.stride(1),
                                            heads, HEAD_DIM=head_dim, HEAD_P=head_p, NUM_SEGMENTS=segments)
    return out
