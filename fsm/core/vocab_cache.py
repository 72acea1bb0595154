"""The vocabulary's token trie and byte columns on disk, so that a second process loads them
instead of building them (docs/automaton.md, "The vocabulary").

Opt-in: set STRUCTGEN_VOCAB_CACHE to a folder (created if missing). A file per vocabulary,
`vocab-<key>.bin`, keyed by a hash of every token's bytes (`vocab_key`), or, for a vocabulary
read from a tokenizer file (`from_tekken_json`), of that file's bytes (`file_key`: a hit then
skips reading the file's JSON and base64: the token bytes are stored too); either key covers
the package version and this format. The file is a header (JSON: each array's dtype, shape and
offset) then the arrays' raw bytes, read in one go and viewed in place, never unpickled: a file
of the folder cannot run code. Written to a temporary file then renamed, so concurrent
processes never read a half written one; a file that cannot be read, is of another key or does
not fit the vocabulary is rebuilt and replaced. A folder that cannot be written is reported
once (a warning) and the tables are built as without the cache.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

ENV = "STRUCTGEN_VOCAB_CACHE"
FORMAT = 2  # (raise when the file's layout or TokenTrie's / TokenColumns' fields change meaning)
MAGIC = b"structgen vocab\n"
_ALIGN = 64  # each array's offset in the file (aligned views)
_warned: set = set()


@dataclass(frozen=True)
class Cached:
    """A cache file's contents: the vocabulary's token bytes (None for tokens without
    bytes), `meta` (the builder's own values: EOS ids, default size), the tables."""

    token_bytes: tuple
    meta: dict
    trie: object
    columns: object


def cache_folder() -> Path | None:
    """The folder STRUCTGEN_VOCAB_CACHE names, or None (no disk cache)."""
    value = os.environ.get(ENV, "").strip()
    return Path(value).expanduser() if value else None


def _salted(kind: str):
    from importlib.metadata import PackageNotFoundError, version
    try:
        release = version("structgen")
    except PackageNotFoundError:
        release = "source"
    return hashlib.sha256(f"structgen {release} vocab-cache {FORMAT} {kind}\n".encode())


def vocab_key(token_bytes) -> str:
    """A hash of the tokens' bytes (each with its length; none for a token without bytes),
    the package version and the file format."""
    h = _salted("tokens")
    lengths = np.fromiter((len(b) if b is not None else -1 for b in token_bytes), dtype=np.int64,
                          count=len(token_bytes))
    h.update(lengths.tobytes())
    h.update(b"".join(b for b in token_bytes if b))
    return h.hexdigest()[:32]


def file_key(data: bytes, kind: str) -> str:
    """A hash of a tokenizer file's bytes, how it is read (`kind`), the package version and
    the file format: the key of the vocabulary a builder reads from it."""
    h = _salted(f"file {kind}")
    h.update(data)
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


def _token_arrays(token_bytes) -> dict:
    lengths = np.fromiter((len(b) if b is not None else -1 for b in token_bytes), dtype=np.int32,
                          count=len(token_bytes))
    flat = np.frombuffer(b"".join(b for b in token_bytes if b), dtype=np.uint8)
    return {"tokens.lengths": lengths, "tokens.flat": flat}


def _tokens(arrays: dict) -> tuple:
    lengths = arrays["tokens.lengths"]
    flat = arrays["tokens.flat"].tobytes()
    sizes = np.maximum(lengths, 0)
    ends = np.cumsum(sizes)
    if len(ends) and ends[-1] != len(flat):
        raise ValueError("token bytes do not match their lengths")
    out = [flat[a:e] for a, e in zip((ends - sizes).tolist(), ends.tolist())]
    for i in np.flatnonzero(lengths < 0).tolist():
        out[i] = None
    return tuple(out)


def _read(path: Path, key: str) -> tuple[dict, dict]:
    """(arrays by name, header) of a cache file; ValueError where it is not a whole file of
    this format and key."""
    raw = np.fromfile(path, dtype=np.uint8)  # (one read; the arrays are views of it)
    if raw[:len(MAGIC)].tobytes() != MAGIC or len(raw) < len(MAGIC) + 8:
        raise ValueError("not a vocabulary cache file")
    size = int(raw[len(MAGIC):len(MAGIC) + 8].view("<u8")[0])
    start = len(MAGIC) + 8
    head = json.loads(raw[start:start + size].tobytes())
    if head.get("format") != FORMAT or head.get("key") != key:
        raise ValueError("another format's or key's file")
    base, arrays = start + size, {}
    for name, dtype, shape, offset in head["arrays"]:
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise ValueError("object arrays are never read")
        n = dt.itemsize * int(np.prod(shape, dtype=np.int64))
        if not 0 <= offset <= offset + n <= len(raw) - base:
            raise ValueError("an array past the end of the file")
        arrays[name] = raw[base + offset:base + offset + n].view(dt).reshape(tuple(shape))
    return arrays, head


def load(folder: Path, key: str, trie_cls, columns_cls, num_tokens: int | None = None) -> Cached | None:
    """The folder's file for key, or None (missing, unreadable, of another key, or not of a
    vocabulary of num_tokens tokens, where given)."""
    try:
        arrays, head = _read(folder / f"vocab-{key}.bin", key)
        kinds = head["kinds"]
        token_bytes = _tokens(arrays)
        trie = _unflatten(trie_cls, "trie", arrays, kinds)
        columns = _unflatten(columns_cls, "columns", arrays, kinds)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    n = len(token_bytes)
    if (num_tokens is not None and n != num_tokens) or trie.num_tokens != n or len(columns.first_of_id) != n:
        return None
    return Cached(token_bytes, head.get("meta", {}), trie, columns)


def save(folder: Path, key: str, trie, columns, token_bytes, meta: dict | None = None) -> None:
    """Write the vocabulary's tables for key: to a temporary file of the folder, then renamed
    over. `meta`: JSON values the builder reads back on a hit."""
    arrays, kinds = _token_arrays(token_bytes), {}
    _flatten("trie", trie, arrays, kinds)
    _flatten("columns", columns, arrays, kinds)
    listing, offset = [], 0
    for name, a in arrays.items():
        a = np.asarray(a, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        arrays[name] = a
        listing.append([name, a.dtype.str, list(a.shape), offset])
        offset += -(-a.nbytes // _ALIGN) * _ALIGN
    head = json.dumps({"format": FORMAT, "key": key, "kinds": kinds, "meta": meta or {},
                       "arrays": listing}).encode()
    head += b" " * (-(len(MAGIC) + 8 + len(head)) % _ALIGN)  # (the data starts aligned too)
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".vocab-{key}-", suffix=".tmp", delete=False) as f:
            tmp = f.name
            f.write(MAGIC + np.uint64(len(head)).astype("<u8").tobytes() + head)
            for a in arrays.values():
                f.write(a.tobytes())
                f.write(b"\0" * (-a.nbytes % _ALIGN))
        os.replace(tmp, folder / f"vocab-{key}.bin")
    except OSError as e:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        if str(folder) not in _warned:
            _warned.add(str(folder))
            warnings.warn(f"{ENV}={folder}: cannot write the vocabulary cache there ({e}); "
                          "building the tables in each process", RuntimeWarning, stacklevel=3)
