"""Instructions (not seconds) for one first document of each json_schema_bench case:
compile + first mask + every step of a first pass, as the process's second pass (its
one-time tables built by the first). Counted by valgrind's callgrind, with the hash
seed fixed and address randomisation off: the same count on every run, whatever else
the machine is doing. For before/after comparisons of our own code, where timings on
a shared 2-core machine drift by 10-20% between runs.

    .venv/bin/python benchmarks/json_instructions.py [--only NAME,NAME] [--compile-only]

Needs valgrind (Debian: apt-get install valgrind). Takes about a minute (two runs of
the same script under callgrind at once, one without the measured pass: their
difference). Run it on a quiet machine: the same code counted 592 M alone and 591-582 M
beside a test run or a sweep (numpy's threads, likely, which count while they wait).
"""
from __future__ import annotations

import argparse
import gc
import os
import pathlib
import pickle
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _prepare(path: str) -> None:
    """The vocabulary and each case's tokens, pickled (transformers is not imported under
    valgrind: its import alone takes minutes there)."""
    import json_schema_bench as bench
    from transformers import AutoTokenizer

    from structgen import fsm
    from structgen.engine.loader import resolve_model
    from structgen.fsm.json.schema import schema_to_term
    tok = AutoTokenizer.from_pretrained(resolve_model())
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    work = []
    for name, schema, doc, opts in [("warmup", *bench.WARMUP, {})] + bench.CASES:
        text = schema_to_term(schema, **opts).canonical(doc)
        work.append((name, schema, tok.encode(text, add_special_tokens=False) + [vocab.eos_ids[0]], opts))
    with open(path, "wb") as f:
        pickle.dump((vocab, work), f)


def _child(path: str, measured: bool, only: set | None, steps: bool) -> None:
    import numpy as np

    from structgen import fsm
    from structgen.fsm.json.schema import build_automaton
    with open(path, "rb") as f:
        vocab, work = pickle.load(f)
    row = np.zeros(vocab.num_words, dtype=np.int32)
    fsm.compile_regex("[a-z]+", vocab).matcher().fill_next_token_bitmask(row)
    fsm.compile_grammar('start: "[" start? "]"', vocab).matcher().fill_next_token_bitmask(row)
    gc.collect()
    gc.freeze()

    def one_pass():
        for name, schema, toks, opts in work:
            if only and name not in only and name != "warmup":
                continue
            m = build_automaton(schema, vocab, **opts).matcher()
            m.fill_next_token_bitmask(row)
            for t in toks if steps else ():
                m.fill_next_token_bitmask(row)
                m.accept_token(t)
    one_pass()
    if measured:
        one_pass()


def _counts(runs: list[list[str]]) -> list[int]:
    """Instructions of this script run with each argument list, all at once."""
    with tempfile.TemporaryDirectory() as d:
        norand = ["setarch", os.uname().machine, "-R"] if shutil.which("setarch") else []  # (no ASLR)
        procs = [subprocess.Popen([*norand, "valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/cg{i}.out",
                                   sys.executable, __file__, *args], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
                 for i, args in enumerate(runs)]
        errs = [p.communicate()[1] for p in procs]
    out = []
    for err in errs:
        found = re.search(r"Collected : (\d+)", err)
        if not found:
            raise SystemExit(f"valgrind failed:\n{err[-2000:]}")
        out.append(int(found.group(1)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--compile-only", action="store_true", help="compile + first mask, no steps")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--measured", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    only = set(filter(None, args.only.split(","))) or None
    if args.child:
        return _child(args.child, args.measured, only, not args.compile_only)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/work.pkl"
        _prepare(path)
        flags = ["--child", path, "--only", args.only] + (["--compile-only"] if args.compile_only else [])
        base, measured = _counts([flags, flags + ["--measured"]])
    what = "compile + first mask" if args.compile_only else "first documents (compile + first mask + steps)"
    print(f"{what}, {args.only or 'all cases'}: {(measured - base) / 1e6:.0f} M instructions")


if __name__ == "__main__":
    main()
