"""Triton kernels, each beside a plain-torch reference of the same signature.

    store_kv_cache(key, value, k_cache, v_cache, slot_mapping) -> None
    paged_attention(query, k_cache, v_cache, meta, scale, sliding_window=None) -> out
    apply_token_bitmask_inplace(logits, bitmask, indices=None) -> None

`structgen.kernels.<name>` is the Triton version; `structgen.kernels.reference.<name>` is
the torch one. Triton loads on first use of a kernel, so `AttentionMetadata` and the
references import without it. Nothing here imports our other packages.
"""
if __name__ == "kernels":  # (this folder found as a top-level package: see _give_way)
    from ._give_way import hugging_face_kernels

    hugging_face_kernels()
else:
    from .metadata import AttentionMetadata

    # name -> module (module names differ from the functions', which they would shadow)
    _KERNELS = {"store_kv_cache": "store_kv", "paged_attention": "attention",
                "apply_token_bitmask_inplace": "bitmask"}

    def __getattr__(name: str):
        if name in _KERNELS:
            import importlib
            fn = getattr(importlib.import_module(f".{_KERNELS[name]}", __name__), name)
            globals()[name] = fn
            return fn
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    __all__ = ["AttentionMetadata", *_KERNELS]
