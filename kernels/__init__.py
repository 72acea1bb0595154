"""Triton kernels, each beside a plain-torch reference of the same signature.

Nothing here imports our other packages. The paged-attention interface the engine
expects is documented (and implemented in plain torch) in `engine/attention.py`;
a Triton `store_kv_cache` / `paged_attention` pair with the same signatures will
live here.
"""
if __name__ == "kernels":  # (this folder found as a top-level package: see _give_way)
    from ._give_way import hugging_face_kernels

    hugging_face_kernels()
