"""Triton kernels, each beside a plain-torch reference of the same signature.

Nothing here imports our other packages. The paged-attention interface the engine
expects is documented (and implemented in plain torch) in `engine/attention.py`;
a Triton `store_kv_cache` / `paged_attention` pair with the same signatures will
live here.
"""
