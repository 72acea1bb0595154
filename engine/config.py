"""Engine configuration: one flat dataclass, validated once."""
from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, fields


@dataclass
class SpeculativeConfig:
    """Speculative decoding, in vLLM's names: `LLM(speculative_config={...})`.

    `method="ngram"` drafts by prompt lookup: the longest suffix of a sequence's tokens,
    between `prompt_lookup_min` and `prompt_lookup_max` tokens long, that occurred earlier
    in its prompt or output proposes the up to `num_speculative_tokens` tokens that followed
    it (one of the two bounds alone sets both; neither: 5, as vLLM). `method="draft_model"`
    drafts with a smaller model of the same vocabulary, `model` (a folder, a .gguf file or
    "smollm2"; see engine/draft_model.py): it proposes `num_speculative_tokens` tokens per
    step, autoregressively, from its own KV cache, of `num_kv_blocks` blocks (default: as
    many as the target's; named like EngineConfig.num_kv_blocks).

    >>> SpeculativeConfig.from_dict({"method": "ngram", "num_speculative_tokens": 4,
    ...                              "prompt_lookup_max": 3}).prompt_lookup_min
    3
    """
    method: str
    num_speculative_tokens: int
    prompt_lookup_max: int | None = None
    prompt_lookup_min: int | None = None
    model: str | None = None            # draft_model only: the draft model's folder / .gguf
    num_kv_blocks: int | None = None    # draft_model only: its KV cache's blocks (None: the target's)

    @classmethod
    def from_dict(cls, d: dict) -> SpeculativeConfig:
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"speculative_config: unknown key(s) {unknown}; known keys: {known}")
        for key in ("method", "num_speculative_tokens"):
            if key not in d:
                raise ValueError(f"speculative_config.{key} is required")
        return cls(**d)

    def __post_init__(self):
        if self.method not in ("ngram", "draft_model"):
            raise ValueError(f"speculative_config.method must be 'ngram' or 'draft_model', not {self.method!r}")
        _positive("num_speculative_tokens", self.num_speculative_tokens)
        if self.method == "draft_model":
            if self.model is None:
                raise ValueError("speculative_config.model (the draft model's folder) is required "
                                 "for method='draft_model'")
            for key in ("prompt_lookup_max", "prompt_lookup_min"):
                if getattr(self, key) is not None:
                    raise ValueError(f"speculative_config.{key} is for method='ngram', not 'draft_model'")
            if self.num_kv_blocks is not None:     # (the lower bound needs max_model_len: LLM checks it)
                _positive("num_kv_blocks", self.num_kv_blocks)
            return
        for key in ("model", "num_kv_blocks"):
            if getattr(self, key) is not None:
                raise ValueError(f"speculative_config.{key} is for method='draft_model', not 'ngram'")
        if self.prompt_lookup_max is None and self.prompt_lookup_min is None:
            self.prompt_lookup_max = self.prompt_lookup_min = 5
        elif self.prompt_lookup_min is None:
            self.prompt_lookup_min = self.prompt_lookup_max
        elif self.prompt_lookup_max is None:
            self.prompt_lookup_max = self.prompt_lookup_min
        _positive("prompt_lookup_min", self.prompt_lookup_min)
        _positive("prompt_lookup_max", self.prompt_lookup_max)
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError(f"speculative_config.prompt_lookup_min={self.prompt_lookup_min} must be "
                             f"<= prompt_lookup_max={self.prompt_lookup_max}")


def _positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"speculative_config.{name} must be an integer >= 1, not {value!r}")


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
    speculative_config: SpeculativeConfig | dict | None = None   # a dict is read by SpeculativeConfig.from_dict
    tensor_parallel_size: int = 1       # ranks (processes; GPUs on CUDA) one model is split over
    distributed_timeout_s: float = 300.0  # a collective not done by then fails the engine (tensor parallel)

    def __post_init__(self):
        if self.block_size <= 0 or self.max_num_seqs <= 0 or self.max_num_batched_tokens <= 0:
            raise ValueError("block_size, max_num_seqs and max_num_batched_tokens must be positive")
        if not 0 < self.kv_cache_fraction <= 1:
            raise ValueError("kv_cache_fraction must be in (0, 1]")
        if self.attention_backend not in (None, "torch", "triton"):
            raise ValueError(f"attention_backend must be 'torch' or 'triton', not {self.attention_backend!r}")
        tp = self.tensor_parallel_size
        if isinstance(tp, bool) or not isinstance(tp, numbers.Integral) or tp < 1:
            raise ValueError(f"tensor_parallel_size must be an integer >= 1, not {tp!r}")
        if not self.distributed_timeout_s > 0:
            raise ValueError(f"distributed_timeout_s must be > 0, not {self.distributed_timeout_s!r}")
        if isinstance(self.speculative_config, dict):
            self.speculative_config = SpeculativeConfig.from_dict(self.speculative_config)
        elif not isinstance(self.speculative_config, (SpeculativeConfig, type(None))):
            raise ValueError("speculative_config must be a dict or a SpeculativeConfig, not "
                             f"{type(self.speculative_config).__name__}")


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
