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

from ..kernels import reference
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
        store = store_kv_cache_cpu if torch.device(device).type == "cpu" else reference.store_kv_cache
        return AttentionBackend(name, store, reference.paged_attention)
    if name == "triton":
        from .. import kernels
        return AttentionBackend(name, kernels.store_kv_cache, kernels.paged_attention)
    raise ValueError(f"attention_backend: unknown backend {name!r}; choose one of {BACKENDS}")


def store_kv_cache_cpu(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor,
                       v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """The torch reference's `store_kv_cache`, with a lone token (batch-1 decoding) copied
    straight into its slot: no index tensor, no check of the whole mapping. CPU tensors
    only: reading the slot is free there, a device sync elsewhere."""
    if key.shape[0] != 1:
        return reference.store_kv_cache(key, value, k_cache, v_cache, slot_mapping)
    slot = int(slot_mapping)
    if slot >= 0:                       # -1: do not store
        k_cache.view(-1, key.shape[1], key.shape[2])[slot] = key[0]
        v_cache.view(-1, key.shape[1], key.shape[2])[slot] = value[0]


__all__ = ["AttentionBackend", "AttentionMetadata", "BACKENDS", "attention_backend",
           "store_kv_cache_cpu"]
