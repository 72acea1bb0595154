"""The wheel installs one import name, `structgen`, and lives beside Hugging Face's
`kernels` package and the newest transformers (which imports `kernels` itself).

Builds the wheel from this checkout, installs it into a fresh virtualenv with the newest
transformers and kernels from the package index, and imports them all from a neutral
folder. Torch and our other dependencies come from the running environment (a .pth
file), so nothing large is installed twice.
"""
from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out), str(REPO)], check=True, capture_output=True, text=True)
    (found,) = out.glob("structgen-*.whl")
    return found


def test_wheel_has_one_top_level_name(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"structgen"}
    for sub in ("fsm/core", "fsm/regex", "fsm/grammar", "fsm/json", "kernels", "engine", "guided"):
        assert f"structgen/{sub}/__init__.py" in names
    # the C walks, built (this machine has a compiler), beside their source's package
    assert [n for n in names if n.startswith("structgen/fsm/core/walks_c.") and n.endswith(".so")], names


def test_installs_beside_hf_kernels_and_newest_transformers(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["--no-deps", str(wheel)], check=True)
    subprocess.run(pip + ["--upgrade", "transformers", "kernels"], check=True)
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # torch, numpy, lark...: from this environment, after the fresh one's own packages
    Path(site, "zz_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = (
        "import importlib.metadata as md, os, kernels, transformers, structgen\n"
        "import structgen.kernels, structgen.fsm, structgen.engine, structgen.guided\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        f"venv = {str(env_dir)!r}\n"
        "assert kernels.__file__.startswith(venv), kernels.__file__\n"
        "assert structgen.__file__.startswith(venv), structgen.__file__\n"
        "from structgen.fsm.core import walks\n"
        "assert walks.native is not None and walks.native.__file__.startswith(venv), walks.native\n"
        "assert structgen.kernels is not kernels and hasattr(kernels, 'get_kernel')\n"
        "print(md.version('transformers'), md.version('kernels'))\n"
    )
    run = subprocess.run([str(py), "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    # From the repository root (on sys.path as ''), our kernels/ folder is found first as
    # `kernels`: it gives the name to Hugging Face's package, which transformers then uses.
    root_probe = (
        "import sys, kernels\n"
        f"assert kernels.__file__.startswith({str(env_dir)!r}), kernels.__file__\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "import torch\n"
        "cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,\n"
        "                  num_key_value_heads=1, vocab_size=64)\n"
        "LlamaForCausalLM(cfg).generate(torch.tensor([[1, 2]]), max_new_tokens=2, do_sample=False)\n"
    )
    run = subprocess.run([str(py), "-c", root_probe], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
