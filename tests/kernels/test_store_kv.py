"""store_kv_cache, Triton (interpreted without a GPU) against the torch reference."""
from __future__ import annotations

import pytest
import torch

from structgen import kernels
from structgen.kernels import reference


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kv_heads,head_dim,block_size", [(2, 64, 16), (1, 128, 32), (3, 24, 16)])
def test_matches_reference(kv_heads, head_dim, block_size, dtype):
    """Slots scattered over the blocks, some -1 (not stored); key and value are views of a
    fused projection (the layout the model passes); untouched slots keep their NaN."""
    g = torch.Generator().manual_seed(head_dim)
    T, blocks = 11, 6
    qkv = torch.randn(T, (2 + 2 * kv_heads) * head_dim, generator=g).to(dtype)
    key = qkv[:, 2 * head_dim:(2 + kv_heads) * head_dim].view(T, kv_heads, head_dim)
    value = qkv[:, (2 + kv_heads) * head_dim:].view(T, kv_heads, head_dim)
    slots = torch.randperm(blocks * block_size, generator=g)[:T]
    slots[[2, 7]] = -1
    caches = [torch.full((blocks, block_size, kv_heads, head_dim), float("nan"), dtype=dtype) for _ in range(4)]
    kernels.store_kv_cache(key, value, caches[0], caches[1], slots)
    reference.store_kv_cache(key, value, caches[2], caches[3], slots)
    for ours, ref in ((caches[0], caches[2]), (caches[1], caches[3])):
        assert torch.equal(ours.isnan(), ref.isnan())
        assert torch.equal(ours.nan_to_num(), ref.nan_to_num())
    assert caches[0].isnan().sum() == (blocks * block_size - (T - 2)) * kv_heads * head_dim


def test_shape_errors_name_the_tensors():
    k = torch.zeros(3, 2, 8)
    cache = torch.zeros(2, 16, 2, 8)
    with pytest.raises(ValueError, match="slot_mapping"):
        kernels.store_kv_cache(k, k, cache, cache, torch.zeros(4, dtype=torch.int64))
    with pytest.raises(ValueError, match="kv_heads, head_dim"):
        kernels.store_kv_cache(k, k, torch.zeros(2, 16, 1, 8), torch.zeros(2, 16, 1, 8),
                               torch.zeros(3, dtype=torch.int64))
