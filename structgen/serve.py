"""Serve a model over an OpenAI-compatible HTTP API.

    python -m structgen.serve [MODEL] --host 127.0.0.1 --port 8000
    structgen serve [MODEL] --port 8000          # the console script

MODEL: omitted or "smollm2" (the embedded SmolLM2-135M-Instruct), a Hugging Face folder,
or a .gguf file. A thin layer over `structgen.engine.server`; see docs/serving.md.
"""
from __future__ import annotations

import argparse
import os
import sys


def build_parser(prog: str = "python -m structgen.serve") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Serve a model over an OpenAI-compatible API.")
    p.add_argument("model", nargs="?", default=None,
                   help="the embedded model when omitted; a Hugging Face folder or a .gguf file")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", default=None,
                   help="the name clients pass as `model` (default: smollm2, or the folder/file name)")
    p.add_argument("--max-model-len", type=int, default=None, help="context length in tokens")
    p.add_argument("--max-num-seqs", type=int, default=64, help="sequences decoded together")
    p.add_argument("--kv-cache-bytes", type=int, default=None, help="KV cache budget in bytes")
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"])
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--tensor-parallel-size", type=int, default=1,
                   help="GPUs (CPU: processes) each engine's model is split over (default 1)")
    p.add_argument("--data-parallel-size", type=int, default=1,
                   help="engine replicas behind this server, one per GPU (or per tensor-parallel "
                        "group of GPUs); requests go to the least loaded (default 1)")
    p.add_argument("--compile-timeout", type=float, default=5.0,
                   help="seconds a request may wait for its constraint to compile (default 5)")
    p.add_argument("--compile-workers", type=int, default=2,
                   help="constraint compile processes (default 2)")
    p.add_argument("--compile-hard-limit", type=float, default=None,
                   help="seconds after which a compile is killed with its worker (default 10x --compile-timeout)")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20,
                   help="larger request bodies get 413 (default 1 MiB)")
    p.add_argument("--log-level", default="info")
    return p


def model_name(model: str | None) -> str:
    if model is None or model == "smollm2":
        return "smollm2"
    name = os.path.basename(os.path.normpath(model))
    return name[:-5] if name.endswith(".gguf") else name


def main(argv: list[str] | None = None, prog: str = "python -m structgen.serve") -> None:
    args = build_parser(prog).parse_args(argv)
    from structgen.engine import LLM
    from structgen.engine.async_engine import AsyncEngine
    from structgen.engine.replicas import Replicas, replica_devices
    from structgen.engine.server import serve
    if args.data_parallel_size < 1:
        raise SystemExit("--data-parallel-size must be >= 1")
    config = {"max_num_seqs": args.max_num_seqs, "max_model_len": args.max_model_len,
              "kv_cache_bytes": args.kv_cache_bytes, "dtype": args.dtype,
              "tensor_parallel_size": args.tensor_parallel_size}
    config = {k: v for k, v in config.items() if v is not None}
    devices = ([args.device] if args.data_parallel_size == 1 else
               replica_devices(args.data_parallel_size, args.tensor_parallel_size, args.device))
    engines = [AsyncEngine(LLM(args.model, device=device, **config), compile_timeout_s=args.compile_timeout,
                           compile_workers=args.compile_workers, compile_hard_limit_s=args.compile_hard_limit)
               for device in devices]
    engine = engines[0] if len(engines) == 1 else Replicas(engines)
    serve(engine, args.served_model_name or model_name(args.model), args.host, args.port,
          max_body_bytes=args.max_body_bytes, log_level=args.log_level)


def cli(argv: list[str] | None = None) -> None:
    """The `structgen` console script: `structgen serve [MODEL] [options]`."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "serve":
        print("usage: structgen serve [MODEL] [--host HOST] [--port PORT] ...\n"
              "  (structgen serve --help lists the options)", file=sys.stderr)
        raise SystemExit(2)
    main(argv[1:], prog="structgen serve")


if __name__ == "__main__":
    main()
