"""Engine checks on a CUDA GPU in one short run (device time is scarce: prepare, run once).

    python benchmarks/gpu_check.py                       # the embedded model, on cuda
    python benchmarks/gpu_check.py --random-weights DIR  # SmolLM2's shape, seeded random
                                                         # weights, DIR's config and tokenizer
    python benchmarks/gpu_check.py --device cpu --quick  # a dry run of the script itself

1. Exactness: greedy continuations in fp32 (TF32 off), our engine against transformers on
   the same weights and device, token for token; again with a KV cache small enough to
   preempt and with prefill cut into small chunks.
2. bf16, the engine's CUDA default: how far its greedy tokens agree with fp32 (reported,
   not asserted: bf16 rounding moves near ties).
3. Guided decoding on the device: JSON Schema, Lark grammar and regex requests sampled at
   temperature 1; every finished output is checked by jsonschema, lark and re.
Prints a markdown table per part and exits non-zero if part 1 or 3 finds a difference.
Throughput is `benchmarks/engine_throughput.py` (same device and dtype for both sides).

With random weights, outputs are noise, but both sides compute on the same noise, which
is all parts 1 and 3 need; the weights of the embedded model do not fit the device
machine's upload limit (98 MB GGUF against 64 MiB).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from oracles import LONG, hf_greedy  # noqa: E402
from oracles import PROMPTS as TEST_PROMPTS

from structgen.engine import LLM, SamplingParams  # noqa: E402

# the engine tests' prompts (lengths, a shared prefix) and one that needs many KV blocks
PROMPTS = TEST_PROMPTS + [LONG * 3 + "Summarise the rules above in one sentence:"]

SCHEMA = {"type": "object",
          "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 9999},
                         "name": {"type": "string", "maxLength": 12},
                         "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
                         "ok": {"type": "boolean"}},
          "required": ["id", "name", "ok"], "additionalProperties": False}
GRAMMAR = r"""
start: expr
?expr: term (("+" | "-") term)*
?term: atom (("*" | "/") atom)*
?atom: NUMBER | "(" expr ")"
NUMBER: /[0-9]{1,3}/
"""
REGEX = r"[A-Z][a-z]{1,8}( [a-z]{1,8}){0,4}\."


def random_model(src: Path, out: Path, seed: int = 0) -> Path:
    """A model folder with src's config and tokenizer and seeded random weights."""
    import shutil

    from transformers import AutoConfig, AutoModelForCausalLM
    out.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy(f, out / f.name)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(src), dtype=torch.float32)
    model.save_pretrained(out)
    return out


def agreement(ours, ref):
    """(identical sequences, mean length of the common prefix over the reference's)."""
    same = sum(a == b for a, b in zip(ours, ref))
    prefix = []
    for a, b in zip(ours, ref):
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        prefix.append(k / max(1, len(b)))
    return same, sum(prefix) / len(prefix)


def part_exactness(folder, device, max_new, rows):
    from transformers import AutoModelForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device).eval()
    llm = LLM(folder, device=device, dtype="float32", max_num_seqs=8, block_size=16, num_kv_blocks=256)
    ref = hf_greedy(hf, llm.tokenizer, PROMPTS, max_new)
    del hf
    bad = 0
    variants = {"default": llm,
                "preempting (16 KV blocks)": llm.with_config(num_kv_blocks=16, block_size=16),
                "prefill chunks of 32 tokens": llm.with_config(max_num_batched_tokens=32)}
    for name, eng in variants.items():
        t0 = time.perf_counter()
        outs = eng.generate(PROMPTS, SamplingParams(max_tokens=max_new), use_tqdm=False)
        dt = time.perf_counter() - t0
        same, _ = agreement([o.token_ids for o in outs], ref)
        bad += same != len(PROMPTS)
        rows.append(("fp32 greedy vs transformers, " + name, f"{same}/{len(PROMPTS)} identical",
                     f"{dt:.2f} s, {eng.scheduler.num_preemptions} preemptions"))
    # A second run hits the prefix cache: still identical.
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=max_new), use_tqdm=False)
    same, _ = agreement([o.token_ids for o in outs], ref)
    bad += same != len(PROMPTS)
    rows.append(("fp32 greedy vs transformers, prefix cache warm",
                 f"{same}/{len(PROMPTS)} identical",
                 f"{sum(o.num_cached_tokens for o in outs)} cached tokens"))
    return llm, ref, bad


def part_bf16(folder, device, ref, max_new, rows):
    llm = LLM(folder, device=device, max_num_seqs=8)
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=max_new), use_tqdm=False)
    same, frac = agreement([o.token_ids for o in outs], ref)
    rows.append((f"{llm.dtype} greedy (engine default) vs fp32 transformers",
                 f"{same}/{len(PROMPTS)} identical", f"mean common prefix {frac:.0%}"))
    return llm


def _regex_check(text):
    if not re.fullmatch(REGEX, text):
        raise ValueError("does not match the regex")


def part_guided(llm, n, rows):
    import jsonschema
    import lark
    parser = lark.Lark(GRAMMAR, start="start", parser="lalr")
    checks = {"json": (SCHEMA, lambda t: jsonschema.validate(json.loads(t), SCHEMA)),
              "grammar": (GRAMMAR, parser.parse),
              "regex": (REGEX, _regex_check)}
    bad = 0
    for kind, (spec, check) in checks.items():
        params = [SamplingParams(max_tokens=160, temperature=1.0, seed=i, constraint=(kind, spec))
                  for i in range(n)]
        t0 = time.perf_counter()
        outs = llm.generate([PROMPTS[i % len(PROMPTS)] for i in range(n)], params, use_tqdm=False)
        dt = time.perf_counter() - t0
        done = [o for o in outs if o.finish_reason in ("stop", "constraint")]
        failed = []
        for o in done:
            try:
                check(o.text)
            except Exception as e:  # noqa: BLE001 - any failure is a wrong output
                failed.append(f"{o.text!r}: {e}")
        errors = [o.error for o in outs if o.finish_reason == "error"]
        bad += len(failed) + len(errors)
        rows.append((f"guided {kind}, {n} requests sampled at T=1",
                     f"{len(done) - len(failed)}/{len(done)} finished outputs valid; "
                     f"{len(outs) - len(done)} hit max_tokens; {len(errors)} errors",
                     f"{dt:.2f} s, {sum(len(o.token_ids) for o in outs)} tokens"))
        for f in failed[:3] + [str(e) for e in errors[:3]]:
            print("  INVALID", f, file=sys.stderr)
    return bad


def table(title, rows):
    print(f"\n### {title}\n\n| check | result | note |\n|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="model folder (default: the embedded model)")
    ap.add_argument("--random-weights", default=None, metavar="DIR",
                    help="use DIR's config and tokenizer with seeded random weights")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="fewer tokens and requests (dry run)")
    args = ap.parse_args()
    if args.device.startswith("cuda"):
        print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", file=sys.stderr)
    folder = args.model
    if args.random_weights:
        import tempfile
        folder = random_model(Path(args.random_weights), Path(tempfile.mkdtemp()) / "random")
    elif folder is None:
        from structgen.engine.loader import resolve_model
        folder = resolve_model()
    max_new, n = (8, 6) if args.quick else (48, 48)
    rows = []
    _, ref, bad = part_exactness(folder, args.device, max_new, rows)
    table("exactness (fp32)", rows)
    rows = []
    llm = part_bf16(folder, args.device, ref, max_new, rows)
    table("bf16", rows)
    rows = []
    bad += part_guided(llm, n, rows)
    table("guided decoding", rows)
    print(f"\n{'FAILED: ' + str(bad) + ' differences' if bad else 'all checks passed'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
