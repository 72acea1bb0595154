"""JSON Schema constraints: time to first mask and time between masks, side by side with
xgrammar, llguidance and outlines-core, same process, SmolLM2 tokenizer.

    .venv/bin/python benchmarks/json_schema_bench.py [--reps 3] [--no-outlines] [--only NAME]

TTFM: compile from scratch (no caches: a fresh term builder / compiler each time) plus
the first token mask; best of --reps. Between masks: the valid instance below, written
compactly (our canonical text: CompiledSchema.canonical), tokenized with the SmolLM2
tokenizer; per step fill_next_token_bitmask + accept_token (then the EOS mask), along
a first pass after each of the --reps compiles: per step the minimum over those passes
(this machine's hiccups out; a document of 10-30 steps has its p99 at its slowest
step), then the median and p99 over the steps. "First document": the time to first mask
plus the sum of those steps, for one request's whole constraint work on a fresh compile
(a lazy library builds its states' masks as the document meets them; xgrammar builds
most of them while compiling). outlines-core runs in a child process
with a time limit (its compile can take minutes). xgrammar runs with any_whitespace=False,
llguidance with compact whitespace; both as their defaults otherwise (xgrammar
strict_mode=True).
Every library first runs one throwaway schema (WARMUP) that is not reported.
"""
from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import statistics
import sys
import time

import numpy as np

ADDRESS = {"type": "object", "properties": {
    "street": {"type": "string", "maxLength": 80}, "city": {"type": "string", "maxLength": 40},
    "zip": {"type": "string", "pattern": "^[0-9]{5}(-[0-9]{4})?$"},
    "country": {"type": "string", "enum": ["US", "CA", "MX", "FR", "DE"]}},
    "required": ["street", "city", "country"], "additionalProperties": False}

BIG = {"type": "object", "additionalProperties": False, "properties": {
    "id": {"type": "string", "format": "uuid"},
    "first_name": {"type": "string", "minLength": 1, "maxLength": 50},
    "last_name": {"type": "string", "minLength": 1, "maxLength": 50},
    "email": {"type": "string", "format": "email"},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "height_m": {"type": "number", "minimum": 0.3, "maximum": 2.8},
    "is_active": {"type": "boolean"},
    "role": {"type": "string", "enum": ["admin", "editor", "viewer", "guest"]},
    "created_at": {"type": "string", "format": "date-time"},
    "birthday": {"type": "string", "format": "date"},
    "phone": {"type": "string", "pattern": "^\\+?[0-9]{7,15}$"},
    "website": {"type": "string", "maxLength": 200},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 10},
    "scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 100}},
    "address": ADDRESS,
    "billing_address": {"anyOf": [ADDRESS, {"type": "null"}]},
    "company": {"type": "string"},
    "title": {"type": "string"},
    "department": {"type": "string", "enum": ["eng", "sales", "ops", "hr"]},
    "manager_id": {"type": ["string", "null"]},
    "salary": {"type": "number", "exclusiveMinimum": 0},
    "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
    "languages": {"type": "array", "items": {"type": "string"}},
    "timezone": {"type": "string"},
    "notes": {"type": "string", "maxLength": 1000},
    "rating": {"type": "number", "minimum": 1, "maximum": 5},
    "login_count": {"type": "integer", "minimum": 0},
    "last_login": {"type": ["string", "null"], "format": "date-time"},
    "preferences": {"type": "object", "properties": {"theme": {"enum": ["light", "dark"]},
                                                      "newsletter": {"type": "boolean"}},
                    "additionalProperties": False},
    "status": {"const": "ok"},
}, "required": ["id", "first_name", "last_name", "email", "age", "is_active", "role", "address"]}

BIG_DOC = {
    "id": "123e4567-e89b-12d3-a456-426614174000", "first_name": "Ada", "last_name": "Lovelace",
    "email": "ada@example.com", "age": 36, "height_m": 1.65, "is_active": True, "role": "admin",
    "created_at": "2024-05-01T12:30:00Z", "birthday": "1815-12-10", "phone": "+441234567890",
    "website": "https://example.com/ada", "tags": ["math", "poetry"], "scores": [99, 87, 100],
    "address": {"street": "12 St James's Square", "city": "London", "zip": "12345", "country": "FR"},
    "billing_address": None, "company": "Analytical Engines Ltd", "title": "Countess",
    "department": "eng", "manager_id": None, "salary": 12345.5, "currency": "GBP",
    "languages": ["en", "fr"], "timezone": "Europe/London", "notes": "First programmer.",
    "rating": 4.5, "login_count": 42, "last_login": "2024-05-02T08:00:00+01:00",
    "preferences": {"theme": "dark", "newsletter": False}, "status": "ok"}

# A Kubernetes Deployment manifest (a subset of the real schema's structure: ~20 objects,
# ~50 property names, string maps, arrays of containers)
_CONTAINER = {"type": "object", "properties": {
    "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
    "image": {"type": "string"},
    "command": {"type": "array", "items": {"type": "string"}},
    "args": {"type": "array", "items": {"type": "string"}},
    "env": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "value": {"type": "string"},
        "valueFrom": {"type": "object", "properties": {"secretKeyRef": {"type": "object", "properties": {
            "name": {"type": "string"}, "key": {"type": "string"}, "optional": {"type": "boolean"}},
            "required": ["key"]}}}},
        "required": ["name"], "additionalProperties": False}},
    "ports": {"type": "array", "items": {"type": "object", "properties": {
        "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
        "protocol": {"enum": ["TCP", "UDP", "SCTP"]}, "name": {"type": "string"}}, "required": ["containerPort"]}},
    "resources": {"type": "object", "properties": {
        "limits": {"type": "object", "additionalProperties": {"type": "string", "pattern": "^[0-9]+(m|Mi|Gi)?$"}},
        "requests": {"type": "object", "additionalProperties": {"type": "string", "pattern": "^[0-9]+(m|Mi|Gi)?$"}}}},
    "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]}},
    "required": ["name", "image"]}
_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
DEPLOYMENT = {"type": "object", "properties": {
    "apiVersion": {"const": "apps/v1"}, "kind": {"const": "Deployment"},
    "metadata": {"type": "object", "properties": {
        "name": {"type": "string"}, "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}},
        "annotations": _STRINGS}, "required": ["name"]},
    "spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 0},
        "selector": {"type": "object", "properties": {"matchLabels": _STRINGS}},
        "template": {"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"labels": _STRINGS}},
            "spec": {"type": "object", "properties": {
                "containers": {"type": "array", "items": _CONTAINER, "minItems": 1},
                "initContainers": {"type": "array", "items": _CONTAINER},
                "restartPolicy": {"enum": ["Always", "OnFailure", "Never"]},
                "nodeSelector": _STRINGS},
                "required": ["containers"]}}}},
        "required": ["selector", "template"]}},
    "required": ["apiVersion", "kind", "metadata", "spec"]}
DEPLOYMENT_DOC = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {
        "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
            "name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "env": [{"name": "MODE", "value": "prod"}],
            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}]}}}}

TREE = {"$defs": {"node": {"type": "object", "properties": {
    "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["value"], "additionalProperties": False}}, "$ref": "#/$defs/node"}

CASES = [  # name, schema, document, our options
    ("big-30-props", BIG, BIG_DOC, {}),
    ("nested", {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {
        "type": "object", "properties": {"c": {"type": "array", "items": {"type": "object", "properties": {
            "d": {"type": "integer"}}, "required": ["d"], "additionalProperties": False}}},
        "required": ["c"], "additionalProperties": False}}, "required": ["b"], "additionalProperties": False}},
        "required": ["a"], "additionalProperties": False},
     {"a": {"b": {"c": [{"d": 1}, {"d": 22}, {"d": 333}]}}}, {}),
    ("pattern", {"type": "object", "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "ip": {"type": "string", "pattern": "^([0-9]{1,3}\\.){3}[0-9]{1,3}$"}},
        "required": ["sku", "ip"], "additionalProperties": False},
     {"sku": "ABC-1234", "ip": "10.0.0.1"}, {}),
    ("lengths", {"type": "object", "properties": {
        "text": {"type": "string", "minLength": 10, "maxLength": 10000},
        "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 1000}},
        "required": ["text", "items"], "additionalProperties": False},
     {"text": "The quick brown fox jumps over the lazy dog " * 5, "items": list(range(40))}, {}),
    ("numbers", {"type": "object", "properties": {
        "lat": {"type": "number", "minimum": -90, "maximum": 90},
        "lon": {"type": "number", "minimum": -180, "maximum": 180},
        "count": {"type": "integer", "minimum": 10, "exclusiveMaximum": 12345},
        "price": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 1000.25}},
        "required": ["lat", "lon", "count", "price"], "additionalProperties": False},
     {"lat": 48.8566, "lon": -2.3522, "count": 1234, "price": 19.99}, {}),
    ("anyOf", {"type": "object", "properties": {"shape": {"anyOf": [
        {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
         "required": ["kind", "r"], "additionalProperties": False},
        {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "number"},
                                          "h": {"type": "number"}},
         "required": ["kind", "w", "h"], "additionalProperties": False}]}},
        "required": ["shape"], "additionalProperties": False},
     {"shape": {"kind": "rect", "w": 3, "h": 4.5}}, {}),
    ("recursive", TREE, {"value": 1, "children": [{"value": 2, "children": []}, {"value": 3}]},
     {}),  # exact: the grammar path
    ("unicode", {"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^[À-ÿ a-z]+$"},
        "greeting": {"enum": ["こんにちは", "привет", "héllo", "你好"]}},
        "required": ["name", "greeting"], "additionalProperties": False},
     {"name": "élève àéè", "greeting": "привет"}, {}),
    ("enum-50", {"type": "object", "properties": {"country": {"enum": [f"country-{i}" for i in range(50)]},
                                                "code": {"type": "integer", "enum": list(range(100, 150))}},
                 "required": ["country", "code"], "additionalProperties": False},
     {"country": "country-42", "code": 142}, {}),
    ("array-of-objects", {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}, "price": {"type": "number"}},
        "required": ["name", "qty", "price"], "additionalProperties": False}, "minItems": 1, "maxItems": 50},
     [{"name": "apple", "qty": 3, "price": 0.5}, {"name": "pear", "qty": 1, "price": 0.75}], {}),
    ("oneOf-discriminated", {"oneOf": [
        {"type": "object", "properties": {"type": {"const": "cat"}, "meows": {"type": "boolean"}},
         "required": ["type", "meows"], "additionalProperties": False},
        {"type": "object", "properties": {"type": {"const": "dog"}, "barks": {"type": "integer"}},
         "required": ["type", "barks"], "additionalProperties": False}]},
     {"type": "dog", "barks": 3}, {}),
    ("formats", {"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"},
        "mail": {"type": "string", "format": "email"}, "ip": {"type": "string", "format": "ipv4"}},
        "required": ["when", "id", "mail", "ip"], "additionalProperties": False},
     {"when": "2024-02-29T23:59:59.5+02:00", "id": "123e4567-e89b-12d3-a456-426614174000",
      "mail": "x.y@example.org", "ip": "192.168.1.1"}, {}),
    ("allOf", {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                         {"properties": {"b": {"type": "string", "maxLength": 5}}, "required": ["b"]}]},
     {"a": 5, "b": "hey"}, {}),
    ("k8s-deployment", DEPLOYMENT, DEPLOYMENT_DOC, {}),
    ("unique-tags", {"type": "object", "properties": {  # (xgrammar ignores uniqueItems; llguidance refuses it)
        "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        "required": ["name", "tags"], "additionalProperties": False},
     {"name": "release notes", "tags": ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]}, {}),
    ("unique-codes", {"type": "object", "properties": {  # (gitlab's exit_codes, compose's expose)
        "exit_codes": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        "expose": {"type": "array", "items": {"type": ["string", "number"]}, "uniqueItems": True}},
        "required": ["exit_codes", "expose"], "additionalProperties": False},
     {"exit_codes": [0, 1, 2, 13, 127, 128, 137, 255, 3, 42], "expose": [80, "443/tcp", 8080, "9000-9010", 3000.5]},
     {}),
    ("unique-enum", {"type": "object", "properties": {  # (set[Literal[...]] of 24 values; travis' osx_image)
        "labels": {"type": "array", "items": {"enum": [f"label-{c}" for c in "abcdefghijklmnopqrstuvwx"]},
                   "uniqueItems": True, "minItems": 1}},
        "required": ["labels"], "additionalProperties": False},
     {"labels": [f"label-{c}" for c in "hdqawkbt"]}, {}),
]


WARMUP = ({"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"}, "a": {}}},
          {"s": "a b", "n": 1.5, "a": [1, {"k": "v"}]})


def _stats(xs):
    """(median, p99, sum) of step times."""
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(0.99 * len(xs)))], sum(xs)


def _time_steps(fill, accept, tokens):
    """Seconds of each step (fill the mask, accept the token) along `tokens`; None as
    soon as a token is refused."""
    steps = []
    for tid in tokens:
        t0 = time.perf_counter()
        fill()
        ok = accept(tid)
        steps.append(time.perf_counter() - t0)
        if not ok:
            return None
    return steps


def _runs(compile_first_mask, tokens, reps):
    """`reps` runs of: compile from scratch + first mask (timed), then a first pass
    along `tokens`. Returns (best TTFM, per-step minimum over the runs' passes or None
    if a token was refused, the last run's compiled object)."""
    ttfm, best = [], None
    for _ in range(reps):
        # the previous run's objects are freed before the clock starts: their teardown
        # (ours: ~0.05-0.7 ms of Python objects) is the end of the last request, not
        # part of this one's time to first mask
        fill = accept = compiled = None  # noqa: F841
        t0 = time.perf_counter()
        fill, accept, compiled = compile_first_mask()
        ttfm.append(time.perf_counter() - t0)
        steps = _time_steps(fill, accept, tokens)
        if steps is None:
            return min(ttfm), None, compiled
        best = steps if best is None else [min(a, b) for a, b in zip(best, steps)]
    return min(ttfm), best, compiled


def bench_ours(vocab, schema, tokens, opts, reps):
    from structgen.fsm.json.schema import build_automaton
    row = np.zeros(vocab.num_words, dtype=np.int32)

    def run():
        auto = build_automaton(schema, vocab, **opts)
        m = auto.matcher()
        m.fill_next_token_bitmask(row)
        return lambda: m.fill_next_token_bitmask(row), m.accept_token, auto
    ttfm, steps, auto = _runs(run, tokens + [vocab.eos_ids[0]], reps)
    if steps is None:
        return ttfm, None, None, "REJECTED"
    # a later pass: warm (masks cached), what a server sees after the first request
    m = auto.matcher()
    warm = _time_steps(lambda: m.fill_next_token_bitmask(row), m.accept_token, tokens)
    return ttfm, _stats(steps), _stats(warm), ""


def bench_xgrammar(tok, vocab_size, schema, tokens, reps):
    import xgrammar as xgr
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab_size)
    mask = xgr.allocate_token_bitmask(1, vocab_size)

    def run():
        comp = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        cg = comp.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
        m = xgr.GrammarMatcher(cg)
        m.fill_next_token_bitmask(mask)
        return lambda: m.fill_next_token_bitmask(mask), m.accept_token, cg
    ttfm, steps, _ = _runs(run, tokens, reps)
    return (ttfm, None, "REJECTED") if steps is None else (ttfm, _stats(steps), "")


def bench_llguidance(tok, schema, tokens, reps):
    import llguidance
    import llguidance.hf
    import llguidance.numpy as lln
    lltok = llguidance.hf.from_tokenizer(tok)
    mask = lln.allocate_token_bitmask(1, lltok.vocab_size)
    errors = []

    def run():
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False})
        m = llguidance.LLMatcher(lltok, grammar)
        lln.fill_next_token_bitmask(m, mask)
        if m.is_error():
            errors.append(m.get_error())
        return lambda: lln.fill_next_token_bitmask(m, mask), m.consume_token, grammar
    ttfm, steps, _ = _runs(run, tokens, reps)
    if errors:
        return ttfm, None, "ERROR " + errors[0][:60]
    return (ttfm, None, "REJECTED") if steps is None else (ttfm, _stats(steps), "")


def _outlines_child(q, folder, schema, tokens):
    try:
        from outlines_core import Guide, Index, Vocabulary
        from outlines_core.json_schema import build_regex_from_schema
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(folder)
        t0 = time.perf_counter()
        vocab = Vocabulary.from_pretrained(folder) if False else None  # noqa: SIM108 (offline)
        if vocab is None:
            from structgen.fsm import Vocabulary as V
            ours = V.from_tokenizer(tok)
            table: dict = {}
            for i, b in enumerate(ours.token_bytes):
                if b and i not in ours.eos_ids:
                    table.setdefault(b, []).append(i)
            vocab = Vocabulary(ours.eos_ids[0], table)
        t0 = time.perf_counter()
        regex = build_regex_from_schema(json.dumps(schema))
        index = Index(regex, vocab)
        guide = Guide(index)
        guide.get_tokens()
        ttfm = time.perf_counter() - t0
        steps = []
        for tid in tokens:
            t1 = time.perf_counter()
            guide.get_tokens()
            guide.advance(tid)
            steps.append(time.perf_counter() - t1)
        q.put((ttfm, _stats(steps), ""))
    except Exception as e:  # noqa: BLE001
        q.put((None, None, f"{type(e).__name__}: {str(e)[:50]}"))


def bench_outlines(folder, schema, tokens, limit):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_outlines_child, args=(q, folder, schema, tokens))
    p.start()
    p.join(limit)
    if p.is_alive():
        p.kill()
        p.join()
        return None, None, f">{limit}s"
    return q.get() if not q.empty() else (None, None, "crashed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-outlines", action="store_true")
    ap.add_argument("--outlines-limit", type=float, default=60)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from structgen import fsm
    from structgen.engine.loader import resolve_model
    from structgen.fsm.json.schema import schema_to_term
    folder = resolve_model()
    tok = AutoTokenizer.from_pretrained(folder)
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    vocab_size = vocab.num_words * 32
    fsm.compile_regex("[a-z]+", vocab).matcher().fill_next_token_bitmask(
        np.zeros(vocab.num_words, dtype=np.int32))  # warm the vocabulary's one-time tables
    fsm.compile_grammar('start: "[" start? "]"', vocab).matcher().fill_next_token_bitmask(
        np.zeros(vocab.num_words, dtype=np.int32))  # and the grammar walk's
    # As a server does once its model is loaded (vLLM, our engine): the objects made so
    # far (torch, transformers: ~300k) leave the collector's scans, which otherwise cost
    # ~300 ms each full collection, wherever one falls. Every peer runs under the same.
    gc.collect()
    gc.freeze()
    # Each library first runs one throwaway schema (as a server has by its second
    # request): the one-time tables every JSON schema uses (ours: a JSON string
    # character's class, rows and token runs) are not charged to the first schema.
    text = schema_to_term(WARMUP[0]).canonical(WARMUP[1])
    tokens = tok.encode(text, add_special_tokens=False)
    bench_ours(vocab, WARMUP[0], tokens, {}, 1)
    bench_xgrammar(tok, vocab_size, WARMUP[0], tokens, 1)
    bench_llguidance(tok, WARMUP[0], tokens, 1)
    fmt = lambda s: "-" if s is None else f"{s * 1e3:.2f}"  # noqa: E731
    us = lambda s: "-" if s is None else f"{s * 1e6:.0f}"  # noqa: E731
    rows = []
    for name, schema, doc, opts in CASES:
        if args.only and args.only != name:
            continue
        text = schema_to_term(schema, **opts).canonical(doc)
        tokens = tok.encode(text, add_special_tokens=False)
        o = bench_ours(vocab, schema, tokens, opts, args.reps)
        x = bench_xgrammar(tok, vocab_size, schema, tokens, args.reps)
        g = bench_llguidance(tok, schema, tokens, args.reps)
        oc = (None, None, "skipped") if args.no_outlines else bench_outlines(folder, schema, tokens,
                                                                           args.outlines_limit)
        rows.append((name, len(tokens), o, x, g, oc))
        print(name, "done", file=sys.stderr, flush=True)
    print("## Time to first mask (ms; compile + first mask, best of %d)\n" % args.reps)
    print("| schema | tokens | ours | xgrammar | llguidance | outlines-core | ours/llg | ours/xgr |")
    print("|---|---|---|---|---|---|---|---|")
    for name, n, o, x, g, oc in rows:
        print(f"| {name} | {n} | {fmt(o[0])}{' ' + o[3] if o[3] else ''} | {fmt(x[0])} {x[2]} | "
              f"{fmt(g[0])} {g[2]} | {fmt(oc[0])} {oc[2]} | {'-' if g[2] else f'{o[0] / g[0]:.2f}'} | "
              f"{o[0] / x[0]:.2f} |")
    print("\n## Time between masks (µs per token: fill mask + accept; median / p99; first passes: "
          "per step the minimum over %d fresh compiles)\n" % args.reps)
    print("| schema | ours (first pass) | ours (warm) | xgrammar | llguidance | outlines-core | "
          "ours/xgr median |")
    print("|---|---|---|---|---|---|---|")
    for name, n, o, x, g, oc in rows:
        def mp_(s):
            return "-" if s is None else f"{us(s[0])} / {us(s[1])}"
        ratio = f"{o[1][0] / x[1][0]:.2f}" if o[1] and x[1] else "-"
        print(f"| {name} | {mp_(o[1])} | {mp_(o[2])} | {mp_(x[1])} {x[2]} | {mp_(g[1])} {g[2]} | "
              f"{mp_(oc[1])} {oc[2]} | {ratio} |")
    print("\n## First document (ms): time to first mask + every step of the first pass (the "
          "steps' minima, as above): a lazy library's per-state work against a library that "
          "does it when compiling\n")
    print("| schema | ours | xgrammar | llguidance | ours/xgr | ours/llg |")
    print("|---|---|---|---|---|---|")
    for name, n, o, x, g, oc in rows:
        tot = [None if r[1] is None else r[0] + r[1][2] for r in (o, x, g)]
        ratio = lambda a, b: "-" if a is None or b is None else f"{a / b:.2f}"  # noqa: E731
        print(f"| {name} | {fmt(tot[0])} | {fmt(tot[1])} | {fmt(tot[2])} | {ratio(tot[0], tot[1])} | "
              f"{ratio(tot[0], tot[2])} |")


if __name__ == "__main__":
    main()
