"""The GPU path in one short run on one GPU (device time is scarce: prepare, run once).

    python benchmarks/gpu_check.py --tokenizer DIR        # on the GPU machine, < 8 min on an H100
    python benchmarks/gpu_check.py --device cpu --quick   # the dry run CI executes (Triton interpreted)
    python benchmarks/gpu_check.py --prepare DIR          # here: DIR/tokenizer and DIR/wheels to carry

No weight files: each model is built from a real config (SmolLM2-135M, Qwen2.5-0.5B,
Llama-3.2-1B and Llama-3-8B shapes) with seeded random weights, and transformers gets the
same weights. Prompts are tokenized with SmolLM2's tokenizer (its ids are valid in every
vocabulary here). Needs on the machine, beyond PyTorch, Triton and transformers: numpy, lark,
pydantic (pydantic-core, annotated-types, typing-inspection), jsonschema (attrs,
jsonschema-specifications, referencing, rpds-py), safetensors, tokenizers, tqdm, and for
tests/oracles.py pytest and hypothesis (with their dependencies); `--prepare` downloads them
as wheels (`pip install --no-deps DIR/wheels/*` there).

Tables, in order:
1. kernels against their torch references at real shapes (max abs error, pass/fail);
2. paged decode attention: K/V bytes read per second as a fraction of the card's memory
   bandwidth, contexts 1k-32k, batch 1-256, and time against SDPA on contiguous K/V;
3. bitmask apply at 64 and 4096 rows x 128k vocabulary;
4. greedy parity in fp32 (TF32 off) with transformers on the random-weight models;
5. engine output tokens/s against transformers' generate, batch 1/16/64/256, mixed
   output lengths, CUDA graphs on and off;
6. JSON-Schema-guided against unguided throughput at batch 64, every output validated;
7. with `--tp`, tensor parallel over 2, 4, 8 GPUs (as many as are visible; skipped with
   one): greedy parity in fp32 with tensor_parallel_size=1, and output tokens/s in bf16
   against one GPU, side by side. `--device cpu --quick --tp` runs it on 2 gloo ranks.
Exits non-zero if a kernel, parity or validity check fails. Parts past the time budget
(`--budget`) are reported as skipped, never dropped silently.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if "--device" in sys.argv and "cpu" in sys.argv[sys.argv.index("--device") + 1:][:1]:
    os.environ.setdefault("TRITON_INTERPRET", "1")    # before any kernel is defined

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]     # engine_throughput.py, oracles.py
from engine_throughput import make_prompts, run_engine, run_hf  # noqa: E402
from oracles import PROMPTS, hf_greedy, paged_batch  # noqa: E402

from structgen import kernels  # noqa: E402
from structgen.engine import LLM, SamplingParams  # noqa: E402
from structgen.kernels import AttentionMetadata, reference  # noqa: E402

WHEELS = ["numpy", "lark", "pydantic", "pydantic-core", "annotated-types", "typing-inspection",
          "typing-extensions", "jsonschema", "attrs", "jsonschema-specifications", "referencing",
          "rpds-py", "safetensors", "tokenizers", "tqdm", "pytest", "pluggy", "iniconfig", "packaging",
          "hypothesis", "sortedcontainers"]
ROPE3 = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 8192}
# (transformers config class, fields, rope theta, rope scaling) of the real models.
MODELS = {
    "SmolLM2-135M": ("LlamaConfig", dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                         num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
                                         max_position_embeddings=8192, rms_norm_eps=1e-5,
                                         tie_word_embeddings=True), 100000.0, None),
    "Qwen2.5-0.5B": ("Qwen2Config", dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                         num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                                         max_position_embeddings=32768, rms_norm_eps=1e-6,
                                         tie_word_embeddings=True), 1000000.0, None),
    "Llama-3.2-1B": ("LlamaConfig", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                                         num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                                         max_position_embeddings=131072, rms_norm_eps=1e-5,
                                         tie_word_embeddings=True), 500000.0, ROPE3),
    "Llama-3-8B": ("LlamaConfig", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                       num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                                       max_position_embeddings=8192, rms_norm_eps=1e-5,
                                       tie_word_embeddings=False), 500000.0, None),
}
# Nominal memory bandwidth (bytes/s) by device name; the measured copy rate is shown too.
# Bounded (every document within ~80 tokens), so that random weights finish their outputs.
SCHEMA = {"type": "object",
          "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 9999},
                         "name": {"type": "string", "maxLength": 12},
                         "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
                         "ok": {"type": "boolean"}},
          "required": ["id", "name", "ok"], "additionalProperties": False}
NOMINAL_BW = {"H100 SXM": 3.35e12, "H100 80GB HBM3": 3.35e12, "H100 PCIe": 2.0e12, "H100 NVL": 3.9e12,
              "H200": 4.8e12, "A100-SXM4-80GB": 2.04e12, "A100-SXM4-40GB": 1.56e12, "L40S": 0.864e12}


class Run:
    def __init__(self, args):
        self.device, self.quick, self.t0, self.budget = args.device, args.quick, time.perf_counter(), args.budget
        self.failures = 0

    def over_budget(self) -> bool:
        return time.perf_counter() - self.t0 > self.budget

    def sync(self):
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()

    def time(self, fn, iters: int = 20) -> float:
        """Median seconds of fn() after a warm-up call."""
        fn()
        times = []
        for _ in range(1 if self.quick else iters):
            self.sync()
            t = time.perf_counter()
            fn()
            self.sync()
            times.append(time.perf_counter() - t)
        return float(np.median(times))


def table(title, header, rows):
    print(f"\n### {title}\n\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")
    sys.stdout.flush()


# -- 1. kernels ------------------------------------------------------------------------------
def part_kernels(run: Run):
    rows = []
    # decodes' contexts; prefill chunks (context + chunk, chunk), with and without cached context
    decodes, prefills = ([1, 17, 64], [(5, 5), (27, 7)]) if run.quick else \
        ([1, 16, 17, 1000, 4097, 8192], [(300, 300), (1577, 77), (4097, 1)])
    tol = {torch.float32: 2e-3, torch.bfloat16: 3e-2, torch.float16: 1e-2}
    for name, (_, cfg, _, _) in MODELS.items():
        if run.quick and name not in ("SmolLM2-135M", "Llama-3-8B"):    # head dims 64 and 128
            continue
        heads, kvh = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        d = cfg["hidden_size"] // heads
        for dtype in (torch.float32, torch.bfloat16):
            for window in (None, 256):
                q, kc, vc, meta = paged_batch(decodes, prefills, 16, heads, kvh, d, dtype, device=run.device)
                ours = kernels.paged_attention(q, kc, vc, meta, d ** -0.5, window).float()
                ref = reference.paged_attention(q, kc, vc, meta, d ** -0.5, window).float()
                err = (ours - ref).abs().max().item()
                ok = err <= tol[dtype]
                run.failures += not ok
                rows.append((f"paged_attention {name} (H={heads}, kv={kvh}, d={d}), {str(dtype)[6:]}, "
                             f"window {window}", f"{err:.2e}", "pass" if ok else f"FAIL (tol {tol[dtype]})"))
    for batch, vocab in ((4, 1000), (64, 128256)) if not run.quick else ((4, 1000),):
        logits = torch.randn(batch, vocab, device=run.device)
        mask = torch.randint(-2**31, 2**31 - 1, (batch, (vocab + 31) // 32), dtype=torch.int32, device=run.device)
        a, b = logits.clone(), logits.clone()
        kernels.apply_token_bitmask_inplace(a, mask)
        reference.apply_token_bitmask_inplace(b, mask)
        ok = torch.equal(a, b)
        run.failures += not ok
        rows.append((f"apply_token_bitmask_inplace {batch} x {vocab}", "exact" if ok else "differs",
                     "pass" if ok else "FAIL"))
    k = torch.randn(33, 8, 128, device=run.device, dtype=torch.bfloat16)
    caches = [torch.zeros(8, 16, 8, 128, device=run.device, dtype=torch.bfloat16) for _ in range(4)]
    slots = torch.randperm(128, device=run.device)[:33]
    slots[5] = -1
    kernels.store_kv_cache(k, k, caches[0], caches[1], slots)
    reference.store_kv_cache(k, k, caches[2], caches[3], slots)
    ok = torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3])
    run.failures += not ok
    rows.append(("store_kv_cache 33 tokens, kv 8 x 128, bf16, one slot -1", "exact" if ok else "differs",
                 "pass" if ok else "FAIL"))
    table("1. kernels against the torch references", ["kernel and shape", "max abs error", "result"], rows)


# -- 2. paged decode attention bandwidth --------------------------------------------------------
def copy_bandwidth(run: Run) -> float:
    n = (64 << 20) if run.quick else (1 << 30)
    x = torch.empty(n, dtype=torch.uint8, device=run.device)
    y = torch.empty_like(x)
    return 2 * n / run.time(lambda: y.copy_(x))


def part_bandwidth(run: Run):
    import torch.nn.functional as F
    name = torch.cuda.get_device_name() if run.device.startswith("cuda") else "cpu"
    nominal = next((bw for key, bw in NOMINAL_BW.items() if key in name), None)
    measured = copy_bandwidth(run)
    heads, kvh, d, bs = 32, 8, 128, 16              # Llama-3-8B's attention
    contexts = [256] if run.quick else [1024, 4096, 8192, 16384, 32768]
    batches = [1, 2] if run.quick else [1, 16, 64, 256]
    cap = 1 << 12 if run.quick else 1 << 21         # tokens of K/V per case (8 GiB at this shape)
    rows = []
    for ctx in contexts:
        for b in batches:
            if b * ctx > cap:
                rows.append((ctx, b, "-", "-", "-", f"over {cap} cached tokens"))
                continue
            if run.over_budget():
                rows.append((ctx, b, "-", "-", "-", "skipped: time budget"))
                continue
            nb = b * (ctx // bs)
            kc = torch.randn(nb + 1, bs, kvh, d, device=run.device, dtype=torch.bfloat16)
            vc = torch.randn_like(kc)
            tables = torch.randperm(nb, device=run.device).view(b, -1).to(torch.int32)
            meta = AttentionMetadata(
                slot_mapping=torch.full((b,), -1, dtype=torch.int64, device=run.device), block_tables=tables,
                seq_lens=torch.full((b,), ctx, dtype=torch.int32, device=run.device),
                query_start_loc=torch.arange(b + 1, dtype=torch.int32, device=run.device), num_decodes=b,
                seq_lens_host=[ctx] * b, query_lens_host=[1] * b, block_size=bs)
            q = torch.randn(b, heads, d, device=run.device, dtype=torch.bfloat16)
            t_ours = run.time(lambda: kernels.paged_attention(q, kc, vc, meta, d ** -0.5))
            kd = kc[tables.long()].view(b, ctx, kvh, d).transpose(1, 2).contiguous()
            vd = vc[tables.long()].view(b, ctx, kvh, d).transpose(1, 2).contiguous()
            qd = q.view(b, heads, 1, d)
            t_sdpa = run.time(lambda: F.scaled_dot_product_attention(qd, kd, vd, enable_gqa=True))
            kv_bytes = 2 * b * ctx * kvh * d * 2
            bw = kv_bytes / t_ours
            frac = f"{bw / nominal:.0%}" if nominal else "-"
            rows.append((ctx, b, f"{t_ours * 1e6:.0f}", f"{bw / 1e9:.0f} GB/s", f"{frac} ({bw / measured:.0%})",
                         f"{t_sdpa / t_ours:.2f}x"))
    table(f"2. paged decode attention, bf16, H={heads} kv={kvh} d={d}, block {bs} ({name}; nominal "
          f"{nominal / 1e12 if nominal else float('nan'):.2f} TB/s, measured copy {measured / 1e12:.2f} TB/s)",
          ["context", "batch", "us", "K/V read", "of nominal (of copy)", "SDPA time / ours"], rows)


# -- 3. bitmask apply ------------------------------------------------------------------------------
def part_bitmask(run: Run):
    vocab = 128256
    rows = []
    for batch in ((64, 256) if run.quick else (64, 4096)):
        v = 4096 if run.quick else vocab
        logits = torch.randn(batch, v, device=run.device)
        mask = torch.randint(-2**31, 2**31 - 1, (batch, (v + 31) // 32), dtype=torch.int32, device=run.device)
        t = run.time(lambda: kernels.apply_token_bitmask_inplace(logits, mask))
        t_ref = run.time(lambda: reference.apply_token_bitmask_inplace(logits, mask))
        half = torch.arange(0, batch, 2, device=run.device, dtype=torch.int32)
        t_half = run.time(lambda: kernels.apply_token_bitmask_inplace(logits, mask, half))
        rows.append((f"{batch} x {v}", f"{t * 1e6:.0f}", f"{t_half * 1e6:.0f}", f"{t_ref / t:.1f}x"))
    table("3. apply_token_bitmask_inplace (fp32 logits; target <= 500 us at 4096 x 128k)",
          ["rows x vocabulary", "us", "us, every other row (indices)", "torch reference time / ours"], rows)


# -- 4-6. models --------------------------------------------------------------------------------------
def hf_config(name: str, quick: bool):
    import transformers
    cls, fields, theta, scaling = MODELS[name]
    fields = dict(fields, initializer_range=0.02)
    if quick:   # the shape's head layout, two small layers
        heads = fields["num_attention_heads"]
        d = fields["hidden_size"] // heads
        fields.update(num_hidden_layers=2, intermediate_size=256, vocab_size=min(fields["vocab_size"], 49152),
                      hidden_size=heads * d)
    rope = {"rope_type": "default", **(scaling or {})}
    if int(transformers.__version__.split(".")[0]) >= 5:
        fields["rope_parameters"] = {**rope, "rope_theta": theta}
    else:
        fields.update(rope_theta=theta, rope_scaling=scaling)
    return getattr(transformers, cls)(**fields)


def build(name: str, tokenizer_dir: Path, run: Run, dtype):
    """(transformers model, our LLM factory) with the same seeded random weights."""
    from transformers import AutoModelForCausalLM
    cfg = hf_config(name, run.quick)
    torch.manual_seed(0)
    with torch.device(run.device):
        hf = AutoModelForCausalLM.from_config(cfg, dtype=dtype).eval()
    folder = Path(tempfile.mkdtemp(prefix=name))
    cfg.save_pretrained(folder)
    for f in tokenizer_dir.iterdir():
        if f.name != "config.json" and f.suffix != ".safetensors" and f.is_file():
            shutil.copy(f, folder / f.name)
    weights = hf.state_dict()

    def engine(**config):
        return LLM(folder, weights=weights.items(), device=run.device, dtype=str(dtype)[6:], **config)
    return hf, engine


def part_parity(run: Run, tokenizer_dir: Path):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []
    max_new = 6 if run.quick else 32
    # Not Llama-3-8B: in fp32 the two copies of its weights need 64 GB.
    for name in (["SmolLM2-135M"] if run.quick else ["SmolLM2-135M", "Qwen2.5-0.5B", "Llama-3.2-1B"]):
        if run.over_budget():
            rows.append((name, "skipped: time budget", "", ""))
            continue
        hf, engine = build(name, tokenizer_dir, run, torch.float32)
        llm = engine(max_num_seqs=8, block_size=16, num_kv_blocks=256, max_model_len=2048)
        ref = hf_greedy(hf, llm.tokenizer, PROMPTS, max_new)
        del hf
        for label, eng in (("default", llm), ("preempting (16 blocks)",
                                                           llm.with_config(num_kv_blocks=16, max_model_len=256)),
                           ("prefill chunks of 32", llm.with_config(max_num_batched_tokens=32))):
            outs = eng.generate(PROMPTS, SamplingParams(max_tokens=max_new), use_tqdm=False)
            same = sum(o.token_ids == r for o, r in zip(outs, ref))
            run.failures += same != len(PROMPTS)
            rows.append((name, label, f"{same}/{len(PROMPTS)}", eng.runner.attention.name))
        del llm, eng
        torch.cuda.empty_cache() if run.device.startswith("cuda") else None
    table("4. greedy parity with transformers, fp32 (TF32 off), random weights",
          ["model shape", "engine", "identical continuations", "attention backend"], rows)


def part_throughput(run: Run, tokenizer_dir: Path):
    torch.backends.cuda.matmul.allow_tf32 = True
    rng = np.random.default_rng(0)
    lo, hi = (2, 6) if run.quick else (16, 128)
    batches = [1, 4] if run.quick else [1, 16, 64, 256]
    names = ["SmolLM2-135M"] if run.quick else ["SmolLM2-135M", "Llama-3.2-1B", "Llama-3-8B"]
    dtype = torch.float32 if run.quick else torch.bfloat16
    rows, guided_rows, latency_rows = [], [], []
    for name in names:
        if run.over_budget():
            rows.append((name, "-", "skipped: time budget", "", "", ""))
            continue
        hf, engine = build(name, tokenizer_dir, run, dtype)
        base = engine(max_num_seqs=1, num_kv_blocks=64, enforce_eager=True)
        for b in batches:
            n = max(2 * b, 8) if not run.quick else 4
            prompts = make_prompts(n, rng)
            lens = rng.integers(lo, hi + 1, size=n)
            blocks = b * (-(-(300 + hi) // 16)) + 16     # every running request's whole context
            cells = []
            for eager in (False, True):
                eng = base.with_config(max_num_seqs=b, num_kv_blocks=blocks, enforce_eager=eager)
                run_engine(eng, prompts[:2], [2, 2], ignore_eos=True)       # warm-up
                _, tok, dt, _ = run_engine(eng, prompts, lens, ignore_eos=True)
                cells.append(tok / dt)
                if b == 1 and eng.runner.graphs is not None:
                    bare = bare_decode_seconds(run, eng)
                    latency_rows.append((name, f"{dt / tok * 1e3:.2f}", f"{bare * 1e3:.2f}",
                                         f"{dt / tok / bare:.2f}x"))
                del eng
            tok, dt, _ = run_hf(hf, base.tokenizer, prompts, lens, b)
            rows.append((name, b, f"{tok / dt:.0f}", f"{cells[0]:.0f}", f"{cells[1]:.0f}",
                         f"{cells[0] / (tok / dt):.2f}x"))
        if name == names[0]:
            b = 8 if run.quick else 64
            guided_rows = guided(run, base.with_config(max_num_seqs=b, num_kv_blocks=2 * b * 32), rng)
        del hf, base
        torch.cuda.empty_cache() if run.device.startswith("cuda") else None
    table(f"5. output tokens/s, {str(dtype)[6:]}, {lo}-{hi} new tokens per request (target >= 3x at batch 64)",
          ["model shape", "batch", "transformers generate", "engine, CUDA graphs", "engine, eager",
           "engine (graphs) / transformers"], rows)
    table("5b. batch-1 decode: engine time per output token against the bare forward (graph replay + "
          "LM head; target <= 1.3x)", ["model shape", "engine ms/token", "bare forward ms", "ratio"],
          latency_rows or [("-", "no CUDA graphs on this device", "", "")])
    table("6. JSON-Schema-guided against unguided, batch 64 (target >= 0.97x)",
          ["run", "tokens", "tok/s", "ratio", "valid"], guided_rows)


def bare_decode_seconds(run: Run, llm) -> float:
    """One batch-1 decode step's forward alone: the captured graph's replay (an inert row)
    and the LM head on its output."""
    graphs, model = llm.runner.graphs, llm.model

    def step():
        graphs.graphs[1].replay()
        model.compute_logits(graphs.outputs[1])
    return run.time(step, iters=50)


def guided(run: Run, llm, rng):
    import jsonschema
    n = 8 if run.quick else 128
    prompts = make_prompts(n, rng)
    lens = [96 if run.quick else 128] * n
    spec = ("json", SCHEMA)
    run_engine(llm, prompts[:4], [8] * 4, constraint=spec, temperature=1.0, seed=0)    # warm-up
    outs, tok, dt, _ = run_engine(llm, prompts, lens, constraint=spec, temperature=1.0, seed=0)
    done = [o for o in outs if o.finish_reason in ("stop", "constraint")]
    bad = 0
    for o in done:
        try:
            jsonschema.validate(json.loads(o.text), SCHEMA)
        except Exception:  # noqa: BLE001 - any failure is a wrong output
            bad += 1
    bad += sum(o.finish_reason == "error" for o in outs)
    run.failures += bad
    same = [max(1, len(o.token_ids)) for o in outs]
    _, ftok, fdt, _ = run_engine(llm, prompts, same, ignore_eos=True, temperature=1.0, seed=0)
    return [("unguided, the guided outputs' lengths", ftok, f"{ftok / fdt:.0f}", "1.00x", ""),
            ("JSON Schema on every request", tok, f"{tok / dt:.0f}", f"{(tok / dt) / (ftok / fdt):.2f}x",
             f"{len(done) - bad}/{len(done)} finished valid, {len(outs) - len(done)} at max_tokens")]


# -- 7. tensor parallel --------------------------------------------------------------------
def part_tp(run: Run, tokenizer_dir: Path):
    """Greedy parity with one rank (fp32) and throughput against one GPU (bf16, same run)."""
    name = "Llama-3.2-1B"           # 32 heads, 8 KV heads: splits 2, 4 and 8 ways
    if run.device.startswith("cuda"):
        sizes = [n for n in (2, 4, 8) if n <= torch.cuda.device_count()]
    else:
        sizes = [2]                 # the dry run: gloo ranks on the host
    header = ["model shape", "tensor_parallel_size", "identical continuations", "tok/s", "vs 1 rank"]
    if not sizes:
        skipped = f"skipped: {torch.cuda.device_count()} GPU visible"
        return table("7. tensor parallel", header, [(name, "-", skipped, "", "")])
    rows, max_new = [], 6 if run.quick else 32
    rng = np.random.default_rng(0)
    n_req, lo, hi = (4, 2, 6) if run.quick else (128, 16, 128)
    prompts, lens = make_prompts(n_req, rng), rng.integers(lo, hi + 1, size=n_req)
    speed_dtype = torch.bfloat16 if run.device.startswith("cuda") else torch.float32
    title = (f"7. tensor parallel: greedy parity (fp32) and output tokens/s ({str(speed_dtype)[6:]}, up to "
             f"64 running) against one rank, {lo}-{hi} new tokens per request")
    for parity, dtype in ((True, torch.float32), (False, speed_dtype)):
        if run.over_budget():
            rows.append((name, "-", "skipped: time budget", "", ""))
            break
        hf, engine = build(name, tokenizer_dir, run, dtype)
        del hf
        config = dict(max_num_seqs=64, block_size=16, num_kv_blocks=64 * 16 + 16, max_model_len=1024)
        ref = engine(**config)
        if parity:
            want = [o.token_ids for o in ref.generate(PROMPTS, SamplingParams(max_tokens=max_new), use_tqdm=False)]
        else:
            run_engine(ref, prompts[:2], [2, 2], ignore_eos=True)
            _, tok, dt, _ = run_engine(ref, prompts, lens, ignore_eos=True)
            base = tok / dt
            rows.append((name, 1, "", f"{base:.0f}", "1.00x"))
        del ref
        for n in sizes:
            with engine(tensor_parallel_size=n, **config) as llm:
                if parity:
                    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=max_new), use_tqdm=False)
                    same = sum(o.token_ids == w for o, w in zip(outs, want))
                    run.failures += same != len(PROMPTS)
                    rows.append((name, n, f"{same}/{len(PROMPTS)} (fp32)", "", ""))
                else:
                    run_engine(llm, prompts[:2], [2, 2], ignore_eos=True)
                    _, tok, dt, _ = run_engine(llm, prompts, lens, ignore_eos=True)
                    rows.append((name, n, "", f"{tok / dt:.0f}", f"{tok / dt / base:.2f}x"))
        torch.cuda.empty_cache() if run.device.startswith("cuda") else None
    table(title, header, rows)


def prepare(out: Path):
    """The tokenizer folder and the wheels the GPU machine lacks, to carry there."""
    from structgen.engine.loader import resolve_model
    src = resolve_model()
    (out / "tokenizer").mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.suffix != ".safetensors" and f.is_file():
            shutil.copy(f, out / "tokenizer" / f.name)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "-d", str(out / "wheels"), *WHEELS], check=True)
    print(f"wrote {out}/tokenizer and {out}/wheels")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny shapes: a dry run of the script")
    ap.add_argument("--tokenizer", type=Path, default=None,
                    help="a folder with SmolLM2's tokenizer files (default: the embedded model's)")
    ap.add_argument("--budget", type=float, default=420, help="seconds; later parts are skipped past it")
    ap.add_argument("--only", default="1,2,3,4,5", help="which parts to run (5 includes 6)")
    ap.add_argument("--prepare", type=Path, default=None, metavar="DIR")
    ap.add_argument("--tp", action="store_true", help="also part 7: tensor parallel (needs 2+ GPUs)")
    args = ap.parse_args()
    if args.prepare:
        return prepare(args.prepare)
    run = Run(args)
    tok_dir = args.tokenizer
    if tok_dir is None:
        from structgen.engine.loader import resolve_model
        tok_dir = resolve_model()
    if args.device.startswith("cuda"):
        print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", file=sys.stderr)
    parts = {"1": lambda: part_kernels(run), "2": lambda: part_bandwidth(run), "3": lambda: part_bitmask(run),
             "4": lambda: part_parity(run, tok_dir), "5": lambda: part_throughput(run, tok_dir),
             "7": lambda: part_tp(run, tok_dir)}
    for key in args.only.split(",") + (["7"] if args.tp else []):
        t = time.perf_counter()
        parts[key]()
        print(f"(part {key}: {time.perf_counter() - t:.1f} s)", file=sys.stderr)
    print(f"\n{'FAILED: ' + str(run.failures) + ' checks' if run.failures else 'all checks passed'} "
          f"in {time.perf_counter() - run.t0:.0f} s")
    sys.exit(1 if run.failures else 0)


if __name__ == "__main__":
    main()
