"""Real-world schemas: compile each JSON Schema file of a folder, strict and lenient, and
walk the lenient automaton at random; every walk that ends must validate.

    .venv/bin/python benchmarks/schema_sweep.py DIR [--walks 2] [--max-tokens 400] [--seed 0] [--close 0]
        [--recursion auto|grammar]

For a corpus of one's own (SchemaStore's ~500 schemas: benchmarks/schemastore_corpus.py
writes them; a project's tool definitions): per
file, strict mode's result (time to first mask, or the SchemaError naming keyword and
pointer), lenient mode's (time to first mask, keywords relaxed), then --walks walks
that pick uniformly among the allowed tokens (SmolLM2 tokenizer) for at most
--max-tokens steps: how many ended, how many of those `jsonschema` accepts and hold no
key twice in one object (it must be all), the median / p99 / slowest step and the DFA
states made. Uniform walks of big schemas seldom end (a free string takes its closing quote with p ~1/49k): `--close P`
picks, with probability P, among the allowed tokens that close most (EOS, then a
quote with `}` and `]` after it, then `}` and `]`), so that more walks end and are
validated. Step times are fill + accept (the walk's own choice is not counted). A crash or an invalid
output is a bug; a slow step shows where masks cost. Every file gets 120 s per mode.
Times are wall clock on this machine, one run: compare ratios between commits, not
absolute figures.
"""
from __future__ import annotations

import argparse
import gc
import json
import pathlib
import random
import re
import signal
import time
import warnings

import numpy as np

from structgen import fsm
from structgen.fsm.core.errors import ConstraintError
from structgen.fsm.json.schema import build_automaton


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout


def closing_levels(vocab) -> np.ndarray:
    """uint8 per token id, how much it closes: 3 EOS, 2 made of `"}]` and led by a quote
    (inside a string, `}` and `]` are content), 1 made of `}]`, else 0."""
    r = np.zeros(len(vocab.token_bytes), dtype=np.uint8)
    for i, b in enumerate(vocab.token_bytes):
        if b and not b.strip(b'"}]'):
            r[i] = 2 if b[:1] == b'"' else 1
    r[[i for i in vocab.eos_ids if i < len(r)]] = 3
    return r


class _Repeated(Exception):
    pass


def _distinct(pairs: list) -> dict:
    """json.loads' object_pairs_hook: the object, or _Repeated where a key comes twice
    (a parser would keep the last: not the object the output spells)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        raise _Repeated(sorted(k for k in out if sum(k == x for x, _ in pairs) > 1)[:3])
    return out


def walk(auto, vocab, rng: random.Random, max_tokens: int, slowest: list,
         close: float = 0.0, closing: np.ndarray | None = None) -> tuple[bytes | None, list, str | None]:
    """One random walk: (the text if it ended, step times, a problem if any). `slowest`:
    [seconds, the text before that step] of the slowest step so far, updated. `close`:
    the probability of taking, where one is allowed, a token that closes most by
    `closing` (closing_levels; --close)."""
    m, row, out, steps = auto.matcher(), np.zeros(vocab.num_words, dtype=np.int32), [], []
    n = len(vocab.token_bytes)
    for _ in range(max_tokens):
        t0 = time.perf_counter()
        m.fill_next_token_bitmask(row)
        fill = time.perf_counter() - t0
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:n]
        allowed = np.flatnonzero(bits)
        if not len(allowed):
            return None, steps, "empty mask"
        if close and rng.random() < close:
            level = closing.take(allowed)
            if level.max():
                allowed = allowed[level == level.max()]
        t = int(rng.choice(allowed))
        t0 = time.perf_counter()
        ok = m.accept_token(t)
        steps.append(fill + time.perf_counter() - t0)  # (the walk's own choice not counted)
        if steps[-1] > slowest[0]:
            slowest[:] = [steps[-1], out[-12:]]
        if not ok:
            return None, steps, "its own mask's token refused"
        if m.is_terminated():
            return b"".join(vocab.token_bytes[x] for x in out), steps, None
        out.append(t)
    return None, steps, None


def sweep_file(path: pathlib.Path, vocab, args, closing: np.ndarray) -> list[str]:
    schema = json.loads(path.read_text())
    lines = []
    for strict in (True, False):
        mode = "strict " if strict else "lenient"
        signal.alarm(120)
        try:
            with warnings.catch_warnings(record=True) as relaxed:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                auto = build_automaton(schema, vocab, strict=strict, recursion=args.recursion)
                auto.matcher().fill_next_token_bitmask(np.zeros(vocab.num_words, dtype=np.int32))
                ttfm = time.perf_counter() - t0
            line = f"TTFM {1e3 * ttfm:7.1f} ms, {len(relaxed)} relaxed"
            kinds = {getattr(a, "recursion", None) for a in getattr(auto, "automata", [auto])} - {None}
            if kinds:
                line += f", recursion {'+'.join(sorted(kinds))}"
            if not strict:
                import jsonschema
                import referencing.exceptions
                check = jsonschema.validators.validator_for(schema)(schema)
                rng, steps, ended, valid, problems = random.Random(args.seed), [], 0, 0, []
                slowest = [0.0, []]
                for _ in range(args.walks):
                    text, times, problem = walk(auto, vocab, rng, args.max_tokens, slowest, args.close, closing)
                    steps += times
                    if problem:
                        problems.append(problem)
                    if text is not None:
                        ended += 1
                        try:
                            errors = list(check.iter_errors(json.loads(text, object_pairs_hook=_distinct)))
                        except _Repeated as e:
                            errors = [f"a key twice in one object: {e}"]
                        except ValueError:
                            errors = ["not JSON"]
                        except referencing.exceptions.Unresolvable as e:  # (another document)
                            problems.append(f"not validated: {str(e)[:80]}")
                            continue
                        except re.error as e:  # (a pattern Python's re cannot read: ECMA's (?<name>...))
                            problems.append(f"not validated: jsonschema cannot read a pattern: {e}")
                            continue
                        if errors:
                            problems.append(f"INVALID OUTPUT {text[:120]!r}: {str(errors[0])[:100]}")
                        else:
                            valid += 1
                s = sorted(steps) or [0.0]  # (--walks 0: no steps)
                line += (f" | walks ended {ended}/{args.walks}, valid {valid}; steps {len(steps)}: median "
                         f"{1e6 * s[len(s) // 2]:.0f} us, p99 {1e3 * s[int(0.99 * (len(s) - 1))]:.1f} ms, "
                         f"slowest {1e3 * s[-1]:.1f} ms (after "
                         f"{b''.join(vocab.token_bytes[x] for x in slowest[1])[-40:]!r}); "
                         f"{sum(a.dfa.num_states for a in getattr(auto, 'automata', [auto]))} states")
                if problems:
                    line += " | " + "; ".join(problems[:3])
        except ConstraintError as e:
            line = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        except _Timeout:
            line = "TIMEOUT (120 s)"
        finally:
            signal.alarm(0)
        lines.append(f"{path.stem:28s} {mode} {line}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=pathlib.Path)
    ap.add_argument("--walks", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--close", type=float, default=0.0,
                    help="probability of taking a closing token (quote, brace, bracket, EOS) where allowed")
    ap.add_argument("--recursion", default="auto", choices=["auto", "grammar"],
                    help="how recursive schemas run (compile_json_schema's option)")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from structgen.engine.loader import resolve_model
    vocab = fsm.Vocabulary.from_tokenizer(AutoTokenizer.from_pretrained(resolve_model()))
    warm = build_automaton({"type": "object"}, vocab)
    warm.mask(warm.start)  # per-vocabulary tables, not timed
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGALRM, _alarm)
    closing = closing_levels(vocab)
    for path in sorted(args.folder.glob("*.json")):
        for line in sweep_file(path, vocab, args, closing):
            print(line, flush=True)


if __name__ == "__main__":
    main()
