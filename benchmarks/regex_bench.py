"""Regex constraints: ours vs xgrammar, llguidance and outlines-core, same process.

    .venv/bin/python benchmarks/regex_bench.py [--repeat 5] [--peers ours,xgrammar,...]

Per pattern (SmolLM2 tokenizer, 49k): pattern -> first mask (compile + matcher + first
mask; median of --repeat fresh compiles, no caches), then along a valid text's
canonical tokens the time of each step (fill the bitmask + accept the token): first
pass = first visits of each state for us, second pass (a new matcher on the same
compiled constraint) = revisits. Also our first-visit median on the 131k tekken
vocabulary. Every token of every text must be allowed by every library (checked).
Ratios are ours / theirs: below 1 means we are faster.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from peers import Ours, make_peers  # noqa: E402

from structgen import fsm  # noqa: E402


def word_list(vocab, n=200):
    words, seen = [], set()
    for b in vocab.token_bytes:
        if b and b.startswith(b" ") and b[1:].isalpha() and len(b) >= 7 and b[1:].islower():
            w = b[1:].decode()
            if w not in seen:
                seen.add(w)
                words.append(w)
    return words[:: max(1, len(words) // n)][:n]


def cases(vocab):
    words = word_list(vocab)
    return {
        "email": (r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}", "jane.doe+news@mail.example.org"),
        "iso-datetime": (r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):"
                         r"[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})",
                         "2024-02-29T13:45:09.123Z"),
        "ipv4": (r"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
                 r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])", "192.168.101.254"),
        "phone": (r"\+?1? ?\(?[0-9]{3}\)?[ .-]?[0-9]{3}[ .-]?[0-9]{4}", "+1 (415) 555-0198"),
        "200 words": ("(" + "|".join(words) + ")", words[137]),
        "json-object": (r'\{"name": "[^"\\]{1,40}", "age": (0|[1-9][0-9]{0,2}), "email": '
                        r'"[a-z0-9.]+@[a-z0-9.]+", "tags": \[("[a-z]{1,12}"(, "[a-z]{1,12}"){0,4})?\]\}',
                        '{"name": "Grace Hopper", "age": 85, "email": "grace@navy.mil", '
                        '"tags": ["cobol", "compilers"]}'),
    }


def run_steps(peer, compiled, tokens):
    m = peer.matcher(compiled)
    times = []
    for t in tokens:
        t0 = time.perf_counter()
        peer.fill(m)
        try:
            ok = peer.accept(m, t)
        except ValueError:
            ok = False
        times.append(time.perf_counter() - t0)
        if not ok:
            raise Refused(f"{peer.name} refused token {t} of a valid text")
    return times


class Refused(Exception):
    pass


def ms(x):
    return f"{x * 1e3:.2f}"


def us(x):
    return f"{x * 1e6:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--peers", default="ours,xgrammar,llguidance,outlines-core")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from structgen.engine.loader import resolve_model
    tok = AutoTokenizer.from_pretrained(resolve_model())
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    vocab.trie.lists, vocab.columns  # built once per vocabulary, outside the timings
    peers = make_peers(tok, vocab, args.peers.split(","))
    rows = []
    for name, (pattern, text) in cases(vocab).items():
        tokens = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
        res = {}
        for peer in peers:
            ttfm = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                c = peer.compile("regex", pattern)
                peer.fill(peer.matcher(c))
                ttfm.append(time.perf_counter() - t0)
            c = peer.compile("regex", pattern)
            try:
                first = run_steps(peer, c, tokens)
                # revisits: the median over --repeat passes of a pass's mean step (a pass
                # is a few µs-steps: one pass alone is mostly timer noise)
                again = [statistics.median(statistics.mean(run_steps(peer, c, tokens))
                                           for _ in range(args.repeat))]
            except Refused as e:
                print(f"({name}: {e})")
                first = again = [float("nan")]
            res[peer.name] = (statistics.median(ttfm), first, again)
        rows.append((name, len(tokens), res))
    names = [p.name for p in peers]
    print("\n## Pattern -> first mask (ms, median)\n")
    print("| pattern | " + " | ".join(names) + " | " + " | ".join(f"ours/{n}" for n in names[1:]) + " |")
    print("|---" * (2 * len(names)) + "|")
    for name, _, res in rows:
        o = res["ours"][0]
        print(f"| {name} | " + " | ".join(ms(res[n][0]) for n in names) + " | "
              + " | ".join(f"{o / res[n][0]:.2f}" for n in names[1:]) + " |")
    print("\n## Time per mask along a valid text (µs): fill + accept; revisits (median over "
          "--repeat passes of the mean step), and our first visits (median / max)\n")
    print("| pattern | tokens | " + " | ".join(f"{n} mean" for n in names)
          + " | ours first-visit median | ours first-visit max | ours/xgrammar |")
    print("|---" * (len(names) + 5) + "|")
    for name, n_tok, res in rows:
        means = {n: statistics.mean(res[n][2]) for n in names}
        first = res["ours"][1]
        ratio = f"{means['ours'] / means['xgrammar']:.2f}" if "xgrammar" in means else "-"
        print(f"| {name} | {n_tok} | " + " | ".join(us(means[n]) for n in names)
              + f" | {us(statistics.median(first))} | {us(max(first))} | {ratio} |")
    # the 131k vocabulary: our first visits only (peers need an HF tokenizer for it)
    try:
        from oracles import mistral_data
        big = fsm.Vocabulary.from_tekken_json(mistral_data("tekken_240911.json"))
    except Exception as e:  # mistral-common data not installed
        print(f"\n(skipping the 131k vocabulary: {e})")
        return
    big.trie.lists, big.columns
    ours = Ours(big)
    print("\n## First visits on the 131k tekken vocabulary (ours, µs per mask)\n")
    print("| pattern | first mask (ms) | first-visit median | max |\n|---|---|---|---|")
    for name, (pattern, text) in cases(vocab).items():
        t0 = time.perf_counter()
        c = ours.compile("regex", pattern)
        ours.fill(ours.matcher(c))
        ttfm = time.perf_counter() - t0
        data, tokens = text.encode(), []
        by_bytes = {b: i for i, b in enumerate(big.token_bytes) if b}
        i = 0
        while i < len(data):  # greedy longest-match tokenization over the vocabulary
            for k in range(min(16, len(data) - i), 0, -1):
                if data[i:i + k] in by_bytes:
                    tokens.append(by_bytes[data[i:i + k]])
                    i += k
                    break
        first = run_steps(ours, c, tokens + [big.eos_ids[0]])
        print(f"| {name} | {ms(ttfm)} | {us(statistics.median(first))} | {us(max(first))} |")


if __name__ == "__main__":
    main()
