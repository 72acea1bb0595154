"""Single-request steps on CPU: our engine against transformers in the same run.

    .venv/bin/python benchmarks/engine_steps.py               # 5 alternated repeats per side
    .venv/bin/python benchmarks/engine_steps.py --quick       # 3 repeats, 32 new tokens, guided quick
    .venv/bin/python benchmarks/engine_steps.py --threads 2   # torch threads (default 1)

Three measurements on the embedded SmolLM2-135M-Instruct (or --model) in the engine's
dtype (fp32 on CPU), greedy, printed as a markdown table of medians and p90 over the
repeats, with ratios of medians (>1: ours faster):
1. Prefill: one 421-token prompt, time to its first token. Our engine has prefix caching
   off (nothing is reused between repeats); transformers runs `generate` with one new
   token. Both must pick the same token.
2. Batch-1 decode: a short prompt and 128 new tokens (EOS banned on both sides, so both
   produce exactly 128), tokens/s of the whole request; transformers' `generate` keeps
   its KV cache. Both must produce the same tokens.
3. Guided against unguided throughput per CPU second: engine_throughput.py's
   measurement (`guided_runs`) on its --quick workload (32 prompts, batch 8).

The sides alternate in every repeat (ours first in even repeats, theirs in odd ones),
so that load from other processes on a shared machine falls on both. Time is given per
wall-clock second and, in brackets, per CPU second of this process.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_throughput import guided_runs, make_prompts, timed  # noqa: E402

from structgen.engine import LLM, SamplingParams  # noqa: E402

PROMPT = ("You are a helpful assistant for a travel company. Answer in two sentences, "
          "mention one museum and one park, and keep a friendly tone. ")
DECODE_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def alternate(repeat, ours, theirs):
    """Call both sides `repeat` times, the first side alternating; ([ours' results], [theirs'])."""
    a, b = [], []
    for i in range(repeat):
        if i % 2 == 0:
            a.append(ours())
            b.append(theirs())
        else:
            b.append(theirs())
            a.append(ours())
    return a, b


def stats(values):
    """(median, p90) of a list of numbers."""
    return float(np.median(values)), float(np.percentile(values, 90))


def time_row(label, runs, base=None):
    """A row for seconds per run: (label, median (CPU), p90 (CPU), ratio base/ours)."""
    wall, cpu = stats([r[1] for r in runs]), stats([r[2] for r in runs])
    ratio = "1.00x (1.00x)" if base is None else (
        f"{base[0][0] / wall[0]:.2f}x ({base[1][0] / cpu[0]:.2f}x)")
    return (label, f"{wall[0] * 1e3:.0f} ms ({cpu[0] * 1e3:.0f})",
            f"{wall[1] * 1e3:.0f} ms ({cpu[1] * 1e3:.0f})", ratio), (wall, cpu)


def rate_row(label, runs, base=None):
    """A row for tokens per second: runs are (tokens, wall s, CPU s); p90 of the time, as a rate
    (the slow tail); ratio ours/base."""
    wall = stats([r[0] / r[1] for r in runs])
    cpu = stats([r[0] / r[2] for r in runs])
    slow_wall = float(np.percentile([r[0] / r[1] for r in runs], 10))
    slow_cpu = float(np.percentile([r[0] / r[2] for r in runs], 10))
    ratio = "1.00x (1.00x)" if base is None else (
        f"{wall[0] / base[0][0]:.2f}x ({cpu[0] / base[1][0]:.2f}x)")
    return (label, f"{wall[0]:.2f} tok/s ({cpu[0]:.2f})", f"{slow_wall:.2f} tok/s ({slow_cpu:.2f})",
            ratio), (wall, cpu)


def prefill(llm, hf, ids, repeat):
    x = torch.tensor([ids])
    firsts = set()

    def ours():
        outs, dt, cpu = timed(lambda: llm.generate([ids], SamplingParams(max_tokens=1), use_tqdm=False))
        firsts.add(("ours", outs[0].token_ids[0]))
        return 1, dt, cpu

    def theirs():
        with torch.inference_mode():
            out, dt, cpu = timed(lambda: hf.generate(x, max_new_tokens=1, do_sample=False,
                                                     pad_token_id=llm.tokenizer.eos_token_id))
        firsts.add(("theirs", int(out[0, -1])))
        return 1, dt, cpu

    ours(), theirs()            # warm-up
    a, b = alternate(repeat, ours, theirs)
    if len({t for _, t in firsts}) != 1:
        sys.exit(f"prefill: first tokens differ: {sorted(firsts)}")
    label = f"one {len(ids)}-token prompt, time to first token"
    base, bstats = time_row(f"{label}: transformers generate", b)
    return [base, time_row("  same: our engine (prefix caching off)", a, bstats)[0]]


def decode(llm, hf, ids, new_tokens, repeat):
    x = torch.tensor([ids])
    outputs = {}
    params = SamplingParams(max_tokens=new_tokens, min_tokens=new_tokens)

    def ours():
        outs, dt, cpu = timed(lambda: llm.generate([ids], params, use_tqdm=False))
        outputs["ours"] = outs[0].token_ids
        return len(outs[0].token_ids), dt, cpu

    def theirs():
        with torch.inference_mode():
            out, dt, cpu = timed(lambda: hf.generate(
                x, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                pad_token_id=llm.tokenizer.eos_token_id))
        outputs["theirs"] = out[0, len(ids):].tolist()
        return out.shape[1] - len(ids), dt, cpu

    a, b = alternate(repeat, ours, theirs)
    if outputs["ours"] != outputs["theirs"]:
        n = next(i for i, (p, q) in enumerate(zip(outputs["ours"], outputs["theirs"])) if p != q)
        sys.exit(f"decode: outputs differ from token {n}: {outputs['ours'][n:n + 5]} "
                 f"against transformers' {outputs['theirs'][n:n + 5]}")
    label = f"batch-1 decode, {len(ids)}-token prompt, {new_tokens} new tokens"
    base, bstats = rate_row(f"{label}: transformers generate", b)
    return [base, rate_row("  same: our engine", a, bstats)[0]]


def guided(llm, repeat):
    rng = np.random.default_rng(0)
    prompts = make_prompts(32, rng)
    lens = rng.integers(8, 49, size=32)
    eng = llm.with_config(max_num_seqs=8, max_num_batched_tokens=2048, enable_prefix_caching=True)
    runs = guided_runs(eng, prompts, lens, 48, repeat)
    if runs is None:
        return [("guided run", "skipped: no constraint compiles", "", "")]
    free, fstats = rate_row(f"32 prompts, batch 8, unconstrained ({runs.free[-1][0]} tokens)", runs.free)
    con, cstats = rate_row(f"  same, {runs.kind} constraint on every request "
                           f"({runs.constrained[-1][0]} tokens, {runs.forced} jump-forward, "
                           f"{runs.errors} errors)", runs.constrained, fstats)
    return [free, con]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a shared machine more threads per "
                         "process oversubscribe the cores)")
    ap.add_argument("--repeat", type=int, default=None, help="alternated runs per side (default 5)")
    ap.add_argument("--prompt-tokens", type=int, default=421)
    ap.add_argument("--new-tokens", type=int, default=None, help="decode length (default 128)")
    ap.add_argument("--quick", action="store_true", help="3 repeats and 32 new tokens")
    ap.add_argument("--only", choices=("prefill", "decode", "guided"), action="append",
                    help="run only these measurements (repeatable)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    repeat = args.repeat or (3 if args.quick else 5)
    new_tokens = args.new_tokens or (32 if args.quick else 128)
    only = set(args.only or ("prefill", "decode", "guided"))

    llm = LLM(args.model, max_num_seqs=1, enable_prefix_caching=False)
    tok = llm.tokenizer
    ids = tok(PROMPT * (args.prompt_tokens // 10)).input_ids[:args.prompt_tokens]
    if len(ids) < args.prompt_tokens:
        sys.exit(f"the prompt has only {len(ids)} tokens")
    decode_ids = tok.apply_chat_template([{"role": "user", "content": DECODE_PROMPT}],
                                         add_generation_prompt=True)
    decode_ids = list(getattr(decode_ids, "input_ids", decode_ids))
    from transformers import AutoModelForCausalLM
    hf = AutoModelForCausalLM.from_pretrained(llm.folder, dtype=llm.dtype).to(llm.device).eval()
    print(f"torch threads {torch.get_num_threads()}, {repeat} repeats, device {llm.device}, "
          f"dtype {llm.dtype}", file=sys.stderr)

    rows = []
    if "prefill" in only:
        rows += prefill(llm, hf, ids, repeat)
    if "decode" in only:
        rows += decode(llm, hf, decode_ids, new_tokens, repeat)
    if "guided" in only:
        rows += guided(llm, repeat)

    print()
    print("| workload | median (CPU) | p90 (CPU) | ratio (CPU) |")
    print("|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print("\nTimes: wall ms (CPU ms of this process); rates: p90 is the slowest 10%. "
          "Ratios of medians, >1 when ours is faster.")


if __name__ == "__main__":
    main()
