"""Lark grammar constraints: ours vs llguidance vs xgrammar, same process, same tokenizer.

    .venv/bin/python benchmarks/grammar_bench.py [--repeat N] [--grammars arith,json,...]

For each grammar (arithmetic, JSON, SQL SELECT subset with case-insensitive keywords,
a toy language with nested blocks and %ignore'd comments; texts in tests/test_grammar.py)
and each library: grammar -> first mask (compile + matcher + first mask, median over
`--repeat` fresh compiles), then along realistic documents tokenized by the SmolLM2
tokenizer (none starts or ends with ignored text: llguidance refuses that), the time of each step = fill the next-token bitmask + accept the token
(median and p99 over every step of every document, one fresh compiled grammar per
library and grammar, documents in sequence: our per-configuration mask cache warms up
as it would in a server; per-vocabulary tries and token columns are built before
timing). Every token of every document must be allowed by each library's mask
(checked). Prints a markdown table; ratios are ours / theirs. `--cpu-time` times with
the process's CPU time instead of the wall clock (steps run in the calling thread).
Once the tokenizers are loaded, gc.freeze() keeps Python's full collections from
rescanning what the process held before (transformers: a full collection then takes
~200-300 ms and falls in some step), for every library alike, as servers do after
start-up (vLLM; our engine.LLM) and as json_schema_bench.py does; `--no-gc-freeze`
measures without it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import fsm  # noqa: E402
from fsm.grammar import GrammarAutomaton, grammar_source  # noqa: E402
from fsm.terms import TermBuilder  # noqa: E402
from tests.test_grammar import GRAMMARS as TEST_GRAMMARS  # noqa: E402

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


def bench_ours(name, grammar, vocab, docs_ids, repeat):
    eos = vocab.eos_ids[0]
    row = np.zeros(vocab.num_words, dtype=np.int32)
    first = []
    auto = None
    for _ in range(repeat):
        t0 = clock()
        src = grammar_source(grammar, "start", TermBuilder())
        auto = GrammarAutomaton(src, vocab, name)
        m = auto.matcher()
        m.fill_next_token_bitmask(row)
        first.append(clock() - t0)
    steps = []
    for ids in docs_ids:
        m = auto.matcher()
        for t in ids + [eos]:
            t0 = clock()
            m.fill_next_token_bitmask(row)
            ok_bit = (row[t >> 5] >> (t & 31)) & 1
            ok = m.accept_token(t)
            steps.append(clock() - t0)
            assert ok_bit and ok, (name, "ours", t)
    return statistics.median(first), steps, auto


def bench_llg(name, grammar, lltok, n_vocab, docs_ids, eos, repeat):
    import llguidance
    import llguidance.numpy as lln
    bm = lln.allocate_token_bitmask(1, n_vocab)
    first = []
    text = llguidance.LLMatcher.grammar_from_lark(grammar)
    for _ in range(repeat):
        t0 = clock()
        m = llguidance.LLMatcher(lltok, text, log_level=0)
        lln.fill_next_token_bitmask(m, bm)
        first.append(clock() - t0)
        assert not m.is_error(), m.get_error()
    steps = []
    for ids in docs_ids:
        m = llguidance.LLMatcher(lltok, text, log_level=0)
        for t in ids + [eos]:
            t0 = clock()
            lln.fill_next_token_bitmask(m, bm)
            ok_bit = (bm[0, t >> 5] >> (t & 31)) & 1
            ok = m.consume_token(t)
            steps.append(clock() - t0)
            assert ok_bit and ok, (name, "llguidance", t, m.get_error())
    return statistics.median(first), steps


def bench_xgr(name, grammar, info, docs_ids, eos, repeat):
    import xgrammar
    bm = xgrammar.allocate_token_bitmask(1, info.vocab_size)
    first = []
    compiled = None
    for _ in range(repeat):
        compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)
        t0 = clock()
        compiled = compiler.compile_grammar(xgrammar.Grammar.from_lark(grammar))
        m = xgrammar.GrammarMatcher(compiled)
        m.fill_next_token_bitmask(bm)
        first.append(clock() - t0)
    steps = []
    for ids in docs_ids:
        m = xgrammar.GrammarMatcher(compiled)
        for t in ids + [eos]:
            t0 = clock()
            m.fill_next_token_bitmask(bm)
            ok_bit = (int(bm[0, t >> 5]) >> (t & 31)) & 1
            ok = m.accept_token(t)
            steps.append(clock() - t0)
            assert ok_bit and ok, (name, "xgrammar", t)
    return statistics.median(first), steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="fresh compiles for first-mask time")
    ap.add_argument("--grammars", default=",".join(GRAMMARS))
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

    from engine.loader import resolve_model
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
        import gc
        gc.collect()
        gc.freeze()

    us = lambda s: f"{s * 1e6:.0f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"  # noqa: E731
    rows = []
    for name in args.grammars.split(","):
        grammar = GRAMMARS[name]
        docs_ids = [tok.encode(d, add_special_tokens=False) for d in DOCS[name]]
        n = sum(len(d) + 1 for d in docs_ids)
        f0, s0, auto = bench_ours(name, grammar, vocab, docs_ids, args.repeat)
        print(f"{name}: ours {auto.stats}", file=sys.stderr)
        r = {"grammar": name, "steps": n, "states": auto.dfa.num_states,
             "ours": (f0, statistics.median(s0), pct(s0, 0.99), max(s0))}
        if not args.no_peers:
            f1, s1 = bench_llg(name, grammar, lltok, vocab.size, docs_ids, eos, args.repeat)
            f2, s2 = bench_xgr(name, grammar, info, docs_ids, eos, args.repeat)
            r["llg"] = (f1, statistics.median(s1), pct(s1, 0.99), max(s1))
            r["xgr"] = (f2, statistics.median(s2), pct(s2, 0.99), max(s2))
        rows.append(r)
        print(f"{name}: done", file=sys.stderr)

    print(f"\nSmolLM2 vocabulary ({vocab.size} tokens); step = fill bitmask + accept token.\n")
    if args.no_peers:
        print("| grammar | steps | DFA states | first mask | median | p99 | max |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            f, med, p99, mx = r["ours"]
            print(f"| {r['grammar']} | {r['steps']} | {r['states']} | {us(f)} | {us(med)} | "
                  f"{us(p99)} | {us(mx)} |")
        return
    print("| grammar | steps | metric | ours | llguidance | xgrammar | ours/llg | ours/xgr |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for k, metric in enumerate(["first mask", "median step", "p99 step", "max step"]):
            a, b, c = r["ours"][k], r["llg"][k], r["xgr"][k]
            print(f"| {r['grammar'] if k == 0 else ''} | {r['steps'] if k == 0 else ''} | {metric} | "
                  f"{us(a)} | {us(b)} | {us(c)} | {a / b:.2f} | {a / c:.2f} |")


if __name__ == "__main__":
    main()
