"""The vocabulary's token trie and byte columns on disk, so that a second process loads them
instead of building them (docs/automaton.md, "The vocabulary").

Opt-in: set STRUCTGEN_VOCAB_CACHE to a folder (created if missing). A file per vocabulary,
`vocab-<key>.npz`, keyed by a hash of every token's bytes, the package version and this
format's; numpy arrays only (read with allow_pickle=False: a file of the folder cannot run
code). Written to a temporary file then renamed, so concurrent processes never read a half
written one; a file that cannot be read or does not fit the vocabulary is rebuilt and
replaced. A folder that cannot be written is reported once (a warning) and the tables are
built as without the cache.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
import zipfile
from dataclasses import fields
from pathlib import Path

import numpy as np

ENV = "STRUCTGEN_VOCAB_CACHE"
FORMAT = 1  # (raise when TokenTrie or TokenColumns change their fields' meaning)
_warned: set = set()


def cache_folder() -> Path | None:
    """The folder STRUCTGEN_VOCAB_CACHE names, or None (no disk cache)."""
    value = os.environ.get(ENV, "").strip()
    return Path(value).expanduser() if value else None


def vocab_key(token_bytes) -> str:
    """A hash of the tokens' bytes (each with its length; none for a token without bytes),
    the package version and the file format."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        release = version("structgen")
    except PackageNotFoundError:
        release = "source"
    h = hashlib.sha256(f"structgen {release} vocab-cache {FORMAT}\n".encode())
    lengths = np.fromiter((len(b) if b is not None else -1 for b in token_bytes), dtype=np.int64,
                          count=len(token_bytes))
    h.update(lengths.tobytes())
    h.update(b"".join(b for b in token_bytes if b))
    return h.hexdigest()[:32]


def _flatten(name: str, table, out: dict, kinds: dict) -> None:
    """table's stored fields (those compared: not its memo) into out's arrays."""
    for f in fields(table):
        if not f.compare:
            continue
        value, key = getattr(table, f.name), f"{name}.{f.name}"
        if isinstance(value, np.ndarray):
            kinds[key], out[key] = "array", value
        elif isinstance(value, int):
            kinds[key], out[key] = "int", np.asarray(value, dtype=np.int64)
        elif all(isinstance(x, int) for x in value):
            kinds[key], out[key] = "ints", np.asarray(value, dtype=np.int64)
        else:
            kinds[key] = len(value)
            for i, x in enumerate(value):
                out[f"{key}.{i}"] = x


def _unflatten(cls, name: str, arrays: dict, kinds: dict):
    values = {}
    for f in fields(cls):
        if not f.compare:
            continue
        key = f"{name}.{f.name}"
        kind = kinds[key]
        if kind == "array":
            values[f.name] = arrays[key]
        elif kind == "int":
            values[f.name] = int(arrays[key])
        elif kind == "ints":
            values[f.name] = tuple(arrays[key].tolist())
        else:
            values[f.name] = tuple(arrays[f"{key}.{i}"] for i in range(kind))
    return cls(**values)


def load(folder: Path, key: str, trie_cls, columns_cls, num_tokens: int):
    """(trie, columns) from the folder's file for key, or None (missing, unreadable, or not
    of a vocabulary of num_tokens tokens)."""
    try:
        with np.load(folder / f"vocab-{key}.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        kinds = json.loads(str(arrays.pop("kinds")))
        trie = _unflatten(trie_cls, "trie", arrays, kinds)
        columns = _unflatten(columns_cls, "columns", arrays, kinds)
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile):
        return None
    if trie.num_tokens != num_tokens or len(columns.first_of_id) != num_tokens:
        return None
    return trie, columns


def save(folder: Path, key: str, trie, columns) -> None:
    """Write the tables for key: to a temporary file of the folder, then renamed over."""
    arrays, kinds = {}, {}
    _flatten("trie", trie, arrays, kinds)
    _flatten("columns", columns, arrays, kinds)
    arrays["kinds"] = np.asarray(json.dumps(kinds))
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".vocab-{key}-", suffix=".tmp", delete=False) as f:
            tmp = f.name
            np.savez(f, **arrays)
        os.replace(tmp, folder / f"vocab-{key}.npz")
    except OSError as e:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        if str(folder) not in _warned:
            _warned.add(str(folder))
            warnings.warn(f"{ENV}={folder}: cannot write the vocabulary cache there ({e}); "
                          "building the tables in each process", RuntimeWarning, stacklevel=3)
