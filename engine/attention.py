"""The attention backend: which `store_kv_cache` / `paged_attention` pair the layers call.

"torch" is the plain-torch reference (`structgen.kernels.reference`), the CPU path;
"triton" is `structgen.kernels` (CUDA, or anywhere under TRITON_INTERPRET=1). By default
the backend follows the device. Both keep the signatures of docs/engine.md, "Model runner
and attention"; `AttentionMetadata` is the step's shared description.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..kernels.metadata import AttentionMetadata

BACKENDS = ("torch", "triton")


@dataclass(frozen=True)
class AttentionBackend:
    name: str
    store_kv_cache: Callable
    paged_attention: Callable


def attention_backend(device, name: str | None = None) -> AttentionBackend:
    """The backend called `name`, or the device's default (triton on CUDA, else torch).

    >>> attention_backend("cpu").name
    'torch'
    """
    if name is None:
        name = "triton" if torch.device(device).type == "cuda" else "torch"
    if name == "torch":
        from ..kernels import reference as impl
    elif name == "triton":
        from .. import kernels as impl
    else:
        raise ValueError(f"attention_backend: unknown backend {name!r}; choose one of {BACKENDS}")
    return AttentionBackend(name, impl.store_kv_cache, impl.paged_attention)


__all__ = ["AttentionBackend", "AttentionMetadata", "BACKENDS", "attention_backend"]
