"""apply_token_bitmask_inplace, Triton (interpreted without a GPU) and torch reference,
against a per-token loop over the mask bits."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen import kernels
from structgen.kernels import reference

IMPLS = [pytest.param(kernels.apply_token_bitmask_inplace, id="triton"),
         pytest.param(reference.apply_token_bitmask_inplace, id="torch")]


def expected(logits, mask, rows):
    out = logits.clone()
    words = mask.shape[1]
    for b in rows:
        for t in range(logits.shape[1]):
            if t // 32 >= words or not (int(mask[b, t // 32]) >> (t % 32)) & 1:
                out[b, t] = float("-inf")
    return out


@pytest.mark.parametrize("apply", IMPLS)
@pytest.mark.parametrize("vocab,words", [(100, 4), (4097, 129), (70, 1), (64, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matches_a_loop(apply, vocab, words, dtype):
    """Random words (the sign bit included); a mask narrower than the vocabulary
    disallows the rest; a vocabulary past a kernel block (4096)."""
    g = torch.Generator().manual_seed(vocab)
    logits = torch.randn(3, vocab, generator=g).to(dtype)
    mask = torch.randint(-2**31, 2**31 - 1, (3, words), dtype=torch.int32, generator=g)
    out = logits.clone()
    assert apply(out, mask) is None
    assert torch.equal(out, expected(logits, mask, range(3)))


@pytest.mark.parametrize("apply", IMPLS)
@pytest.mark.parametrize("indices", [[2, 0], torch.tensor([1]), []])
def test_indices_mask_only_those_rows(apply, indices):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 90, generator=g)
    mask = torch.randint(-2**31, 2**31 - 1, (4, 3), dtype=torch.int32, generator=g)
    out = logits.clone()
    apply(out, mask, indices)
    rows = [int(i) for i in indices]
    assert torch.equal(out, expected(logits, mask, rows))


@pytest.mark.parametrize("apply", IMPLS)
def test_numpy_filled_rows_sign_bit(apply):
    rows = np.zeros((1, 2), dtype=np.int32)
    rows[0, 1] |= np.int32(np.uint32(1 << 31).view(np.int32))   # token 63: the sign bit
    out = torch.zeros(1, 64)
    apply(out, torch.from_numpy(rows))
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == [63]


def test_triton_rejects_a_wrong_mask():
    with pytest.raises(ValueError, match="int32 bitmask"):
        kernels.apply_token_bitmask_inplace(torch.zeros(2, 64), torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="3 mask rows for 2"):
        kernels.apply_token_bitmask_inplace(torch.zeros(2, 64), torch.zeros(3, 2, dtype=torch.int32))
