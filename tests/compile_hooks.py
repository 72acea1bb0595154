"""Compile functions for the engine and server tests: they run inside compile worker
processes (engine/compile_pool.py), which import them from here (tests/ is on sys.path,
and the workers get this process's path). No torch, no pytest: workers stay light."""
from __future__ import annotations

import json
import os
import time

from structgen.engine.constraints import compile_spec

GATE = "gate-file:"


def gated(spec, vocab):
    """compile_spec, but a spec whose text holds GATE + a file path first waits (at most a
    minute) until that file exists: a compile as slow as the test wants."""
    text = json.dumps(spec, default=str)
    at = text.find(GATE)
    if at >= 0:
        path = text[at + len(GATE):].split('"', 1)[0]
        deadline = time.monotonic() + 60
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)
    return compile_spec(spec, vocab)


def boot_workers(engine, n=2):
    """n compiles at once through an AsyncEngine: then every compile worker has booted and
    taken one (a spec waits in the queue while they boot)."""
    from structgen.engine import SamplingParams
    streams = [engine.add_request("Answer:", SamplingParams(max_tokens=1, constraint=("regex", f"(yes|no){k}")))
               for k in range(n)]
    for s in streams:
        s.result()
