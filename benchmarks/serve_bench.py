"""Online serving benchmark: the OpenAI-compatible server under Poisson load, loopback only.

    # in-process server over the embedded SmolLM2-135M (CPU: about a minute or two)
    python benchmarks/serve_bench.py --rate 2,4 --requests 16 --max-tokens 32
    # pairs of phases without and with one request whose constraint compiles for 10 s of CPU
    python benchmarks/serve_bench.py --rate 2 --requests 24 --slow-compile 10 --repeat 3
    # TTFT at half the saturation rate against one request at a time
    python benchmarks/serve_bench.py --rate 2 --requests 24 --half-saturation
    # a server that is already running (python -m structgen.serve --port 8000)
    python benchmarks/serve_bench.py --url http://127.0.0.1:8000 --rate 1,2,4 --requests 32
    # PNG plots go to --out (default: a fresh temp dir); matplotlib is optional (`bench` extra)
    python benchmarks/serve_bench.py --out /tmp/serve-bench

For each rate in `--rate` (requests/s, run in turn), `--requests N` chat requests arrive
as a Poisson process, each a streamed `/v1/chat/completions` call from its own asyncio
task (httpx). A share `--guided-share` of them is guided: JSON schemas that each carry a
unique property name (so no compile is served from the engine's cache) and, one in three,
regexes that are unique too. Per request: TTFT (time to the first content chunk), ITL
(time between content chunks), TPOT ((end-to-end - TTFT) / (completion tokens - 1)) and
end-to-end latency; per rate: request and output-token throughput, and the share of
guided outputs valid under their constraint (jsonschema for JSON, re.fullmatch for
regex; a request cut by max_tokens counts as invalid and is also counted apart).

Bounded: each rate stops after `--requests` requests or `--time-limit` seconds (what is
still running then is cancelled and counted as failed); nothing but 127.0.0.1 is
contacted. At the end every request is counted as completed or failed (with its error)
and, with the in-process server, every KV block must be free again.

`--slow-compile S` (in-process only): the engine compiles with `slow_compile`, which
spends S seconds of CPU in pure Python on one marked JSON schema before compiling it,
where compiles run (a compile worker process, or with `--compile-in threads` a thread
of the server, holding its GIL as a real compile does). `--repeat` pairs of phases at
the first rate, without and with that request sent first, compare the other requests'
ITL p99. `--half-saturation`: TTFT p50 at half the saturation rate (a burst's
throughput, or `--saturation`) against one request at a time.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

SLOW_MARKER = "slow_compile_marker"
TOPICS = ["the sea", "a lost key", "autumn in Paris", "a robot", "the moon", "a bakery",
          "mountains", "a chess match", "an old library", "rain", "a cat", "snow"]


@dataclass
class Result:
    kind: str                      # "plain" | "json" | "regex" | "slow"
    ok: bool = False
    error: str | None = None
    ttft: float | None = None
    e2e: float | None = None
    itl: list = field(default_factory=list)
    tokens: int = 0
    text: str = ""
    finish: str | None = None
    valid: bool | None = None      # None: unguided, not counted


def make_request(k: int, rng: random.Random, guided_share: float, max_tokens: int, model: str,
                 slow: float = 0.0):
    """(kind, body, (constraint kind, spec) or None); `slow` S: the slow-compile request,
    whose schema is unique per k."""
    topic = rng.choice(TOPICS)
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    if slow:
        schema = {"type": "object", "properties": {SLOW_MARKER: {"type": "integer", "maximum": 9}},
                  "required": [SLOW_MARKER], "additionalProperties": False,
                  "description": f"{SLOW_MARKER}:{slow:g} ({k})"}
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "slow", "schema": schema}}
        body["messages"] = [{"role": "user", "content": "Give a digit as JSON."}]
        return "slow", body, ("json", schema)
    if rng.random() >= guided_share:
        body["messages"] = [{"role": "user", "content": f"Write one short sentence about {topic}."}]
        return "plain", body, None
    if k % 3 == 2:
        pattern = rf"item-{k}: [a-z]{{3,8}} [0-9]{{1,3}}"
        body["structured_outputs"] = {"regex": pattern}
        body["messages"] = [{"role": "user", "content": f"Name {topic} and a number."}]
        return "regex", body, ("regex", pattern)
    schema = {"type": "object",
              "properties": {f"field_{k}": {"type": "integer", "minimum": 0, "maximum": 999},
                             "word": {"type": "string", "pattern": "^[a-z]{1,8}$"}},
              "required": [f"field_{k}", "word"], "additionalProperties": False}
    body["response_format"] = {"type": "json_schema", "json_schema": {"name": f"s{k}", "schema": schema}}
    body["messages"] = [{"role": "user", "content": f"Describe {topic} in JSON with one word and a number."}]
    return "json", body, ("json", schema)


def check(constraint, text: str) -> bool:
    kind, spec = constraint
    if kind == "regex":
        return re.fullmatch(spec, text) is not None
    import jsonschema
    try:
        jsonschema.validate(json.loads(text), spec)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


async def one_request(client: httpx.AsyncClient, url: str, kind, body, constraint, timeout: float) -> Result:
    r = Result(kind)
    t0 = time.perf_counter()
    last = None
    parts = []
    try:
        async with client.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=timeout) as resp:
            if resp.status_code != 200:
                detail = (await resp.aread()).decode(errors="replace")[:200]
                raise RuntimeError(f"HTTP {resp.status_code}: {detail}")
            async for line in resp.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                msg = json.loads(data)
                if "error" in msg:
                    raise RuntimeError(f"stream error: {msg['error'].get('message')}")
                if msg.get("usage"):
                    r.tokens = msg["usage"]["completion_tokens"]
                for c in msg.get("choices", []):
                    content = (c.get("delta") or {}).get("content")
                    if content:
                        now = time.perf_counter()
                        if last is None:
                            r.ttft = now - t0
                        else:
                            r.itl.append(now - last)
                        last = now
                        parts.append(content)
                    if c.get("finish_reason"):
                        r.finish = c["finish_reason"]
        r.e2e = time.perf_counter() - t0
        r.text = "".join(parts)
        r.ok = True
        if constraint is not None:
            r.valid = check(constraint, r.text)
    except asyncio.CancelledError:
        r.error = "cancelled at the time limit"
    except Exception as e:  # noqa: BLE001 - every failure is counted with its reason
        r.error = f"{type(e).__name__}: {e}"
    return r


async def run_phase(url: str, model: str, rate: float, n: int, args, seed: int, tag: int, slow: bool = False):
    """`seed` drives arrivals and the request mix; `tag` makes schema and regex names unique.
    rate 0: one request at a time (unloaded); rate inf: all at once (a burst)."""
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=n + 2, max_keepalive_connections=n + 2)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:
        tasks = []
        t_start = time.perf_counter()
        if slow:
            kind, body, c = make_request(tag, random.Random(0), 1.0, args.max_tokens, model, slow=args.slow_compile)
            tasks.append(asyncio.ensure_future(one_request(client, url, kind, body, c, args.time_limit)))
        for k in range(n):
            kind, body, c = make_request(tag * 100000 + k, rng, args.guided_share, args.max_tokens, model)
            tasks.append(asyncio.ensure_future(one_request(client, url, kind, body, c, args.time_limit)))
            if rate == 0:
                await asyncio.wait([tasks[-1]], timeout=max(0.0, args.time_limit - (time.perf_counter() - t_start)))
            elif rate != float("inf"):
                await asyncio.sleep(rng.expovariate(rate))
        done, pending = await asyncio.wait(tasks, timeout=max(1.0, args.time_limit - (time.perf_counter() - t_start)))
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)
        duration = time.perf_counter() - t_start
    return [t.result() for t in tasks], duration


def pct(xs, q):
    return float(np.percentile(xs, q)) if len(xs) else float("nan")


def summarize(rate, results, duration):
    ok = [r for r in results if r.ok]
    guided = [r for r in ok if r.valid is not None]
    itl = [x for r in ok for x in r.itl]
    tpot = [(r.e2e - r.ttft) / (r.tokens - 1) for r in ok if r.ttft is not None and r.tokens > 1]
    return {
        "rate": rate, "n": len(results), "completed": len(ok), "failed": len(results) - len(ok),
        "errors": [r.error for r in results if not r.ok],
        "req_s": len(ok) / duration, "tok_s": sum(r.tokens for r in ok) / duration, "duration": duration,
        "valid": sum(r.valid for r in guided), "guided": len(guided),
        "truncated": sum(1 for r in guided if r.finish == "length"),
        "ttft": [r.ttft for r in ok if r.ttft is not None], "tpot": tpot, "itl": itl,
        "ttft_guided": [r.ttft for r in ok if r.ttft is not None and r.valid is not None],
        "ttft_plain": [r.ttft for r in ok if r.ttft is not None and r.valid is None],
        "e2e": [r.e2e for r in ok],
    }


def print_tables(rows):
    print("\n| rate (req/s) | requests | completed | failed | req/s | output tok/s | guided valid | cut by max_tokens |")
    print("|---|---|---|---|---|---|---|---|")
    for s in rows:
        print(f"| {s['label']} | {s['n']} | {s['completed']} | {s['failed']} | {s['req_s']:.2f} | "
              f"{s['tok_s']:.1f} | {s['valid']}/{s['guided']} | {s['truncated']} |")
    print("\n| rate (req/s) | metric (ms) | p50 | p90 | p99 |")
    print("|---|---|---|---|---|")
    for s in rows:
        for m in ("ttft", "tpot", "itl", "e2e"):
            xs = np.array(s[m]) * 1e3
            print(f"| {s['label']} | {m.upper()} | {pct(xs, 50):.0f} | {pct(xs, 90):.0f} | {pct(xs, 99):.0f} |")
    for s in rows:
        for e in sorted(set(s["errors"])):
            print(f"  rate {s['label']}: {s['errors'].count(e)} failed: {e}")


def plot(rows, out: Path) -> list[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\nmatplotlib is not installed (pip install 'structgen[bench]'): no plots, tables only.")
        return []
    out.mkdir(parents=True, exist_ok=True)
    files = []
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for ax, m in zip(axes, ("ttft", "tpot", "itl", "e2e")):
        for s in rows:
            xs = np.sort(np.array(s[m]) * 1e3)
            if len(xs):
                ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), label=f"{s['label']} req/s")
        ax.set_xlabel(f"{m.upper()} (ms)")
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    files.append(out / "latency_cdf.png")
    fig.savefig(files[-1], dpi=110)
    plain = [s for s in rows if s.get("sweep")]
    rates = [s["rate"] for s in plain]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.plot(rates, [s["req_s"] for s in plain], "o-", label="requests/s")
    a2 = a.twinx()
    a2.plot(rates, [s["tok_s"] for s in plain], "s--", color="tab:orange", label="output tokens/s")
    a.set_xlabel("offered rate (req/s)")
    a.set_ylabel("requests/s")
    a2.set_ylabel("output tokens/s")
    a.set_title("throughput")
    for q in (50, 90, 99):
        b.plot(rates, [pct(np.array(s["ttft"]) * 1e3, q) for s in plain], "o-", label=f"p{q}")
    b.set_xlabel("offered rate (req/s)")
    b.set_ylabel("TTFT (ms)")
    b.set_title("time to first token")
    b.legend(fontsize=8)
    fig.tight_layout()
    files.append(out / "throughput_ttft_vs_rate.png")
    fig.savefig(files[-1], dpi=110)
    plt.close("all")
    return files


def start_server(args):
    """The embedded model behind the OpenAI server, in this process, on a free loopback port."""
    import torch
    import uvicorn

    from structgen.engine import LLM
    from structgen.engine.async_engine import AsyncEngine
    from structgen.engine.server import build_app
    torch.set_num_threads(args.torch_threads)
    llm = LLM(args.model, max_num_seqs=args.max_num_seqs, block_size=16, num_kv_blocks=args.kv_blocks,
              max_model_len=512)
    # The compile function runs where compiles run (a worker process, or a thread here):
    # imported by name, so from this file as the module `serve_bench`.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from serve_bench import slow_compile
    # (a budget the slow compile fits even at low priority on a busy host)
    engine = AsyncEngine(llm, compile_timeout_s=max(5.0, 6 * args.slow_compile),
                         compile_processes=args.compile_in == "processes", compile_fn=slow_compile)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(build_app(engine, "smollm2"), host="127.0.0.1", port=port,
                                        log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not srv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", llm, engine, srv, thread


def slow_compile(spec, vocab):
    """compile_spec, but a spec marked `SLOW_MARKER:S` first spends S seconds of CPU in
    pure Python, counted in CPU time of its thread (holding its process's GIL, as a real
    compile does)."""
    from structgen.engine.constraints import compile_spec
    found = re.search(re.escape(SLOW_MARKER) + r":([0-9.]+)", json.dumps(spec))
    if found:
        end, x = time.thread_time() + float(found.group(1)), 0
        while time.thread_time() < end:
            for _ in range(10000):
                x = (x * 31 + 7) % 1000003
    return compile_spec(spec, vocab)


def blocks_free(llm, timeout=30.0) -> bool:
    deadline = time.monotonic() + timeout
    while llm.scheduler.has_unfinished() and time.monotonic() < deadline:
        time.sleep(0.05)
    bm = llm.block_manager
    return not llm.scheduler.has_unfinished() and bm.num_free_blocks == bm.num_blocks


def slow_compile_report(args, rate, base, phase, tag) -> str:
    """Pairs of phases at `rate`, without and with one request whose compile spends
    --slow-compile seconds of CPU (the first pair's plain phase is `base`); the other
    requests' ITL p99 of each, and their ratio."""
    lines = [f"\nITL p99 of the other requests at {rate:g} req/s, without and with a {args.slow_compile:g} s "
             f"compile ({args.compile_in}):", "", "| pair | without (ms) | with (ms) | ratio |", "|---|---|---|---|"]
    ratios = []
    for k in range(args.repeat):
        plain = base if k == 0 else phase(f"{rate:g} (pair {k + 1})", rate, args.requests, args.seed, tag + 2 * k + 1)
        slow = phase(f"{rate:g} + slow (pair {k + 1})", rate, args.requests, args.seed, tag + 2 * k + 2, slow=True)
        a, b = (pct(np.array(x["itl"]) * 1e3, 99) for x in (plain, slow))
        ratios.append(b / a)
        lines.append(f"| {k + 1} | {a:.0f} | {b:.0f} | {b / a:.2f} |")
    lines.append(f"\nmedian ratio {float(np.median(ratios)):.2f} (target: at most 1.10)")
    return "\n".join(lines)


def half_saturation_report(args, phase, tag) -> str:
    """TTFT p50 at half the saturation rate against an unloaded server. The saturation
    rate is --saturation, else the throughput (req/s) of a burst of --requests requests
    sent at once; unloaded is one request at a time."""
    unloaded = phase("unloaded (one at a time)", 0, args.requests, args.seed, tag + 1)
    sat = args.saturation
    if sat is None:
        sat = phase("burst (saturation)", float("inf"), args.requests, args.seed, tag + 2)["req_s"]
    half = phase(f"{sat / 2:.2f} (half of {sat:.2f})", sat / 2, args.requests, args.seed, tag + 3)
    a, b = (pct(np.array(x["ttft"]) * 1e3, 50) for x in (unloaded, half))
    kinds = ", ".join(f"{k} {pct(np.array(unloaded[f'ttft_{k}']) * 1e3, 50):.0f} -> "
                      f"{pct(np.array(half[f'ttft_{k}']) * 1e3, 50):.0f} ms" for k in ("plain", "guided"))
    return (f"\nsaturation {sat:.2f} req/s ({'given' if args.saturation else 'measured: a burst'}); "
            f"TTFT p50 unloaded {a:.0f} ms, at half saturation ({sat / 2:.2f} req/s) {b:.0f} ms: "
            f"ratio {b / a:.2f} (target: at most 2); by kind: {kinds}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=None, help="a running server (http://127.0.0.1:PORT); default: in-process")
    p.add_argument("--model", default=None, help="in-process: the model to load (default: the embedded one)")
    p.add_argument("--rate", default="2,4", help="comma-separated request rates (req/s), run in turn")
    p.add_argument("--requests", type=int, default=16, help="requests per rate")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--guided-share", type=float, default=0.5)
    p.add_argument("--time-limit", type=float, default=180.0, help="seconds per rate before cancelling")
    p.add_argument("--slow-compile", type=float, default=0.0, help="in-process: one request compiles S s")
    p.add_argument("--repeat", type=int, default=1, help="--slow-compile: pairs of phases (without, with)")
    p.add_argument("--half-saturation", action="store_true",
                   help="TTFT p50 at half the saturation rate against one request at a time")
    p.add_argument("--saturation", type=float, default=None,
                   help="--half-saturation: the saturation rate (req/s); default: measured with a burst")
    p.add_argument("--compile-in", choices=["processes", "threads"], default="processes",
                   help="in-process: where constraints compile (threads: the engine's GIL is shared)")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="in-process: torch threads of the engine (1 leaves a core to compiles on a small host)")
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--kv-blocks", type=int, default=512)
    p.add_argument("--out", default=None, help="folder for PNG plots (default: a temp dir)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rates = [float(x) for x in args.rate.split(",") if x.strip()]
    if args.url:
        if not re.match(r"^http://(127\.0\.0\.1|localhost)(:\d+)?/?$", args.url):
            p.error("--url must be a loopback address (http://127.0.0.1:PORT)")
        if args.slow_compile:
            p.error("--slow-compile needs the in-process server")
        url, llm, engine, srv, thread = args.url.rstrip("/"), None, None, None, None
    else:
        url, llm, engine, srv, thread = start_server(args)
    model = httpx.get(f"{url}/v1/models", trust_env=False).json()["data"][0]["id"]
    print(f"server {url} (model {model}{', in-process' if llm else ''}); rates {rates}, "
          f"{args.requests} requests each, max_tokens {args.max_tokens}, guided share {args.guided_share}")
    rows, kv_ok = [], True
    reports = []

    def phase(label, rate, n, seed, tag, slow=False):
        nonlocal kv_ok
        results, duration = asyncio.run(run_phase(url, model, rate, n, args, seed=seed, tag=tag, slow=slow))
        s = summarize(rate, [r for r in results if r.kind != "slow"], duration)
        s["label"] = label
        rows.append(s)
        if llm is not None:
            kv_ok &= blocks_free(llm)
        print(f"{label}: {s['completed']}/{s['n']} completed in {duration:.1f} s", flush=True)
        if slow:
            sr = next(r for r in results if r.kind == "slow")
            print(f"  slow-compile request ({args.slow_compile:g} s of CPU): "
                  + (f"completed, e2e {sr.e2e:.1f} s, valid {sr.valid}" if sr.ok else f"failed: {sr.error}"))
        return s

    try:
        asyncio.run(run_phase(url, model, 4.0, 2, args, seed=99, tag=99))     # warm-up, not reported
        tag = 0
        for i, rate in enumerate(rates):
            tag += 1
            phase(f"{rate:g}", rate, args.requests, args.seed + i, tag)["sweep"] = True
        if args.slow_compile:
            reports.append(slow_compile_report(args, rates[0], rows[0], phase, tag))
            tag += 2 * args.repeat
        if args.half_saturation:
            reports.append(half_saturation_report(args, phase, tag))
    finally:
        if srv is not None:
            srv.should_exit = True
            thread.join(30)
            engine.close()
    print_tables(rows)
    for r in reports:
        print(r)
    total = sum(s["n"] for s in rows)
    failed = sum(s["failed"] for s in rows)
    print(f"\n{total} requests: {total - failed} completed, {failed} failed")
    if llm is not None:
        print(f"KV blocks all free at the end: {kv_ok}")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="serve_bench_"))
    for f in plot(rows, out):
        print(f"plot: {f}")
    return 0 if (failed == 0 and kv_ok) else 1


if __name__ == "__main__":
    sys.exit(main())
