"""The first constraint of a process, for ours and the peers, each case in a fresh process.

For every library, tokenizer and case, a new Python process loads the tokenizer, then times:
- prep: the library's per-vocabulary preparation (SmolLM2: from the loaded HF tokenizer, ours
  fsm.Vocabulary.from_tokenizer, which builds the token trie and byte columns, llguidance's
  and xgrammar's from_huggingface; tekken 131k: each library reads mistral's tekken file);
- first: compile plus the first mask of the case's constraint (its first constraint);
- masks: every later mask along one valid document (mean and p99 over all cases).
Ratios are against llguidance, measured in the same run. Peers come from the bench extra
(`.venv/bin/pip install -e ".[bench]"`); a missing one is skipped with a note.

    .venv/bin/python benchmarks/cold_start.py [--runs 3] [--libs ours,llguidance,xgrammar]
                                              [--tokenizers smol,tekken] [--vocab-cache DIR]

--vocab-cache DIR: ours reads its trie and byte columns from DIR (STRUCTGEN_VOCAB_CACHE),
which the discarded warm-up process writes; prep is then a load from the disk cache (tekken's:
keyed by the file's bytes, which it hashes, with the token bytes stored: no JSON or base64).

Per-mask times are wall clock by default: on a shared machine a preempted process shows masks
of 10-25 ms that cost a tenth of that in CPU time, in ours and the peers alike. `--clock cpu`
times every step by the process's CPU time (`time.process_time`, all its threads counted)
instead, which leaves out the moments another process held the core.
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
    "event": ("json", {"type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"}, "at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 5}},
        "required": ["id", "at"]},
        '{"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-05-06T07:08:09Z","tags":["a","bc"]}'),
}


def _smol(lib: str, clock):
    """(prepared peer, encode(text) -> token ids) over the SmolLM2 tokenizer."""
    import peers
    from transformers import AutoTokenizer

    from structgen import fsm
    from structgen.engine.loader import resolve_model
    tok = AutoTokenizer.from_pretrained(resolve_model())
    t0 = clock()
    if lib == "ours":
        peer = peers.Ours(fsm.Vocabulary.from_tokenizer(tok))
    else:
        peer = {"llguidance": peers.LLGuidance, "xgrammar": peers.XGrammar}[lib](tok, len(tok))
    return peer, clock() - t0, lambda text: tok.encode(text, add_special_tokens=False)


def _tekken(lib: str, clock):
    """The same over mistral's tekken file (131k tokens, 1,000 special): each library
    reads the file itself, so prep counts the parse too."""
    import base64

    import peers
    import tiktoken
    from oracles import mistral_data, tekken_encoding

    from structgen import fsm
    path = mistral_data("tekken_240911.json")
    t0 = clock()
    if lib == "ours":
        vocab = fsm.Vocabulary.from_tekken_json(path)
        peer = peers.Ours(vocab)
    else:
        data = json.loads(open(path, "rb").read())
        cfg = data["config"]
        special, total = cfg["default_num_special_tokens"], cfg["default_vocab_size"]
        ranks = [base64.b64decode(v["token_bytes"]) for v in data["vocab"][:total - special]]
        if lib == "llguidance":
            import llguidance.tiktoken
            enc = tiktoken.Encoding("tekken", pat_str=cfg["pattern"], mergeable_ranks={b: i for i, b in enumerate(ranks)},
                                    special_tokens={"</s>": total - special})
            peer = peers.LLGuidance(llguidance.tiktoken.lltokenizer_from_encoding(enc, eos_token=total - special))
        else:
            import xgrammar
            info = xgrammar.TokenizerInfo([b"<s%d>" % i for i in range(special)] + ranks, stop_token_ids=[2])
            peer = peers.XGrammar(info)
    prep = clock() - t0
    enc, specials = tekken_encoding(path)
    shift = 0 if lib == "llguidance" else specials  # (ours and xgrammar: the specials come first)
    return peer, prep, lambda text: [t + shift for t in enc.encode(text)]


def child(lib: str, case: str, tokenizer: str) -> dict:
    """One fresh process's measurements (run as `cold_start.py --child LIB CASE TOKENIZER`)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [here, os.path.join(os.path.dirname(here), "tests")]  # (peers; oracles)
    clock = time.process_time if os.environ.get("COLD_START_CLOCK") == "cpu" else time.perf_counter
    peer, prep, encode = (_smol if tokenizer == "smol" else _tekken)(lib, clock)
    kind, spec, text = CASES[case]
    t1 = clock()
    m = peer.matcher(peer.compile(kind, spec))
    peer.fill(m)
    t2 = clock()
    masks = []
    for t in encode(text):
        if not peer.accept(m, t):
            raise RuntimeError(f"{lib} refused token {t} of the {case} document")
        s = clock()
        peer.fill(m)
        masks.append(clock() - s)
    return {"prep": prep, "first": t2 - t1, "masks": masks}


def measure(lib: str, case: str, tokenizer: str, vocab_cache: str | None = None, clock: str = "wall") -> dict | None:
    # (bytecode written and reused, as in an installed package: a first, discarded run writes it)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "STRUCTGEN_VOCAB_CACHE")}
    if vocab_cache:
        env["STRUCTGEN_VOCAB_CACHE"] = vocab_cache
    env["COLD_START_CLOCK"] = clock
    run = subprocess.run([sys.executable, __file__, "--child", lib, case, tokenizer], capture_output=True,
                         text=True, env=env)
    if run.returncode:
        tail = run.stderr.strip().splitlines()[-1:] or ["?"]
        print(f"({lib} {case} {tokenizer}: {tail[0]})", file=sys.stderr)
        return None
    return json.loads(run.stdout.strip().splitlines()[-1])


def report(tokenizer: str, libs: list[str], runs: int, vocab_cache: str | None = None, clock: str = "wall") -> None:
    """One table per tokenizer: a row per library and kind of constraint (regex, json)."""
    got = {}
    for lib in libs:
        measure(lib, "person", tokenizer, vocab_cache)  # (warm-up: bytecode, the OS's file cache, ours's disk cache)
    for case, (kind, _, _) in CASES.items():
        for _ in range(runs):
            for lib in libs:  # (interleaved, so a busy spell of the machine falls on every library)
                m = measure(lib, case, tokenizer, vocab_cache, clock)
                if m is not None:
                    got.setdefault((lib, kind), []).append(m)
    rows = {}
    for (lib, kind), ms in got.items():
        masks = sorted(x for m in ms for x in m["masks"])
        rows[lib, kind] = (statistics.median(m["prep"] for m in ms), statistics.median(m["first"] for m in ms),
                           statistics.fmean(masks), masks[min(len(masks) - 1, int(0.99 * len(masks)))])
    print(f"\n{tokenizer}: {runs} fresh processes per case; cases {', '.join(CASES)}; {clock} clock"
          + (f"; ours with the vocabulary disk cache {vocab_cache}" if vocab_cache else ""))
    print(f"{'library':<12}{'kind':<6}{'prep (s)':>9}{'first (ms)':>11}{'masks mean (us)':>16}{'p99 (us)':>10}"
          "   ratios to llguidance: prep / first / mean / p99")
    for (lib, kind), row in sorted(rows.items(), key=lambda kv: (kv[0][1], libs.index(kv[0][0]))):
        prep, first, mean, p99 = row
        ref = rows.get(("llguidance", kind))
        line = f"{lib:<12}{kind:<6}{prep:>9.3f}{first * 1e3:>11.2f}{mean * 1e6:>16.1f}{p99 * 1e6:>10.1f}"
        if ref:
            line += "   " + " / ".join(f"{a / b:.2f}x" for a, b in zip(row, ref))
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per library and case")
    ap.add_argument("--libs", default="ours,llguidance,xgrammar")
    ap.add_argument("--tokenizers", default="smol,tekken")
    ap.add_argument("--vocab-cache", help="ours loads its per-vocabulary tables from this folder (see above)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="time steps by the wall clock or CPU time")
    ap.add_argument("--child", nargs=3, metavar=("LIB", "CASE", "TOKENIZER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    for tokenizer in args.tokenizers.split(","):
        report(tokenizer, args.libs.split(","), args.runs, args.vocab_cache, args.clock)


if __name__ == "__main__":
    main()
