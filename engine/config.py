"""Engine configuration: one flat dataclass, validated once."""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass
class EngineConfig:
    """Knobs of the engine; every field can be passed to `LLM(**config)`.

    >>> cfg = EngineConfig(max_num_seqs=8, kv_cache_bytes=64 << 20)
    >>> cfg.block_size
    16
    """
    max_num_seqs: int = 64              # sequences decoded together in one step
    max_num_batched_tokens: int = 2048  # tokens (prefill + decode) in one forward
    max_model_len: int | None = None    # default: the model's max positions, capped at 8192
    block_size: int = 16                # tokens per KV block
    kv_cache_bytes: int | None = None   # KV budget in bytes; wins over the fraction
    kv_cache_fraction: float = 0.1      # else this fraction of free (GPU or host) memory
    num_kv_blocks: int | None = None    # or an exact block count (tests: force preemption)
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    dtype: str | None = None            # "float32" | "bfloat16" | "float16"; None: fp32 on CPU, bf16 on CUDA
    device: str | None = None           # None: cuda if available, else cpu
    seed: int = 0                       # seeds the sampler for requests without their own seed
    enable_jump_forward: bool = True    # append a constraint's forced tokens without sampling them
    attention_backend: str | None = None  # "torch" | "triton"; None: triton on CUDA, else torch
    enforce_eager: bool = False         # no CUDA graphs for decode steps (CUDA + triton only)

    def __post_init__(self):
        if self.block_size <= 0 or self.max_num_seqs <= 0 or self.max_num_batched_tokens <= 0:
            raise ValueError("block_size, max_num_seqs and max_num_batched_tokens must be positive")
        if not 0 < self.kv_cache_fraction <= 1:
            raise ValueError("kv_cache_fraction must be in (0, 1]")
        if self.attention_backend not in (None, "torch", "triton"):
            raise ValueError(f"attention_backend must be 'torch' or 'triton', not {self.attention_backend!r}")


def available_memory_bytes(device) -> int:
    """Free memory on `device`: CUDA free memory, else MemAvailable from /proc/meminfo."""
    import torch
    if torch.device(device).type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
