"""Engine throughput on CPU (or GPU): our engine against transformers' `generate`
on the same device and dtype.

    .venv/bin/python benchmarks/engine_throughput.py            # full: 64 prompts, 16-128 new tokens
    .venv/bin/python benchmarks/engine_throughput.py --quick    # a short run (32 prompts, batch 8)
    .venv/bin/python benchmarks/engine_throughput.py --repeat 3 # best of 3 alternated runs per side

Three measurements, printed as a markdown table; throughput is given per wall-clock
second and, in brackets, per CPU second of the process:
1. 64 prompts with mixed output lengths: output tokens/s of our engine (continuous
   batching, max_num_seqs = B) against transformers' generate on static batches of B
   (each batch runs until its longest request is done; only requested tokens count).
2. The same workload with a constraint on every request against none (JSON Schema
   through fsm when available, else a regex), EOS banned until max_tokens where the
   constraint allows it so both runs produce the same number of tokens.
3. 32 requests sharing a ~500-token system prompt, one output token each: prefill
   time with prefix caching against without.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

from structgen.engine import LLM, SamplingParams

TOPICS = ["the sea", "a lost key", "autumn in Paris", "a robot learning to paint", "the moon",
          "a small bakery", "mountains at dawn", "a chess match", "an old library", "rain",
          "a cat on a train", "the first snow", "a lighthouse keeper", "desert stars",
          "a broken clock", "a jazz club"]
FILLER = ("Use vivid details and keep a calm tone. Mention at least one colour and one sound. "
          "Avoid clichés and do not rhyme. ")

JSON_SCHEMA = {"type": "object",
               "properties": {"title": {"type": "string"},
                              "lines": {"type": "array", "items": {"type": "string"}}},
               "required": ["title", "lines"]}
REGEX = r"[A-Za-z0-9 ,.;:'!?-]+(\n[A-Za-z0-9 ,.;:'!?-]+)*"


def make_prompts(n, rng):
    return [f"Write about {TOPICS[i % len(TOPICS)]}. " + FILLER * int(rng.integers(0, 4))
            for i in range(n)]


def timed(fn):
    """(result, wall seconds, CPU seconds of this process). CPU time is reported beside
    wall time because on a shared machine other processes stretch the wall clock."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def run_engine(llm, prompts, lens, **kw):
    """(outputs, output tokens, wall s, CPU s)."""
    params = [SamplingParams(max_tokens=int(n), **kw) for n in lens]
    outs, dt, cpu = timed(lambda: llm.generate(prompts, params, use_tqdm=False))
    return outs, sum(len(o.token_ids) for o in outs), dt, cpu


def run_hf(hf, tok, prompts, lens, batch):
    """(requested tokens, wall s, CPU s): each static batch runs to its longest request;
    only the tokens the requests asked for count."""
    tok.padding_side = "left"

    def go():
        for i in range(0, len(prompts), batch):
            ps, ls = prompts[i:i + batch], lens[i:i + batch]
            enc = tok(ps, return_tensors="pt", padding=True).to(hf.device)
            m = int(max(ls))
            with torch.inference_mode():
                hf.generate(**enc, max_new_tokens=m, min_new_tokens=m, do_sample=False,
                            pad_token_id=tok.pad_token_id or tok.eos_token_id)
    _, dt, cpu = timed(go)
    return int(sum(lens)), dt, cpu


def best(runs):
    """Best wall and best CPU throughput over repeats: (tok/s, tok per CPU-s)."""
    return max(t / dt for t, dt, _ in runs), max(t / cpu for t, _, cpu in runs)


def constraint_for(llm):
    """A JSON Schema constraint when fsm compiles schemas, else a free-text regex."""
    try:
        from structgen import fsm
        if hasattr(fsm, "compile_json_schema"):
            try:
                llm.constraints.get(("json", JSON_SCHEMA))
                return ("json", JSON_SCHEMA), "JSON Schema"
            except Exception as e:  # noqa: BLE001
                print(f"(JSON Schema constraint unavailable: {e}; using a regex)", file=sys.stderr)
        llm.constraints.get(("regex", REGEX))
        return ("regex", REGEX), "regex"
    except Exception as e:  # noqa: BLE001
        return None, f"none ({e})"


@dataclass
class GuidedRuns:
    """Alternated runs of one workload with a constraint on every request and without."""
    kind: str                       # "JSON Schema" or "regex"
    constrained: list               # (tokens, wall s, CPU s) per repeat
    free: list                      # the same, unconstrained, at the constrained outputs' lengths
    cold: tuple                     # the first constrained run (fsm caches cold)
    forced: int                     # jump-forward tokens in the last constrained run
    errors: int                     # requests that failed in it


def guided_runs(llm, prompts, lens, max_len, repeat) -> GuidedRuns | None:
    """The constrained workload against the unconstrained one (None: no constraint compiles).

    The regex can always go on, so banning EOS until `max_len` (min_tokens) keeps lengths
    fixed; a JSON document ends when it ends. Either way the unconstrained run is then
    given exactly the lengths the constrained one produced, so both compute the same
    number of tokens. The first constrained run also pays for fsm's lazy exploration of
    automaton states (`cold`). The sides alternate `repeat` times.
    """
    spec, kind = constraint_for(llm)
    if spec is None:
        return None
    extra = {"min_tokens": int(max_len)} if kind == "regex" else {}
    _, cold_tok, cold_dt, cold_cpu = run_engine(llm, prompts, lens, constraint=spec,
                                                ignore_eos=True, **extra)
    runs = GuidedRuns(kind, [], [], (cold_tok, cold_dt, cold_cpu), 0, 0)
    for _ in range(repeat):
        forced0 = llm.stats["forced_tokens"]
        outs, tok, dt, cpu = run_engine(llm, prompts, lens, constraint=spec, ignore_eos=True,
                                        **extra)
        runs.constrained.append((tok, dt, cpu))
        runs.errors = sum(o.finish_reason == "error" for o in outs)
        runs.forced = llm.stats["forced_tokens"] - forced0
        same_lens = [max(1, len(o.token_ids)) for o in outs]
        _, f_tok, dt, cpu = run_engine(llm, prompts, same_lens, ignore_eos=True)
        runs.free.append((f_tok, dt, cpu))
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="32 prompts, batch 8, 8-48 new tokens")
    ap.add_argument("--model", default=None)
    ap.add_argument("--num-prompts", type=int, default=None)
    ap.add_argument("--batch", type=int, default=None, help="max_num_seqs and HF batch size")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="alternate the two sides of each comparison this many times and "
                         "report each side's best run (the machine is shared: use 3)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a shared 2-core box, 2 threads per "
                         "process oversubscribe the cores and everything crawls)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n = args.num_prompts or (32 if args.quick else 64)
    batch = args.batch or (8 if args.quick else 32)
    lo, hi = (8, 48) if args.quick else (16, 128)
    rng = np.random.default_rng(0)
    prompts = make_prompts(n, rng)
    lens = rng.integers(lo, hi + 1, size=n)

    t0 = time.perf_counter()
    llm = LLM(args.model, max_num_seqs=batch, max_num_batched_tokens=2048)
    print(f"engine loaded in {time.perf_counter() - t0:.1f}s; {llm.block_manager.num_blocks} KV blocks; "
          f"torch threads {torch.get_num_threads()}", file=sys.stderr)
    run_engine(llm, prompts[:4], [4] * 4, ignore_eos=True)           # warm-up
    rows = []

    # Each comparison alternates its two sides `--repeat` times and keeps each side's
    # best run, so a burst of load from other processes hurts neither side alone.
    hf = None
    if not args.skip_hf:
        from transformers import AutoModelForCausalLM
        # Same device and dtype as the engine (fp32 on CPU, bf16 on CUDA by default).
        hf = AutoModelForCausalLM.from_pretrained(llm.folder, dtype=llm.dtype).to(llm.device).eval()
    ours, theirs = [], []
    for _ in range(args.repeat):
        _, tok, dt, cpu = run_engine(llm, prompts, lens, ignore_eos=True)
        ours.append((tok, dt, cpu))
        print(f"engine: {tok} tokens in {dt:.1f}s ({cpu:.1f} CPU s)", file=sys.stderr)
        if hf is not None:
            tok, dt, cpu = run_hf(hf, llm.tokenizer, prompts, lens, batch)
            theirs.append((tok, dt, cpu))
            print(f"transformers: {tok} tokens in {dt:.1f}s ({cpu:.1f} CPU s)", file=sys.stderr)
    del hf
    ours_tps, ours_cps = best(ours)
    if theirs:
        hf_tps, hf_cps = best(theirs)
        rows.append((f"{n} prompts, {lo}-{hi} new tokens: transformers generate (static batches of {batch})",
                     f"{hf_tps:.1f} tok/s ({hf_cps:.1f} per CPU s)", "1.00x (1.00x)"))
        rows.append((f"  same: our engine (max_num_seqs={batch})",
                     f"{ours_tps:.1f} tok/s ({ours_cps:.1f} per CPU s)",
                     f"{ours_tps / hf_tps:.2f}x ({ours_cps / hf_cps:.2f}x) (target >= 2x)"))
    else:
        rows.append((f"{n} prompts, {lo}-{hi} new tokens: our engine",
                     f"{ours_tps:.1f} tok/s ({ours_cps:.1f} per CPU s)", ""))

    guided = guided_runs(llm, prompts, lens, hi, args.repeat)
    if guided is not None:
        c_tps, c_cps = best(guided.constrained)
        f_tps, f_cps = best(guided.free)
        cold_tok, cold_dt, cold_cpu = guided.cold
        rows.append((f"{n} prompts, unconstrained, lengths = the constrained outputs' "
                     f"({guided.free[-1][0]} tokens)",
                     f"{f_tps:.1f} tok/s ({f_cps:.1f} per CPU s)", "1.00x (1.00x)"))
        rows.append((f"  same, {guided.kind} constraint on every request ({guided.constrained[-1][0]} "
                     f"tokens, {guided.forced} of them jump-forward, {guided.errors} errors)",
                     f"{c_tps:.1f} tok/s ({c_cps:.1f} per CPU s)",
                     f"{c_tps / f_tps:.2f}x ({c_cps / f_cps:.2f}x) (target >= 0.95x)"))
        rows.append(("  same, first constrained run (cold fsm caches)",
                     f"{cold_tok / cold_dt:.1f} tok/s ({cold_tok / cold_cpu:.1f} per CPU s)",
                     f"{cold_tok / cold_dt / f_tps:.2f}x ({cold_tok / cold_cpu / f_cps:.2f}x)"))
    else:
        rows.append(("constraint run", "skipped", constraint_for(llm)[1]))

    system = ("You are a helpful assistant for a travel company. " * 60)
    sys_ids = llm.tokenizer(system).input_ids[:500]
    questions = [llm.tokenizer(f" Question {i}: where should I go in {TOPICS[i % 16]}?",
                               add_special_tokens=False).input_ids for i in range(32)]
    reqs = [sys_ids + q for q in questions]
    p1 = SamplingParams(max_tokens=1)
    cached = llm.with_config(enable_prefix_caching=True)
    uncached = llm.with_config(enable_prefix_caching=False)
    times = {}
    for name, eng in (("without prefix caching", uncached), ("with prefix caching", cached)):
        t0 = time.perf_counter()
        outs = eng.generate(reqs, p1, use_tqdm=False)
        times[name] = (time.perf_counter() - t0, sum(o.num_cached_tokens for o in outs))
    base = times["without prefix caching"][0]
    for name, (dt, hit) in times.items():
        rows.append((f"32 requests sharing a 500-token system prompt: prefill {name} "
                     f"({hit} cached tokens)", f"{dt:.2f} s", f"{base / dt:.2f}x"))

    print()
    print("| workload | result | ratio |")
    print("|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
