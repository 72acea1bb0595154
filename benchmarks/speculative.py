"""Speculative decoding on extraction-like prompts: speed with it on against off, in the
same run, on the same weights, greedy (and checked token-identical). Prompt lookup (ngram)
always; a draft model too with `--method draft_model`.

    .venv/bin/python benchmarks/speculative.py             # batch 1 (8 prompts, one at a time) and 16
    .venv/bin/python benchmarks/speculative.py --quick     # 3 prompts at batch 1, 8 at batch 8
    .venv/bin/python benchmarks/speculative.py --k 8 --lookup 1 3
    .venv/bin/python benchmarks/speculative.py --method draft_model --draft FOLDER
    .venv/bin/python benchmarks/speculative.py --method draft_model --make-draft 4 --keep-last 2

No public model shares SmolLM2-135M's vocabulary offline, so `--make-draft N` saves a
layer-truncated copy of it (its first N of 30 decoder layers, with `--keep-last M` its
last M too, its final norm and head: no training) into a temporary folder and drafts
with that. Such a draft agrees with the
full model far less than a trained small model would.

Workloads (their outputs copy spans of the prompt):
- copy: "Repeat the following text word for word" over a short generated document, free;
- copy+regex: the same under a regex that admits any sentence (guided);
- json: "Extract ... as JSON" under a JSON Schema of four string fields (guided).

Per workload, batch size and method, a markdown row: output tokens, drafted and accepted tokens,
acceptance rate (accepted / drafted), output tokens/s with speculation off and on
(wall clock; CPU seconds of the process in brackets), their ratio, and whether every
output is token-identical. Off and on alternate, `--repeat` times, best of each kept.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from structgen.engine import LLM, SamplingParams

NAMES = ["Amelia Hart", "Jonas Weber", "Priya Raman", "Tomás Ortega", "Mei Lin", "Oliver Grant",
         "Fatima Haddad", "Lukas Novak"]
COMPANIES = ["Northwind Traders", "Contoso Ltd", "Fabrikam Inc", "Blue Yonder Airlines",
             "Tailspin Toys", "Wide World Importers", "Litware Systems", "Adventure Works"]
CITIES = ["Portsmouth", "Hobart", "Springfield", "Leipzig", "Valencia", "Kyoto", "Quebec", "Tromsø"]
MONTHS = ["January", "March", "June", "September", "November"]
ITEMS = ["crates of green tea", "boxes of printer paper", "bicycle frames", "solar panels",
         "bags of coffee beans", "office chairs"]
TEMPLATES = [
    "Invoice {n} was issued by {co}, {num} Harbour Street, {city}, on {day} {month} {year} to "
    "{co2} for {qty} {item} at {price} EUR each, due within 30 days.",
    "{name}, a researcher at the {city} Institute of Technology, joined {co} on {day} {month} "
    "{year} to lead a team of {qty} engineers working on {item}.",
    "On {day} {month} {year}, {co} opened a new warehouse in {city}; its manager, {name}, said "
    "it will store {qty} {item} and employ {num} people by the end of the year.",
]
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string"}, "company": {"type": "string"},
                         "city": {"type": "string"}, "date": {"type": "string"}},
          "required": ["name", "company", "city", "date"], "additionalProperties": False}
SENTENCE = r"[A-Z][^\n]{10,400}\."


def documents(n: int, rng) -> list[str]:
    docs = []
    for i in range(n):
        co, co2 = rng.choice(COMPANIES, 2, replace=False)
        docs.append(TEMPLATES[i % len(TEMPLATES)].format(
            n=rng.integers(1000, 9999), co=co, co2=co2, num=rng.integers(2, 99), city=rng.choice(CITIES),
            day=rng.integers(1, 28), month=rng.choice(MONTHS), year=rng.integers(2015, 2025),
            qty=rng.integers(3, 60), item=rng.choice(ITEMS), price=f"{rng.uniform(5, 500):.2f}",
            name=rng.choice(NAMES)))
    return docs


def workloads(llm: LLM, docs: list[str], max_tokens: int) -> dict[str, tuple[list, SamplingParams]]:
    def chat(content):
        text = llm.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                 add_generation_prompt=True)
        return llm.tokenizer(text, add_special_tokens=False).input_ids
    copy = [chat("Repeat the following text word for word.\n\n" + d) for d in docs]
    extract = [chat(d + "\n\nExtract the person's name, the company, the city and the date as JSON.")
               for d in docs]
    return {"copy": (copy, SamplingParams(max_tokens=max_tokens)),
            "copy+regex": (copy, SamplingParams(max_tokens=max_tokens, constraint=("regex", SENTENCE))),
            "json": (extract, SamplingParams(max_tokens=max_tokens, constraint=("json", SCHEMA)))}


def truncated_copy(folder: Path, layers: int, out: Path, last: int = 0) -> Path:
    """Save `folder`'s model with only its first `layers` decoder layers and its last `last`
    ones (renumbered after them), embeddings, final norm, head and tokenizer into `out`: a
    draft of the same vocabulary."""
    from safetensors.torch import load_file, save_file
    config = json.loads((folder / "config.json").read_text())
    total = config["num_hidden_layers"]
    if not 1 <= layers + last < total or layers < 1 or last < 0:
        raise SystemExit(f"--make-draft {layers} --keep-last {last}: the model has {total} layers")
    kept = list(range(layers)) + list(range(total - last, total))     # old index by new index
    config["num_hidden_layers"] = len(kept)
    if isinstance(config.get("layer_types"), list):
        config["layer_types"] = [config["layer_types"][i] for i in kept]
    weights = {}
    for f in sorted(folder.glob("*.safetensors")):
        for name, t in load_file(f).items():
            parts = name.split(".")
            if "layers" in parts:
                at = parts.index("layers") + 1
                if int(parts[at]) not in kept:
                    continue
                parts[at] = str(kept.index(int(parts[at])))
            weights[".".join(parts)] = t.contiguous()
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=1))
    for f in folder.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and f.name != "config.json":
            shutil.copy(f, out / f.name)
    return out


def run(engine: LLM, prompts: list, params: SamplingParams, batch: int):
    """(outputs, wall s, CPU s): `batch` prompts per generate call."""
    t0, c0 = time.perf_counter(), time.process_time()
    outs = []
    for i in range(0, len(prompts), batch):
        outs += engine.generate(prompts[i:i + batch], params, use_tqdm=False)
    return outs, time.perf_counter() - t0, time.process_time() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--k", type=int, default=5, help="num_speculative_tokens")
    ap.add_argument("--lookup", type=int, nargs=2, default=(1, 3), metavar=("MIN", "MAX"),
                    help="prompt_lookup_min and prompt_lookup_max")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--workloads", nargs="*", default=["copy", "copy+regex", "json"])
    ap.add_argument("--method", choices=["ngram", "draft_model"], default="ngram",
                    help="draft_model: also a draft model, beside ngram")
    ap.add_argument("--draft", type=Path, help="the draft model's folder (--method draft_model)")
    ap.add_argument("--make-draft", type=int, metavar="N",
                    help="draft with SmolLM2's first N layers (a truncated copy in a temp folder)")
    ap.add_argument("--draft-k", type=int, help="num_speculative_tokens of the draft model (default: --k)")
    ap.add_argument("--keep-last", type=int, default=0, metavar="M",
                    help="with --make-draft: keep the last M layers too (skip the middle ones)")
    ap.add_argument("--batches", nargs="*", metavar="B:N",
                    help="batch size : number of prompts, e.g. 1:3 16:16 (default 1:8 16:16; --quick 1:3 8:8)")
    args = ap.parse_args()
    if args.method == "draft_model" and (args.draft is None) == (args.make_draft is None):
        ap.error("--method draft_model needs one of --draft FOLDER and --make-draft N")
    torch.set_num_threads(args.threads)
    batches = [(1, 3), (8, 8)] if args.quick else [(1, 8), (16, 16)]   # (batch size, prompts)
    if args.batches:
        batches = [tuple(int(x) for x in b.split(":")) for b in args.batches]

    spec = {"method": "ngram", "num_speculative_tokens": args.k,
            "prompt_lookup_min": args.lookup[0], "prompt_lookup_max": args.lookup[1]}
    off = LLM(max_num_seqs=16, num_kv_blocks=16 * 16, max_model_len=256)
    methods = {"ngram": off.with_config(speculative_config=spec)}
    draft_note = ""
    if args.method == "draft_model":
        draft = args.draft
        if args.make_draft is not None:
            draft = truncated_copy(off.folder, args.make_draft, Path(tempfile.mkdtemp()) / "draft",
                                   args.keep_last)
            draft_note = (f"draft: SmolLM2-135M-Instruct cut to its first {args.make_draft} and last "
                          f"{args.keep_last} of 30 layers + final norm + head (no training), saved in {draft}")
        else:
            draft_note = f"draft: {draft}"
        dspec = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": args.draft_k or args.k}
        methods["draft_model"] = off.with_config(speculative_config=dspec)
    docs = documents(max(n for _, n in batches), np.random.default_rng(0))
    loads = workloads(off, docs, args.max_tokens)
    for engine in (off, *methods.values()):          # warm-up: weights packed, constraints compiled
        for prompts, params in loads.values():
            engine.generate(prompts[:2], SamplingParams(max_tokens=8, constraint=params.constraint),
                            use_tqdm=False)

    for name, engine in methods.items():
        print(f"{name}: speculative_config={engine.config.speculative_config}")
    print(f"{draft_note}\ngreedy, max_tokens={args.max_tokens}, {args.threads} thread(s), "
          f"{torch.get_num_threads()} torch threads, device cpu\n")
    print("| workload | batch | method | tokens | drafted | accepted | acceptance | off tok/s | on tok/s "
          "| speed-up | identical |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.workloads:
        prompts, params = loads[name]
        for batch, n in batches:
            best = {}
            for _ in range(args.repeat):
                for label, engine in (("off", off), *methods.items()):
                    if engine.speculator is not None:
                        engine.speculator.stats.update(draft_tokens=0, accepted_tokens=0)
                    outs, wall, cpu = run(engine, prompts[:n], params, batch)
                    tokens = sum(len(o.token_ids) for o in outs)
                    stats = dict(engine.speculator.stats) if engine.speculator is not None else {}
                    if label not in best or wall < best[label][1]:
                        best[label] = (outs, wall, cpu, tokens, stats)
            o_off, w_off, c_off, tokens, _ = best["off"]
            for label in methods:
                o_on, w_on, c_on, _, st = best[label]
                same = [o.token_ids for o in o_off] == [o.token_ids for o in o_on]
                print(f"| {name} | {batch} | {label} | {tokens} | {st['draft_tokens']} | {st['accepted_tokens']} "
                      f"| {st['accepted_tokens'] / max(st['draft_tokens'], 1):.0%} "
                      f"| {tokens / w_off:.1f} ({tokens / c_off:.1f}) | {tokens / w_on:.1f} ({tokens / c_on:.1f}) "
                      f"| {w_off / w_on:.2f}x ({c_off / c_on:.2f}x) | {'yes' if same else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
