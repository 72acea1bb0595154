"""Beam search: the engine's `LLM.beam_search` against transformers' `generate(num_beams=k)`,
in the same run, on the same weights (fp32), outputs checked token-identical.

    .venv/bin/python benchmarks/beam_search.py              # widths 2, 4, 8; 6 chat prompts
    .venv/bin/python benchmarks/beam_search.py --quick      # widths 2, 4; 3 prompts

Per width, a markdown row: per-prompt latency p50 / p90 of transformers and of the engine
(one prompt at a time, alternating), their p50 ratio; the engine's wall time for all
prompts in one call; how many prompts are token-identical; and KV memory: the peak number
of blocks the batched call held against what k unshared copies of each sequence would hold.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from structgen.engine import LLM, BeamSearchParams

QUESTIONS = ["What is the capital of Spain?", "Name three primary colours.", "Is water wet? Answer yes or no.",
             "Give me a word that rhymes with cat.", "What is 12 times 12?",
             "Write one sentence about the history of the printing press in Europe."]


def hf_beams(hf, ids, p: BeamSearchParams) -> list[list[int]]:
    t = torch.tensor([ids])
    with torch.inference_mode():
        g = hf.generate(t, attention_mask=torch.ones_like(t), max_new_tokens=p.max_tokens, num_beams=p.beam_width,
                        num_return_sequences=p.beam_width, do_sample=False, length_penalty=p.length_penalty,
                        early_stopping=p.early_stopping, pad_token_id=2)
    out = []
    for row in g[:, len(ids):].tolist():
        out.append(row[:row.index(2) + 1] if 2 in row else row)
    return out


def peak_blocks(llm: LLM):
    """Wrap the runner's forward to record the most KV blocks in use at any step."""
    bm, forward, peak = llm.block_manager, llm.runner.forward_logits, [0]

    def counted(batch):
        peak[0] = max(peak[0], bm.num_blocks - bm.num_free_blocks)
        return forward(batch)
    llm.runner.forward_logits = counted
    return peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM

    llm = LLM(max_num_seqs=64, block_size=16, num_kv_blocks=1024, dtype="float32", enable_prefix_caching=False)
    hf = AutoModelForCausalLM.from_pretrained(llm.folder, dtype=torch.float32).eval()
    questions = QUESTIONS[:3] if args.quick else QUESTIONS
    texts = [llm.tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                               add_generation_prompt=True) for q in questions]
    prompts = [llm.tokenizer(t).input_ids for t in texts]
    widths = (2, 4) if args.quick else (2, 4, 8)
    bs = llm.config.block_size
    print(f"prompts: {len(prompts)} chat prompts of {min(map(len, prompts))}-{max(map(len, prompts))} tokens, "
          f"max_tokens={args.max_tokens}, fp32, torch threads={args.threads}, device={llm.device}\n")
    print("| width | transformers p50 / p90 s | engine p50 / p90 s | p50 ratio (hf / engine) "
          "| engine, all in one call s | identical | peak KV blocks | unshared blocks |")
    print("|---|---|---|---|---|---|---|---|")
    for k in widths:
        p = BeamSearchParams(k, max_tokens=args.max_tokens)
        t_hf, t_eng, same = [], [], 0
        llm.beam_search(prompts[0], p)                                   # warm-up
        for ids in prompts:
            t0 = time.perf_counter()
            ref = hf_beams(hf, ids, p)
            t1 = time.perf_counter()
            out = llm.beam_search(ids, p)[0]
            t2 = time.perf_counter()
            t_hf.append(t1 - t0)
            t_eng.append(t2 - t1)
            same += [s.token_ids for s in out.sequences] == ref
        peak = peak_blocks(llm)
        t0 = time.perf_counter()
        outs = llm.beam_search(prompts, p)
        t_all = time.perf_counter() - t0
        llm.runner.forward_logits = type(llm.runner).forward_logits.__get__(llm.runner)
        longest = [max(len(s.token_ids) for s in o.sequences) for o in outs]
        unshared = sum(k * -(-(len(ids) + n) // bs) for ids, n in zip(prompts, longest))
        h50, h90 = np.percentile(t_hf, [50, 90])
        e50, e90 = np.percentile(t_eng, [50, 90])
        print(f"| {k} | {h50:.2f} / {h90:.2f} | {e50:.2f} / {e90:.2f} | {h50 / e50:.2f} | {t_all:.2f} "
              f"| {same}/{len(prompts)} | {peak[0]} | {unshared} |")


if __name__ == "__main__":
    main()
