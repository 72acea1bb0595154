"""Lark grammar constraints: ours vs llguidance vs xgrammar, same process, same tokenizer.

    .venv/bin/python benchmarks/grammar_bench.py [--repeat N] [--passes P] [--grammars arith,json,...]

For each grammar (arithmetic, JSON, SQL SELECT subset with case-insensitive keywords,
a toy language with nested blocks and %ignore'd comments; texts in tests/oracles.py)
and each library: grammar -> first mask (compile + matcher + first mask, median over
`--repeat` fresh compiles), then along realistic documents tokenized by the SmolLM2
tokenizer (none starts or ends with ignored text: llguidance refuses that), the time of
each step = fill the next-token bitmask + accept the token. A pass runs every document
in sequence through one fresh compiled grammar (our per-configuration mask cache warms
up across them as it would in a server; per-vocabulary tries and token columns are built
before timing); `--passes` passes per library, and a step's time is its minimum over
them, as json_schema_bench.py takes it (on 2 shared cores one step of a single pass can
take 2x its time, and a document of ~150 steps has its p99 at its second slowest). The
median, p99 and max are over those minima; "p99 one pass" is the first pass's own p99,
where Python's collector also lands (ours: a generation-1 collection costs ~0.8 ms in
whichever step allocates next). Every token of every document must be allowed by each
library's mask (checked). Prints a markdown table; ratios are ours / theirs.
`--cpu-time` times with the process's CPU time instead of the wall clock (steps run in
the calling thread).
Once the tokenizers are loaded, gc.freeze() keeps Python's full collections from
rescanning what the process held before (transformers: a full collection then takes
~200-300 ms and falls in some step), for every library alike, as servers do after
start-up (vLLM; our engine.LLM) and as json_schema_bench.py does; `--no-gc-freeze`
measures without it.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from oracles import GRAMMARS as TEST_GRAMMARS  # noqa: E402

from structgen import fsm  # noqa: E402
from structgen.fsm.core.terms import TermBuilder  # noqa: E402
from structgen.fsm.grammar.automaton import GrammarAutomaton, grammar_source  # noqa: E402

# llguidance reads lazy quantifiers greedily, so the toy language's block comment is
# spelled without one here (the same language), for all three libraries.
GRAMMARS = dict(TEST_GRAMMARS)
GRAMMARS["toy"] = TEST_GRAMMARS["toy"].replace(
    'COMMENT: "//" /[^\\n]*/ | "/*" /(.|\\n)*?/ "*/"',
    'COMMENT: "//" /[^\\n]*/ | /\\/\\*([^*]|\\*+[^*\\/])*\\*+\\//')
assert GRAMMARS["toy"] != TEST_GRAMMARS["toy"]

DOCS = {
    "arith": [
        "(12.5 + 3) * -(4 - 7.25e2) / (1 + 2 * (3 + 4 * (5 - 6)))",
        "1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 - 11 * 12 / 13",
        "((((((1))))))*((2+3)*(4+5))-(6/(7-(8*(9+10))))",
        "3.14159 * 2.71828 / 1.41421 + 42 - -17 * (0.5 + 0.25) / 1e3",
    ],
    "json": [
        '{"name": "Ada Lovelace", "born": 1815, "languages": ["English", "French"], '
        '"notes": {"analytical_engine": true, "bernoulli": [1, -0.5, 0.1666], '
        '"quote": "The Analytical Engine weaves algebraic patterns \\"just as\\" the '
        'Jacquard loom weaves flowers and leaves."}, "children": null}',
        '[{"id": 1, "tags": ["a", "b"], "score": 0.93}, {"id": 2, "tags": [], "score": 1e-3}, '
        '{"id": 3, "tags": ["c"], "score": -12.5, "meta": {"ok": false, "src": "web"}}]',
        '{"users": [{"name": "Zoë", "email": "zoe@example.com", "roles": ["admin", "dev"], '
        '"active": true}, {"name": "Łukasz", "email": "lukasz@example.org", "roles": [], '
        '"active": false}], "count": 2, "next": null}',
    ],
    "sql": [
        "SELECT u.name, COUNT(*) AS n FROM users AS u JOIN orders o ON u.id = o.user_id "
        "WHERE u.active = 1 AND NOT o.status = 'cancelled' GROUP BY u.name ORDER BY n DESC "
        "LIMIT 10;",
        "select distinct city, avg(age) from people where age >= 18 and (country = 'FR' or "
        "country = 'DE') and email is not null order by city asc limit 100",
        "Select p.title, p.price From products p Where p.price < 100 And p.stock > 0 "
        "Order By p.price Desc, p.title",
    ],
    "toy": [
        "sum = 0;  // compute a sum\ni = 0;\nwhile (i < 10) {\n    sum = sum + i * 2;\n"
        "    i = i + 1;\n}\nif (sum > 50) {\n    print(\"big\");\n} else {\n"
        "    /* small sums are\n       reported too */\n    print(sum);\n}",
        "x = f(1, 2 + 3, g(4));\n{\n    y = x * x;\n    {\n        z = y % 7;  // nested\n"
        "        print(z);\n    }\n}\nwhile (x != 0) { x = x - 1; }",
    ],
}


clock = time.perf_counter  # --cpu-time: time.process_time (this process's CPU time)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def bench_ours(name, grammar, vocab, docs_ids, repeat, passes):
    eos = vocab.eos_ids[0]
    row = np.zeros(vocab.num_words, dtype=np.int32)

    def fresh():
        src = grammar_source(grammar, "start", TermBuilder())
        auto = GrammarAutomaton(src, vocab, name)
        m = auto.matcher()
        m.fill_next_token_bitmask(row)
        return auto

    def step(m, t):
        m.fill_next_token_bitmask(row)
        return (row[t >> 5] >> (t & 31)) & 1 and m.accept_token(t)
    first, runs = _first_masks(fresh, repeat), []
    for _ in range(passes):
        auto = fresh()
        gc.collect()  # (the last pass's automaton, now garbage: see _first_masks)
        runs.append(timed_pass(docs_ids, eos, auto.matcher, step, (name, "ours")))
    return first, runs, auto


def timed_pass(docs_ids, eos, matcher, step, who) -> list:
    """Seconds of each step `step(m, token)` (fill the mask, check the token's bit,
    accept it: true when allowed) along every document, a fresh `matcher()` each."""
    steps = []
    for ids in docs_ids:
        m = matcher()
        for t in ids + [eos]:
            t0 = clock()
            ok = step(m, t)
            steps.append(clock() - t0)
            assert ok, (*who, t)
    return steps


def _first_masks(fresh, repeat):
    """Median time of `repeat` calls of fresh() (compile + matcher + first mask). The
    garbage they leave is collected here, untimed: otherwise a step of the next pass pays
    the full collection that frees it (ours: a discarded automaton is cyclic garbage,
    ~2-8k objects, ~1 ms to collect in Python)."""
    times = []
    for _ in range(repeat):
        t0 = clock()
        fresh()
        times.append(clock() - t0)
    gc.collect()
    return statistics.median(times)


def bench_llg(name, grammar, lltok, n_vocab, docs_ids, eos, repeat, passes):
    import llguidance
    import llguidance.numpy as lln
    bm = lln.allocate_token_bitmask(1, n_vocab)
    text = llguidance.LLMatcher.grammar_from_lark(grammar)

    def fresh():
        m = llguidance.LLMatcher(lltok, text, log_level=0)
        lln.fill_next_token_bitmask(m, bm)
        assert not m.is_error(), m.get_error()
        return m

    def step(m, t):
        lln.fill_next_token_bitmask(m, bm)
        return (bm[0, t >> 5] >> (t & 31)) & 1 and m.consume_token(t)

    def matcher():  # a matcher per document: llguidance's caches live in the tokenizer
        return llguidance.LLMatcher(lltok, text, log_level=0)
    first, runs = _first_masks(fresh, repeat), []
    for _ in range(passes):
        gc.collect()
        runs.append(timed_pass(docs_ids, eos, matcher, step, (name, "llguidance")))
    return first, runs


def bench_xgr(name, grammar, info, docs_ids, eos, repeat, passes):
    import xgrammar
    bm = xgrammar.allocate_token_bitmask(1, info.vocab_size)

    compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)

    def fresh():
        compiled = compiler.compile_grammar(xgrammar.Grammar.from_lark(grammar))
        xgrammar.GrammarMatcher(compiled).fill_next_token_bitmask(bm)
        return compiled

    def step(m, t):
        m.fill_next_token_bitmask(bm)
        return (int(bm[0, t >> 5]) >> (t & 31)) & 1 and m.accept_token(t)
    first, runs = _first_masks(fresh, repeat), []
    for _ in range(passes):
        compiled = fresh()
        gc.collect()
        runs.append(timed_pass(docs_ids, eos, lambda: xgrammar.GrammarMatcher(compiled), step,
                               (name, "xgrammar")))
    return first, runs


def summary(first, runs):
    """(first mask, median, p99, max) of the per-step minima over the passes, then the
    p99 of the first pass alone."""
    best = [min(xs) for xs in zip(*runs)]
    return first, statistics.median(best), pct(best, 0.99), max(best), pct(runs[0], 0.99)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="fresh compiles for first-mask time")
    ap.add_argument("--grammars", default=",".join(GRAMMARS))
    ap.add_argument("--passes", type=int, default=3,
                    help="passes over the documents, each with a fresh compile; a step's time is "
                         "its minimum over them (this machine's hiccups out)")
    ap.add_argument("--no-peers", action="store_true", help="only our library")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with the process's CPU time, not the wall clock (a machine "
                         "shared with other work: its waits for a core are not counted)")
    ap.add_argument("--no-gc-freeze", action="store_true",
                    help="do not gc.freeze() once the tokenizers are loaded (by default the "
                         "collector's full collections then no longer rescan transformers' "
                         "~300k objects; every object the libraries make is still scanned)")
    args = ap.parse_args()
    if args.cpu_time:
        global clock
        clock = time.process_time

    from transformers import AutoTokenizer

    from structgen.engine.loader import resolve_model
    tok = AutoTokenizer.from_pretrained(resolve_model())
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    vocab.trie  # built once per vocabulary (shared by every constraint): not counted
    vocab.trie.lists  # the list form used for small subtrees, also once per vocabulary
    vocab.columns  # token columns (loop walks, fsm/grammar_masks.py): once per vocabulary
    eos = vocab.eos_ids[0]
    if not args.no_peers:
        import llguidance.hf
        import xgrammar
        lltok = llguidance.hf.from_tokenizer(tok)
        info = xgrammar.TokenizerInfo.from_huggingface(tok, vocab_size=vocab.size)
    if not args.no_gc_freeze:
        gc.collect()
        gc.freeze()

    us = lambda s: f"{s * 1e6:.0f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"  # noqa: E731
    rows = []
    for name in args.grammars.split(","):
        grammar = GRAMMARS[name]
        docs_ids = [tok.encode(d, add_special_tokens=False) for d in DOCS[name]]
        n = sum(len(d) + 1 for d in docs_ids)
        f0, s0, auto = bench_ours(name, grammar, vocab, docs_ids, args.repeat, args.passes)
        print(f"{name}: ours {auto.stats}", file=sys.stderr)
        r = {"grammar": name, "steps": n, "states": auto.dfa.num_states, "ours": summary(f0, s0)}
        if not args.no_peers:
            r["llg"] = summary(*bench_llg(name, grammar, lltok, vocab.size, docs_ids, eos,
                                          args.repeat, args.passes))
            r["xgr"] = summary(*bench_xgr(name, grammar, info, docs_ids, eos, args.repeat,
                                          args.passes))
        rows.append(r)
        print(f"{name}: done", file=sys.stderr)

    print(f"\nSmolLM2 vocabulary ({vocab.size} tokens); step = fill bitmask + accept token; "
          f"median, p99 and max of each step's minimum over {args.passes} passes (fresh "
          "compiles); 'p99 one pass': the first pass alone.\n")
    metrics = ["first mask", "median step", "p99 step", "max step", "p99 one pass"]
    if args.no_peers:
        print("| grammar | steps | DFA states | " + " | ".join(metrics) + " |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            f, med, p99, mx, one = r["ours"]
            print(f"| {r['grammar']} | {r['steps']} | {r['states']} | {us(f)} | {us(med)} | "
                  f"{us(p99)} | {us(mx)} | {us(one)} |")
        return
    print("| grammar | steps | metric | ours | llguidance | xgrammar | ours/llg | ours/xgr |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for k, metric in enumerate(metrics):
            a, b, c = r["ours"][k], r["llg"][k], r["xgr"][k]
            print(f"| {r['grammar'] if k == 0 else ''} | {r['steps'] if k == 0 else ''} | {metric} | "
                  f"{us(a)} | {us(b)} | {us(c)} | {a / b:.2f} | {a / c:.2f} |")


if __name__ == "__main__":
    main()
