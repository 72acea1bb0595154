"""Recursive schemas: lazy terms (recursion="auto") against the grammar path
(recursion="grammar"), on json_schema_bench's tree schema, SmolLM2 tokenizer.

    .venv/bin/python benchmarks/recursive_depth.py [--depths 2,5,30,100] [--reps 300]

Prints, per path, the time to first mask (compile + first mask, the minimum of
--reps), then for each depth a tree document with two children per level written
out token by token on a fresh compile: the whole first document (compile, every
mask and step), the steps' median and p99, and the DFA states made. A lazy state
is one term per depth, so along a deep document every level's states are new; the
grammar path's masks are per lexeme and parser state, and repeat across levels.
"""
from __future__ import annotations

import argparse
import gc
import json
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from json_schema_bench import TREE, WARMUP  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depths", default="2,5,30,100")
    ap.add_argument("--reps", type=int, default=300)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from structgen import fsm
    from structgen.engine.loader import resolve_model
    from structgen.fsm.json.schema import build_automaton
    tok = AutoTokenizer.from_pretrained(resolve_model())
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    row = np.zeros(vocab.num_words, dtype=np.int32)
    build_automaton(WARMUP[0], vocab).matcher().fill_next_token_bitmask(row)  # (one-time tables)
    fsm.compile_grammar('start: "[" start? "]"', vocab).matcher().fill_next_token_bitmask(row)
    gc.collect()
    gc.freeze()
    paths = ("auto", "grammar")
    for rec in paths:
        ts = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            build_automaton(TREE, vocab, recursion=rec).matcher().fill_next_token_bitmask(row)
            ts.append(time.perf_counter() - t0)
        print(f"TTFM recursion={rec}: {min(ts) * 1e6:.0f} us (min of {args.reps})")
    def first_document(depth: int, rec: str) -> tuple:
        doc = {"value": 1}
        for i in range(depth):
            doc = {"value": i, "children": [doc, {"value": 2}]}
        ids = tok.encode(json.dumps(doc, separators=(",", ":")), add_special_tokens=False)
        t0 = time.perf_counter()
        auto = build_automaton(TREE, vocab, recursion=rec)
        m, steps = auto.matcher(), []
        for tid in ids + [vocab.eos_ids[0]]:
            s = time.perf_counter()
            m.fill_next_token_bitmask(row)
            if not m.accept_token(tid):
                raise SystemExit(f"token {tid} refused at depth {depth} ({rec})")
            steps.append(time.perf_counter() - s)
        return len(ids), time.perf_counter() - t0, sorted(steps), auto.dfa.num_states

    for rec in paths:  # (each path's one-time tables: not charged to the first row)
        first_document(3, rec)
    print("\n| depth | tokens | path | first document ms | step median / p99 us | states |")
    print("|---|---|---|---|---|---|")
    for depth in (int(x) for x in args.depths.split(",")):
        for rec in paths:
            n, total, steps, states = first_document(depth, rec)
            print(f"| {depth} | {n} | {rec} | {total * 1e3:.1f} | {statistics.median(steps) * 1e6:.0f} / "
                  f"{steps[int(0.99 * (len(steps) - 1))] * 1e6:.0f} | {states} |")


if __name__ == "__main__":
    main()
