"""The first constraint of a process, for ours and the peers, each case in a fresh process.

For every library and case, a new Python process loads the SmolLM2 tokenizer, then times:
- prep: the library's per-vocabulary preparation (ours: fsm.Vocabulary.from_tokenizer,
  which builds the token trie and byte columns; llguidance: its tokenizer from the HF one;
  xgrammar: TokenizerInfo.from_huggingface);
- first: compile plus the first mask of the case's constraint (its first constraint);
- masks: every later mask along one valid document (mean and p99 over all cases).
Ratios are against llguidance, measured in the same run. Peers come from the bench extra
(`.venv/bin/pip install -e ".[bench]"`); a missing one is skipped with a note.

    .venv/bin/python benchmarks/cold_start.py [--runs 3] [--libs ours,llguidance,xgrammar]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CASES = {
    "email": ("regex", r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}", "ada.lovelace@example.org"),
    "date": ("regex", r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "1969-07-20"),
    "phone": ("regex", r"\(\d{3}\) \d{3}-\d{4}", "(555) 123-4567"),
    "person": ("json", {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                                         "age": {"type": "integer", "minimum": 0},
                                                         "email": {"type": "string", "format": "email"}},
                        "required": ["name", "age"]},
               '{"name":"Ada Lovelace","age":36,"email":"ada@example.org"}'),
    "invoice": ("json", {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^INV-[0-9]{4}$"},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}, "price": {"type": "number"}},
            "required": ["sku", "qty", "price"]}, "minItems": 1},
        "paid": {"type": "boolean"}}, "required": ["id", "items", "paid"]},
        '{"id":"INV-0042","items":[{"sku":"A-1","qty":2,"price":9.5},{"sku":"B-7","qty":1,"price":120}],'
        '"paid":false}'),
}


def child(lib: str, case: str) -> dict:
    """One fresh process's measurements (run as `cold_start.py --child LIB CASE`)."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import peers
    from transformers import AutoTokenizer

    from structgen import fsm
    from structgen.engine.loader import resolve_model
    tok = AutoTokenizer.from_pretrained(resolve_model())
    kind, spec, text = CASES[case]
    t0 = time.perf_counter()
    if lib == "ours":
        vocab = fsm.Vocabulary.from_tokenizer(tok)
        peer = peers.Ours(vocab)
    else:
        peer = {"llguidance": peers.LLGuidance, "xgrammar": peers.XGrammar}[lib](tok, len(tok))
    t1 = time.perf_counter()
    m = peer.matcher(peer.compile(kind, spec))
    peer.fill(m)
    t2 = time.perf_counter()
    masks = []
    for t in tok.encode(text, add_special_tokens=False):
        if not peer.accept(m, t):
            raise RuntimeError(f"{lib} refused token {t} of the {case} document")
        s = time.perf_counter()
        peer.fill(m)
        masks.append(time.perf_counter() - s)
    return {"prep": t1 - t0, "first": t2 - t1, "masks": masks}


def measure(lib: str, case: str) -> dict | None:
    # (bytecode written and reused, as in an installed package: a first, discarded run writes it)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    run = subprocess.run([sys.executable, __file__, "--child", lib, case], capture_output=True, text=True, env=env)
    if run.returncode:
        tail = run.stderr.strip().splitlines()[-1:] or ["?"]
        print(f"({lib} {case}: {tail[0]})", file=sys.stderr)
        return None
    return json.loads(run.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per library and case")
    ap.add_argument("--libs", default="ours,llguidance,xgrammar")
    ap.add_argument("--child", nargs=2, metavar=("LIB", "CASE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    libs = args.libs.split(",")
    rows = {}
    for lib in libs:
        preps, firsts, masks = [], [], []
        measure(lib, "person")  # (warm-up: bytecode, the OS's file cache)
        for case in CASES:
            for _ in range(args.runs):
                got = measure(lib, case)
                if got is None:
                    break
                preps.append(got["prep"])
                firsts.append(got["first"])
                masks += got["masks"]
        if preps and masks:
            masks.sort()
            rows[lib] = (statistics.median(preps), statistics.median(firsts), statistics.fmean(masks),
                         masks[min(len(masks) - 1, int(0.99 * len(masks)))])
    ref = rows.get("llguidance")
    print(f"SmolLM2 49k, {args.runs} fresh processes per case, cases: {', '.join(CASES)}")
    print(f"{'library':<12}{'prep (s)':>10}{'first (ms)':>12}{'mask mean (us)':>16}{'mask p99 (us)':>15}"
          + ("   ratios to llguidance: prep / first / mean / p99" if ref else ""))
    for lib, (prep, first, mean, p99) in rows.items():
        line = f"{lib:<12}{prep:>10.3f}{first * 1e3:>12.2f}{mean * 1e6:>16.1f}{p99 * 1e6:>15.1f}"
        if ref:
            line += "   " + " / ".join(f"{a / b:.2f}x" for a, b in zip((prep, first, mean, p99), ref))
        print(line)


if __name__ == "__main__":
    main()
