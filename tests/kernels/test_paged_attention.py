"""The Triton paged attention against the torch reference (on CPU under TRITON_INTERPRET=1).

Every cache slot that no sequence wrote holds NaN, so reading one (even under a zero
probability) shows up as NaN in the output.
"""
from __future__ import annotations

import dataclasses
import sys

import pytest
import torch
from oracles import paged_batch

from structgen import kernels
from structgen.kernels.reference import paged_attention as reference_attention

paged_attention = kernels.paged_attention
# Its module, for the constants and kernels that tests patch.
triton_attention = sys.modules[paged_attention.__module__]

# fp32 accumulates the same sums as the reference; fp16/bf16 round P before P @ V.
TOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def check(query, k_cache, v_cache, meta, window=None):
    """The kernel's output against the reference's on fp32 copies of the same inputs."""
    scale = query.shape[-1] ** -0.5
    out = paged_attention(query, k_cache, v_cache, meta, scale, window)
    expected = reference_attention(query.float(), k_cache.float(), v_cache.float(), meta, scale, window)
    assert out.dtype == query.dtype and out.shape == query.shape
    tol = TOL[query.dtype]
    torch.testing.assert_close(out.float(), expected, atol=tol, rtol=tol)
    return out


class Spy:
    """Wraps a Triton kernel, recording the grid of each launch."""
    def __init__(self, kernel):
        self.kernel, self.grids = kernel, []

    def __getitem__(self, grid):
        self.grids.append(grid)
        return self.kernel[grid]


@pytest.fixture
def reduce_spy(monkeypatch):
    spy = Spy(triton_attention._reduce_segments_kernel)
    monkeypatch.setattr(triton_attention, "_reduce_segments_kernel", spy)
    return spy


# (kv_len, q_len) chunks: without context, with context, across several block boundaries.
PREFILLS = [(7, 7), (20, 3), (48, 17), (33, 1)]


@pytest.mark.parametrize("block_size,heads,kv_heads,head_dim,dtype", [
    (16, 4, 4, 64, torch.float32),
    (32, 8, 2, 128, torch.float32),
    (16, 8, 1, 64, torch.float32),
    (32, 16, 2, 64, torch.float16),
    (16, 4, 1, 128, torch.bfloat16),
], ids=["gqa1-f32", "gqa4-d128-bs32-f32", "mqa8-f32", "gqa8-bs32-f16", "mqa4-d128-bf16"])
def test_mixed_batch(block_size, heads, kv_heads, head_dim, dtype, reduce_spy):
    """Decodes of lengths 1, at block boundaries and random, then prefill chunks: one launch."""
    decodes = [1, 16, 32, 48, int(torch.randint(2, 60, (1,), generator=torch.Generator().manual_seed(1)))]
    check(*paged_batch(decodes, PREFILLS, block_size, heads, kv_heads, head_dim, dtype))
    assert reduce_spy.grids == []


@pytest.mark.parametrize("window", [1, 5, 16])
def test_sliding_window(window):
    """Windows of one key, shorter than a block and of a block, over decodes and chunks."""
    check(*paged_batch([1, 9, 40], PREFILLS, 16, 4, 2, 64), window=window)


def test_prefill_only():
    check(*paged_batch([], [(16, 16), (50, 29)], 16, 8, 8, 64))


@pytest.mark.parametrize("heads,kv_heads,window,dtype", [
    (8, 1, None, torch.float32), (8, 2, 20, torch.float32), (4, 4, None, torch.bfloat16)])
def test_decode_split(heads, kv_heads, window, dtype, monkeypatch, reduce_spy):
    """A decode-only batch over a wide block table: several segments per sequence, some
    of them empty for the short sequences, reduced by the second kernel."""
    monkeypatch.setattr(triton_attention, "SEGMENT_TOKENS", triton_attention.TILE)
    batch = paged_batch([1, 16, 32, 48, 77, 130], [], 16, heads, kv_heads, 64, dtype)
    check(*batch, window=window)
    assert triton_attention._num_segments(6, kv_heads, batch[3].block_tables.shape[1], 16) > 2
    assert reduce_spy.grids == [(6, heads)]


def test_padded_decodes_give_zero(monkeypatch):
    """Sequences of length 0 (a CUDA graph's padding) read nothing and give 0, split or not,
    and leave the real sequences' rows as they were."""
    query, k_cache, v_cache, meta = paged_batch([1, 40, 70], [], 16, 8, 2, 64)
    expected = reference_attention(query, k_cache, v_cache, meta, 0.125)
    pad = dataclasses.replace(
        meta, block_tables=torch.cat([meta.block_tables, torch.zeros_like(meta.block_tables[:2])]),
        seq_lens=torch.cat([meta.seq_lens, torch.zeros(2, dtype=torch.int32)]),
        query_start_loc=torch.arange(6, dtype=torch.int32), num_decodes=5)
    padded = torch.cat([query, torch.randn(2, 8, 64)])
    for segment_tokens in (triton_attention.SEGMENT_TOKENS, triton_attention.TILE):
        monkeypatch.setattr(triton_attention, "SEGMENT_TOKENS", segment_tokens)
        out = paged_attention(padded, k_cache, v_cache, pad, 0.125)
        torch.testing.assert_close(out[:3], expected, atol=1e-5, rtol=1e-5)
        assert torch.equal(out[3:], torch.zeros(2, 8, 64))


def test_many_decodes_are_not_split(monkeypatch, reduce_spy):
    """Enough (sequence, KV head) programs already: no split whatever the table's width."""
    monkeypatch.setattr(triton_attention, "SEGMENT_TOKENS", triton_attention.TILE)
    monkeypatch.setattr(triton_attention, "SPLIT_MAX_PROGRAMS", 8)
    check(*paged_batch([1, 16, 32, 80], [], 16, 4, 2, 64))
    assert reduce_spy.grids == []


def test_decode_only_short_table_is_not_split(reduce_spy):
    check(*paged_batch([3, 16, 17], [], 32, 4, 2, 64))
    assert reduce_spy.grids == []


def test_odd_shapes():
    """Head dim 80 (padded to 128), 3 query heads per KV head (padded to 4), and a query
    that is a strided slice of a wider tensor, as the model's fused q/k is."""
    query, k_cache, v_cache, meta = paged_batch([5, 32], [(19, 6)], 16, 6, 2, 80)
    wide = torch.randn(query.shape[0], 8, 80)
    wide[:, :6] = query
    check(wide[:, :6], k_cache, v_cache, meta)


def test_package_exports_the_function():
    """`structgen.kernels.paged_attention` stays the function once its module is imported."""
    assert kernels.paged_attention is paged_attention and callable(paged_attention)


def test_rejects_bad_inputs():
    query, k_cache, v_cache, meta = paged_batch([4], [(5, 3)], 16, 4, 2, 64)
    with pytest.raises(ValueError, match="kv heads of dim"):
        paged_attention(query[..., :32], k_cache, v_cache, meta, 0.1)
    with pytest.raises(ValueError, match="kv heads"):
        paged_attention(query[:, :3], k_cache, v_cache, meta, 0.1)
    with pytest.raises(ValueError, match="share one of"):
        paged_attention(query.half(), k_cache, v_cache, meta, 0.1)
    meta.block_tables = meta.block_tables.long()
    with pytest.raises(ValueError, match="meta.block_tables must be int32"):
        paged_attention(query, k_cache, v_cache, meta, 0.1)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2), (16, 2), (8, 1)])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_random_batches(dtype, block_size, heads, kv_heads, head_dim, monkeypatch):
    """Random lengths, each batch mixed and decode-only (split), with and without a window."""
    gen = torch.Generator().manual_seed(block_size + heads + kv_heads + head_dim)
    decodes = torch.randint(1, 300, (6,), generator=gen).tolist()
    prefills = []
    for _ in range(4):
        kv_len = int(torch.randint(1, 200, (1,), generator=gen))
        prefills.append((kv_len, int(torch.randint(1, kv_len + 1, (1,), generator=gen))))
    monkeypatch.setattr(triton_attention, "SEGMENT_TOKENS", 64)
    for window in (None, 37):
        check(*paged_batch(decodes, prefills, block_size, heads, kv_heads, head_dim, dtype), window=window)
        check(*paged_batch(decodes, [], block_size, heads, kv_heads, head_dim, dtype), window=window)
