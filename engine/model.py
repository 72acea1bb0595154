"""Llama-family decoder (Llama 2/3, SmolLM2, Qwen2, Mistral) over the paged KV cache.

One module covers the family; the differences are config flags: qkv bias (Qwen2),
sliding window (Mistral, Qwen2 sliding layers), rope scaling (Llama 3), tied
embeddings (SmolLM2, small Qwen2). The numerics follow transformers' implementation
step by step (RMSNorm in fp32, rotate-half rope, residual order) so greedy output
is token-identical in fp32.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .attention import AttentionMetadata
from .parallel import SINGLE, Shard

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")


@dataclass
class ModelConfig:
    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    sliding_windows: list          # per layer: None or a window length
    rope: dict                     # rope_theta, rope_type and its parameters
    eos_token_ids: list
    hf_config: object = None

    @classmethod
    def from_folder(cls, folder: str | Path) -> ModelConfig:
        """Read a Hugging Face config.json (+ generation_config.json for EOS ids)."""
        from transformers import AutoConfig
        folder = Path(folder)
        hf = AutoConfig.from_pretrained(folder)
        return cls.from_hf(hf, folder)

    @classmethod
    def from_hf(cls, hf, folder: Path | None = None) -> ModelConfig:
        arch = (getattr(hf, "architectures", None) or [""])[0]
        if arch not in SUPPORTED_ARCHITECTURES:
            mt = getattr(hf, "model_type", "")
            arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                    "mistral": "MistralForCausalLM"}.get(mt, arch)
        if arch not in SUPPORTED_ARCHITECTURES:
            raise ValueError(f"unsupported architecture {arch!r}; supported: {SUPPORTED_ARCHITECTURES}")
        heads = hf.num_attention_heads
        head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // heads
        # transformers >= 5 keeps rope settings in `rope_parameters`; older in rope_theta/rope_scaling.
        rope = dict(getattr(hf, "rope_parameters", None) or {})
        if "rope_theta" not in rope:
            rope["rope_theta"] = getattr(hf, "rope_theta", 10000.0)
        scaling = getattr(hf, "rope_scaling", None)
        if scaling and rope.get("rope_type", "default") == "default":
            rope.update(scaling)
            rope["rope_type"] = scaling.get("rope_type", scaling.get("type", "default"))
        rope.setdefault("rope_type", "default")
        qkv_bias = arch == "Qwen2ForCausalLM" or bool(getattr(hf, "attention_bias", False))
        o_bias = arch == "LlamaForCausalLM" and bool(getattr(hf, "attention_bias", False))
        window = getattr(hf, "sliding_window", None)
        layer_types = getattr(hf, "layer_types", None)
        if arch == "MistralForCausalLM":
            windows = [window] * hf.num_hidden_layers
        elif layer_types is not None:
            windows = [window if t == "sliding_attention" else None for t in layer_types]
        else:
            windows = [None] * hf.num_hidden_layers
        eos = getattr(hf, "eos_token_id", None)
        if folder is not None and (folder / "generation_config.json").is_file():
            gen = json.loads((folder / "generation_config.json").read_text())
            eos = gen.get("eos_token_id", eos)
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        return cls(
            architecture=arch, vocab_size=hf.vocab_size, hidden_size=hf.hidden_size,
            intermediate_size=hf.intermediate_size, num_layers=hf.num_hidden_layers,
            num_heads=heads, num_kv_heads=getattr(hf, "num_key_value_heads", None) or heads,
            head_dim=head_dim, rms_norm_eps=hf.rms_norm_eps,
            max_position_embeddings=hf.max_position_embeddings,
            tie_word_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
            qkv_bias=qkv_bias, o_bias=o_bias, mlp_bias=bool(getattr(hf, "mlp_bias", False)),
            sliding_windows=windows, rope=rope, eos_token_ids=eos, hf_config=hf)


def rope_inv_freq(cfg: ModelConfig) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and the cos/sin scaling factor for the configured rope type."""
    rope, dim = cfg.rope, cfg.head_dim
    base = float(rope["rope_theta"])
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    kind = rope.get("rope_type", "default")
    if kind == "default":
        return inv_freq, 1.0
    if kind == "linear":
        return inv_freq / rope["factor"], 1.0
    if kind == "llama3":
        # Llama 3.1: long wavelengths slowed by `factor`, short ones kept, a smooth ramp between.
        factor, lo, hi = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        old_len = rope["original_max_position_embeddings"]
        lo_wavelen, hi_wavelen = old_len / lo, old_len / hi
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > lo_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < hi_wavelen) & ~(wavelen > lo_wavelen)
        return torch.where(medium, smoothed, scaled), 1.0
    # Other schemes (yarn, longrope, dynamic...): transformers' own formulas.
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    if kind not in ROPE_INIT_FUNCTIONS or cfg.hf_config is None:
        raise ValueError(f"unsupported rope type {kind!r}")
    inv, factor = ROPE_INIT_FUNCTIONS[kind](cfg.hf_config, "cpu")
    return inv.float(), float(factor)


def onednn_available(weight: torch.Tensor) -> bool:
    # fp32 only: that is the CPU dtype we serve and measured (AVX2 has no native bf16).
    return (weight.device.type == "cpu" and weight.dtype == torch.float32
            and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


class Linear(nn.Linear):
    """nn.Linear that, once `pack()`ed on CPU, multiplies by a oneDNN pre-packed copy
    of its weight. At decode batch sizes MKL's sgemm (what F.linear uses) streams the
    weight far below memory bandwidth; the packed oneDNN path does not, the LM head
    gaining most. Still fp32 throughout; only the summation order differs (as it does
    between batch sizes in sgemm), and each output row no longer depends on the other
    rows of the batch (of 2 to SGEMM_ROWS - 1 rows: see below). The packed copy costs
    the weight's size again in memory. No better at 8-64 rows: packing for a
    given batch size, MKL's packed sgemm, or splitting the LM head into column chunks.

    A single row (batch-1 decode) still goes to F.linear: there MKL streams the weight
    faster than the packed path, the more so with the weight stored column-major (the
    same values, its transpose contiguous: `pack(column_major=True)`), which turns the
    product into a sum of weight rows scaled by the input (docs/engine.md, "The model").
    So do `SGEMM_ROWS` rows or more (a prefill chunk): compute-bound, where MKL's sgemm
    beats the packed path.
    """
    packed = None
    SGEMM_ROWS = 128

    def pack(self, column_major: bool = True) -> None:
        """(Re)build the packed copy from `weight`, and with `column_major` re-store
        `weight` transposed in memory; call again if the weight changes."""
        w = self.weight.detach()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(w)
        if column_major and w.is_contiguous():
            self.weight = nn.Parameter(w.t().contiguous().t(), requires_grad=self.weight.requires_grad)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        if self.packed is None or rows == 1 or rows >= self.SGEMM_ROWS:
            return F.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    # Called straight through to forward, skipping nn.Module.__call__'s hook machinery,
    # which a decode step pays hundreds of times (docs/engine.md, "The model"). No hooks
    # are ever registered on these modules; the same line ends each class below.
    __call__ = forward


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            # The lines below with two temporaries instead of five (pow(2) is x * x, and
            # w * y == y * w): the same bits. On CPU F.rms_norm (not fused there) and the
            # out-of-place lines take ~3x longer on a prefill: each fresh buffer is new pages.
            # On CPU the mean is the sum divided in place, which is how CPU torch computes it,
            # minus the divisor's conversion to a tensor: the same bits, a little less per
            # call. (CUDA's mean multiplies by 1/n instead: it keeps mean.)
            sq = torch.mul(x, x)
            inv = sq.mean(-1, keepdim=True) if x.is_cuda else sq.sum(-1, keepdim=True).div_(x.shape[-1])
            inv = inv.add_(self.eps).rsqrt_()
            return torch.mul(x, inv).mul_(self.weight)
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)

    __call__ = forward


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """transformers' `x * cos + rotate_half(x) * sin`, bit for bit, in four kernels:
    rotate_half(x) = [-x2, x1] and roll(x) = [x2, x1], so the sign lives in
    signed_sin = [-sin, sin] (negation is exact). Two temporaries, not four (see RMSNorm)."""
    return torch.mul(x, cos).add_(torch.roll(x, x.shape[-1] // 2, dims=-1).mul_(signed_sin))


class Attention(nn.Module):
    """This rank's heads (all of them on one device): QKV column-parallel, the output
    projection row-parallel, summed across ranks (parallel.py)."""

    def __init__(self, cfg: ModelConfig, layer: int, shard: Shard = SINGLE):
        super().__init__()
        self.shard = shard
        self.num_heads = shard.part(cfg.num_heads, "attention heads")
        self.num_kv_heads = shard.part(cfg.num_kv_heads, "KV heads")
        self.head_dim = cfg.head_dim
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        # q, k and v in one matmul: fewer, larger kernels are what a CPU wants.
        self.qkv_proj = Linear(cfg.hidden_size, self.q_size + 2 * self.kv_size, bias=cfg.qkv_bias)
        self.o_proj = Linear(self.q_size, cfg.hidden_size, bias=cfg.o_bias)
        self.scale = self.head_dim ** -0.5
        self.sliding_window = cfg.sliding_windows[layer]
        self.k_cache = self.v_cache = self.backend = None   # set by the model runner

    def forward(self, x, cos, signed_sin, meta: AttentionMetadata):
        T = x.shape[0]
        qkv = self.qkv_proj(x)
        # q and k side by side take the rotation in one go.
        qk = qkv[:, :self.q_size + self.kv_size].view(T, self.num_heads + self.num_kv_heads,
                                                       self.head_dim)
        qk = apply_rope(qk, cos, signed_sin)
        q, k = qk[:, :self.num_heads], qk[:, self.num_heads:]
        v = qkv[:, self.q_size + self.kv_size:].view(T, self.num_kv_heads, self.head_dim)
        self.backend.store_kv_cache(k, v, self.k_cache, self.v_cache, meta.slot_mapping)
        o = self.backend.paged_attention(q, self.k_cache, self.v_cache, meta, self.scale,
                                         self.sliding_window)
        return self.shard.all_reduce(self.o_proj(o.reshape(T, self.q_size)))

    __call__ = forward


class MLP(nn.Module):
    """gate/up column-parallel, down row-parallel (parallel.py)."""

    def __init__(self, cfg: ModelConfig, shard: Shard = SINGLE):
        super().__init__()
        self.shard = shard
        self.intermediate = shard.part(cfg.intermediate_size, "intermediate size")
        self.gate_up_proj = Linear(cfg.hidden_size, 2 * self.intermediate, bias=cfg.mlp_bias)
        self.down_proj = Linear(self.intermediate, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x):
        gate_up = self.gate_up_proj(x)
        gate, up = gate_up[:, :self.intermediate], gate_up[:, self.intermediate:]
        # In place, into the projection's own output: no new [T, intermediate] buffer (the
        # down projection takes the strided half as it is).
        return self.shard.all_reduce(self.down_proj(F.silu(gate, inplace=True).mul_(up)))

    __call__ = forward


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, shard: Shard = SINGLE):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg, layer, shard)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg, shard)

    def forward(self, h, cos, signed_sin, meta):
        # Residuals added in place into the sublayer's fresh output (a + h == h + a exactly):
        # no new [T, hidden] buffer per add.
        h = self.self_attn(self.input_layernorm(h), cos, signed_sin, meta).add_(h)
        return self.mlp(self.post_attention_layernorm(h)).add_(h)

    __call__ = forward


class CausalLM(nn.Module):
    """The decoder stack plus LM head. `forward` works on a flattened batch of tokens.

    >>> cfg = ModelConfig.from_folder(folder)           # doctest: +SKIP
    >>> model = load_model(folder, torch.float32, "cpu")  # doctest: +SKIP
    """

    def __init__(self, cfg: ModelConfig, shard: Shard = SINGLE):
        super().__init__()
        self.config = cfg
        self.shard = shard
        self.num_kv_heads = shard.part(cfg.num_kv_heads, "KV heads")   # in this rank's cache
        vocab = shard.vocab_part(cfg.vocab_size)
        self.embed_tokens = nn.Embedding(vocab, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i, shard) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = Linear(cfg.hidden_size, vocab, bias=False)
        self.cos_cache = self.signed_sin_cache = None   # [positions, head_dim]; see apply_rope

    def build_rope_cache(self, max_positions: int) -> None:
        inv_freq, factor = rope_inv_freq(self.config)
        pos = torch.arange(max_positions, dtype=torch.float32)
        freqs = torch.outer(pos, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        dtype, device = self.embed_tokens.weight.dtype, self.embed_tokens.weight.device
        self.cos_cache = (emb.cos() * factor).to(device=device, dtype=dtype)
        sin = emb.sin() * factor
        sin[:, :sin.shape[1] // 2].neg_()
        self.signed_sin_cache = sin.to(device=device, dtype=dtype)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        """Hidden states [T, hidden] for a flattened batch of T new tokens."""
        h = self.shard.embed(self.embed_tokens, input_ids, self.config.vocab_size)
        cos = self.cos_cache[positions].unsqueeze(1)
        signed_sin = self.signed_sin_cache[positions].unsqueeze(1)
        for layer in self.layers:
            h = layer(h, cos, signed_sin, meta)
        return self.norm(h)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.shard.gather_logits(self.lm_head(hidden), self.config.vocab_size)

    @torch.inference_mode()
    def pack_linears(self) -> None:
        """Pre-pack every projection and the LM head for oneDNN (CPU only; else a no-op).
        Weights with at least as many outputs as inputs (q/k/v, o, gate/up, the LM head)
        are stored column-major, the down projection's row-major: the layouts whose one-row
        products stream each fastest (docs/engine.md, "The model"). A tied
        embedding shares the LM head's column-major weight: looking up a token's row then
        reads strided memory, a few microseconds per token."""
        if not onednn_available(self.lm_head.weight):
            return
        tied = self.lm_head.weight is self.embed_tokens.weight
        for m in self.modules():
            if isinstance(m, Linear):
                m.pack(column_major=m.out_features >= m.in_features)
        if tied:
            self.embed_tokens.weight = self.lm_head.weight


def _shard_weight(name: str, tensor: torch.Tensor, shard: Shard) -> torch.Tensor:
    """This rank's part of a weight that is not fused: the vocabulary's rows, a
    row-parallel projection's input columns; a row-parallel bias is added once, on rank 0
    (the all-reduce would add it `size` times); norms whole."""
    if shard.size == 1:
        return tensor
    if name in ("embed_tokens.weight", "lm_head.weight"):
        return shard.rows(tensor)
    if name.endswith(("o_proj.weight", "down_proj.weight")):
        return shard.rows(tensor, dim=1)
    if name.endswith(("o_proj.bias", "down_proj.bias")):
        return tensor if shard.rank == 0 else torch.zeros_like(tensor)
    return tensor


def _safetensors_weights(folder: Path):
    """(name, tensor) for every weight in the folder's safetensors files."""
    from safetensors import safe_open
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no .safetensors files in {folder}")
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                yield name, f.get_tensor(name)


@torch.inference_mode()
def load_model(folder: str | Path, dtype: torch.dtype = torch.float32, device="cpu",
               cfg: ModelConfig | None = None, weights=None, shard: Shard = SINGLE) -> CausalLM:
    """Build the model for a Hugging Face folder and load its safetensors weights, or
    `weights`: (name, tensor) pairs in transformers' naming (a model built in memory).
    With a `shard` of a tensor-parallel group, only that rank's slices (parallel.py)."""
    folder = Path(folder)
    cfg = cfg or ModelConfig.from_folder(folder)
    with torch.device("meta"):
        model = CausalLM(cfg, shard)
    model = model.to_empty(device=device).to(dtype)
    params = dict(model.named_parameters())
    q, kv, inter = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim, cfg.intermediate_size
    # Fused parameters: (our name, row offset) for each of transformers' names.
    fused = {"q_proj": ("qkv_proj", 0), "k_proj": ("qkv_proj", q), "v_proj": ("qkv_proj", q + kv),
             "gate_proj": ("gate_up_proj", 0), "up_proj": ("gate_up_proj", inter)}
    loaded = set()
    for name, tensor in weights if weights is not None else _safetensors_weights(folder):
        if "rotary_emb" in name:
            continue
        ours = name[len("model."):] if name.startswith("model.") else name
        parts = ours.split(".")
        if len(parts) >= 2 and parts[-2] in fused:
            target, offset = fused[parts[-2]]
            ours = ".".join(parts[:-2] + [target, parts[-1]])
            param = params[ours]
            tensor, offset = shard.rows(tensor), offset // shard.size
            param[offset:offset + tensor.shape[0]].copy_(tensor)
            loaded.add((ours, offset))
            continue
        if ours not in params:
            raise KeyError(f"unexpected weight {name!r}")
        params[ours].copy_(_shard_weight(ours, tensor, shard))
        loaded.add((ours, 0))
    if ("lm_head.weight", 0) not in loaded:
        if not cfg.tie_word_embeddings:
            raise KeyError("lm_head.weight missing and embeddings are not tied")
        model.lm_head.weight = model.embed_tokens.weight
        loaded.add(("lm_head.weight", 0))
    missing = [n for n in params if not any(got[0] == n for got in loaded)]
    if missing:
        raise KeyError(f"weights missing from {folder}: {missing[:5]}")
    model.build_rope_cache(cfg.max_position_embeddings)
    model.pack_linears()
    return model.eval()
