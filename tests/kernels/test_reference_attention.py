"""The torch reference paged attention against dense per-sequence attention.

Every cache slot that no sequence wrote holds NaN, so reading one (even under a
zero probability) shows up as NaN in the output.
"""
from __future__ import annotations

import math

import pytest
import torch
from oracles import cached_kv, paged_batch

import structgen.kernels.reference as attention
from structgen.kernels.reference import DECODE_GROUP, paged_attention


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
    bs, dim = 4, 8
    # Decodes first, then prefills (kv_len, q_len) with and without cached context.
    # More decodes than one DECODE_GROUP, so several groups are attended.
    decodes = [1, 7, 13, 9, 3, 16, 5, 2, 12, 4]
    prefills = [(6, 6), (11, 3), (17, 17), (9, 8)]
    assert len(decodes) > DECODE_GROUP
    query, k_cache, v_cache, meta = paged_batch(decodes, prefills, bs, heads, kv_heads, dim)
    seq_lens, shapes = meta.seq_lens_host, [(n, 1) for n in decodes] + prefills
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
    for s, (_, q_len) in enumerate(shapes):
        k, v = cached_kv(k_cache, meta, s), cached_kv(v_cache, meta, s)
        expected = dense_attention(query[start:start + q_len], k, v, scale, window)
        torch.testing.assert_close(out[start:start + q_len], expected, atol=1e-5, rtol=1e-5)
        start += q_len


@pytest.mark.parametrize("decodes,prefills", [([13], []), ([16], []), ([5], [(9, 4)]),
                                              ([1, 7, 13, 9, 3, 16, 5, 2, 11], [])],
                         ids=["alone", "full-blocks", "with-prefill", "last-group-of-one"])
@pytest.mark.parametrize("window", [None, 5])
def test_lone_decode_matches_dense(decodes, prefills, window):
    """A decode attended on its own (batch-1 decoding, or the last CPU group of one) reads
    only its written slots (the others hold NaN) and agrees with dense attention."""
    bs, dim, heads, kv_heads = 4, 8, 6, 2
    query, k_cache, v_cache, meta = paged_batch(decodes, prefills, bs, heads, kv_heads, dim)
    out = paged_attention(query, k_cache, v_cache, meta, dim ** -0.5, window)
    start = 0
    for s, (_, q_len) in enumerate([(n, 1) for n in decodes] + prefills):
        k, v = cached_kv(k_cache, meta, s), cached_kv(v_cache, meta, s)
        expected = dense_attention(query[start:start + q_len], k, v, dim ** -0.5, window)
        torch.testing.assert_close(out[start:start + q_len], expected, atol=1e-5, rtol=1e-5)
        start += q_len


@pytest.mark.parametrize("decodes,prefills", [([13], []), ([], [(17, 17)]), ([], [(11, 3)])],
                         ids=["lone-decode", "prefill", "prefill-after-context"])
@pytest.mark.parametrize("window", [None, 5])
def test_consecutive_blocks_read_as_a_view(decodes, prefills, window, monkeypatch):
    """A sequence whose blocks are consecutive in the cache (as a lone sequence's usually
    are) is read as a view, never gathered, and agrees with dense attention; its last
    block's unwritten slots (NaN) are never read."""
    bs, dim, heads, kv_heads = 4, 8, 6, 2
    query, k_cache, v_cache, meta = paged_batch(decodes, prefills, bs, heads, kv_heads, dim)
    kv_len = meta.seq_lens_host[0]
    n = -(-kv_len // bs)
    old = meta.block_tables[0, :n].long()
    new = torch.arange(2, 2 + n)                    # consecutive, not from block 0
    for cache in (k_cache, v_cache):
        blocks = cache[old].clone()
        cache.fill_(float("nan"))
        cache[new] = blocks
    meta.block_tables[0, :n] = new.int()
    if not (decodes and window):            # a windowed decode takes the padded, gathered path
        monkeypatch.setattr(attention, "_gather_blocks", lambda *a: pytest.fail("gathered"))
    out = paged_attention(query, k_cache, v_cache, meta, dim ** -0.5, window)
    k, v = cached_kv(k_cache, meta, 0), cached_kv(v_cache, meta, 0)
    expected = dense_attention(query, k, v, dim ** -0.5, window)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
