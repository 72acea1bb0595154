"""The GPU check script's dry run (`--device cpu --quick`, Triton interpreted): every part
runs, every table prints, and every check passes, so that the one call on a GPU machine
does not die on a script error."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_dry_run_passes():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONSAFEPATH": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu",
                           "--quick"], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for title in ("1. kernels", "2. paged decode attention", "3. apply_token_bitmask_inplace",
                  "4. greedy parity", "5. output tokens/s", "6. JSON-Schema-guided"):
        assert f"### {title}" in proc.stdout
    assert "FAIL" not in proc.stdout and "all checks passed" in proc.stdout
