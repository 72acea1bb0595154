"""The torch reference paged attention against dense per-sequence attention.

Every cache slot that no sequence wrote holds NaN, so reading one (even under a
zero probability) shows up as NaN in the output.
"""
from __future__ import annotations

import math

import pytest
import torch

import structgen.kernels.reference as attention
from structgen.kernels import AttentionMetadata
from structgen.kernels.reference import DECODE_GROUP, paged_attention, store_kv_cache


def dense_attention(q, k, v, scale, window):
    """q [q_len, H, d] are the last q_len positions of k, v [kv_len, kvh, d]."""
    q_len, heads, _ = q.shape
    kv_len, kv_heads, _ = k.shape
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.double(), k.double()) * scale
    qpos = torch.arange(kv_len - q_len, kv_len)[:, None]
    kpos = torch.arange(kv_len)[None, :]
    visible = kpos <= qpos
    if window is not None:
        visible &= kpos > qpos - window
    scores = scores.masked_fill(~visible, -math.inf)
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v.double()).float()


@pytest.mark.parametrize("cuda_slots", [None, 48, 1 << 18], ids=["cpu-groups", "cuda-split", "cuda-one"])
@pytest.mark.parametrize("heads,kv_heads,window", [(4, 2, None), (4, 4, None), (6, 2, 5)])
def test_paged_attention_matches_dense(heads, kv_heads, window, cuda_slots, monkeypatch):
    """Decodes grouped as on CPU (groups of DECODE_GROUP) and as on CUDA (by gathered
    slots: a small budget splits them, the default takes all at once)."""
    groups = []
    if cuda_slots is not None:
        decode_groups = attention._decode_groups
        monkeypatch.setattr(attention, "CUDA_DECODE_SLOTS", cuda_slots)
        monkeypatch.setattr(attention, "_decode_groups",
                            lambda meta, cuda: groups.append(decode_groups(meta, True)) or groups[-1])
    torch.manual_seed(0)
    bs, dim, num_blocks = 4, 8, 64
    # (kv_len, q_len): decodes first, then prefills with and without cached context.
    # More decodes than one DECODE_GROUP, so several groups are attended.
    shapes = [(1, 1), (7, 1), (13, 1), (9, 1), (3, 1), (16, 1), (5, 1), (2, 1), (12, 1), (4, 1),
              (6, 6), (11, 3), (17, 17), (9, 8)]
    k_cache = torch.full((num_blocks, bs, kv_heads, dim), math.nan)
    v_cache = torch.full_like(k_cache, math.nan)
    free = torch.randperm(num_blocks).tolist()
    tables, keys, values = [], [], []
    for kv_len, _ in shapes:
        table = [free.pop() for _ in range(-(-kv_len // bs))]
        k, v = torch.randn(kv_len, kv_heads, dim), torch.randn(kv_len, kv_heads, dim)
        slots = torch.tensor([table[p // bs] * bs + p % bs for p in range(kv_len)])
        store_kv_cache(k, v, k_cache, v_cache, slots)
        tables.append(table)
        keys.append(k)
        values.append(v)
    assert sum(1 for _, q in shapes if q == 1) > DECODE_GROUP
    width = max(map(len, tables))
    q_lens = [q for _, q in shapes]
    seq_lens = [kv for kv, _ in shapes]
    meta = AttentionMetadata(
        slot_mapping=torch.full((sum(q_lens),), -1, dtype=torch.int64),
        block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        query_start_loc=torch.tensor([0] + q_lens, dtype=torch.int32).cumsum(0).int(),
        num_decodes=sum(1 for q in q_lens if q == 1),
        seq_lens_host=seq_lens, query_lens_host=q_lens, block_size=bs)
    query = torch.randn(sum(q_lens), heads, dim)
    scale = dim ** -0.5
    out = paged_attention(query, k_cache, v_cache, meta, scale, window)
    again = paged_attention(query, k_cache, v_cache, meta, scale, window)   # cached indices
    assert torch.equal(out, again)
    if cuda_slots == 48:     # split where a group's padded slots would pass 48
        assert len(groups[0]) > 1 and all(
            (hi - lo) * max(-(-n // bs) * bs for n in seq_lens[lo:hi]) <= 48 or hi - lo == 1
            for lo, hi in groups[0])
    elif cuda_slots:
        assert groups[0] == [(0, meta.num_decodes)]
    start = 0
    for (kv_len, q_len), k, v in zip(shapes, keys, values):
        expected = dense_attention(query[start:start + q_len], k, v, scale, window)
        torch.testing.assert_close(out[start:start + q_len], expected, atol=1e-5, rtol=1e-5)
        start += q_len
