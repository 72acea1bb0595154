"""Token id -> exact bytes, for every tokenizer family we support.

    >>> from transformers import AutoTokenizer                     # doctest: +SKIP
    >>> vocab = Vocabulary.from_tokenizer(AutoTokenizer.from_pretrained(folder))  # doctest: +SKIP

Special and added control tokens map to None: they are never allowed inside
constrained text. `size` is the model's logits width, which may exceed the
tokenizer's length; ids past the tokenizer are never allowed.
"""
from __future__ import annotations

import base64
import bisect
import codecs
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from . import vocab_cache
from .terms import freeze_long_lived, paused_gc

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _gpt2_byte_decoder() -> dict[str, int]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


CACHE_SIZE = 128  # compiled constraints kept per vocabulary
# What the front ends build per vocabulary as it loads, functions of a prepared
# Vocabulary that they register on import (core imports none of them): the tables every
# first mask of theirs would otherwise build (fsm/json/prepare.py).
PREPARERS: list = []
_CACHE_LOCK = threading.Lock()


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """The token alphabet of a model: `token_bytes[i]` is token i's bytes or None."""

    token_bytes: tuple
    eos_ids: tuple
    size: int
    name: str = ""
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if self.size < len(self.token_bytes):
            raise ValueError(f"vocab size {self.size} is smaller than the tokenizer's "
                             f"{len(self.token_bytes)} tokens")
        for e in self.eos_ids:
            if not 0 <= e < self.size:
                raise ValueError(f"EOS id {e} is outside the vocabulary (size {self.size})")

    def cached(self, key: tuple, build):
        """The constraint compiled under `key` for this vocabulary: `build()` on a miss,
        then kept, the CACHE_SIZE most recently used."""
        with _CACHE_LOCK:  # (requests compile from several threads: a server's worker pool)
            cache = self._cache.setdefault("compiled", OrderedDict())
            hit = cache.get(key)
            if hit is not None:
                cache.move_to_end(key)
                return hit
        value = build()  # (outside the lock: a slow compile holds up no other; two alike may race, one is kept)
        with _CACHE_LOCK:
            value = cache.setdefault(key, value)
            cache.move_to_end(key)
            if len(cache) > CACHE_SIZE:
                cache.popitem(last=False)
        return value

    # -- builders -----------------------------------------------------------------
    @classmethod
    def from_tokenizer(cls, tokenizer, vocab_size: int | None = None,
                       eos_ids: Sequence[int] | None = None) -> Vocabulary:
        """Build from a Hugging Face tokenizer (fast or slow), a mistral_common
        Tekkenizer, or a tiktoken Encoding. `vocab_size` is the model's logits width."""
        if hasattr(tokenizer, "decode_single_token_bytes") and hasattr(tokenizer, "n_vocab"):
            build = cls._from_tiktoken
        elif type(tokenizer).__name__ == "Tekkenizer":
            build = cls._from_tekkenizer
        else:
            build = cls._from_hf
        return build(tokenizer, vocab_size, eos_ids).prepare()

    @classmethod
    def _from_hf(cls, tok, vocab_size, eos_ids) -> Vocabulary:
        n = len(tok)
        added = dict(getattr(tok, "added_tokens_decoder", {}))  # (a property that rebuilds it: read once)
        special = set(getattr(tok, "all_special_ids", []))
        special.update(tid for tid, token in added.items() if getattr(token, "special", True))
        pieces = tok.convert_ids_to_tokens(list(range(n)))
        decode_piece = cls._piece_decoder(tok)
        out: list[bytes | None] = []
        for i, piece in enumerate(pieces):
            if i in special or piece is None:
                out.append(None)
            elif i in added:
                out.append(piece.encode("utf-8"))  # non-special added tokens: literal text
            else:
                out.append(decode_piece(piece))
        if eos_ids is None:
            eos_ids = [tok.eos_token_id] if tok.eos_token_id is not None else []
        return cls(tuple(out), tuple(dict.fromkeys(eos_ids)), vocab_size or n,
                   getattr(tok, "name_or_path", ""))

    @staticmethod
    def _piece_decoder(tok):
        kind = _decoder_kind(tok)
        if kind == "bytelevel":
            table = _gpt2_byte_decoder()
            to_latin1 = str.maketrans({c: chr(b) for c, b in table.items()})  # (then one byte a char)
            outside = re.compile(f"[^{re.escape(''.join(table))}]")

            def decode(piece: str) -> bytes:
                if outside.search(piece):  # a piece outside the byte alphabet: take it as text
                    return piece.encode("utf-8")
                return piece.translate(to_latin1).encode("latin-1")
            return decode
        if kind == "sentencepiece":
            def decode(piece: str) -> bytes:
                m = _BYTE_FALLBACK.match(piece)
                if m:
                    return bytes([int(m.group(1), 16)])
                return piece.replace("\u2581", " ").encode("utf-8")
            return decode
        raise ValueError(f"unsupported tokenizer decoder for {type(tok).__name__}: expected "
                         "byte-level BPE or SentencePiece (Metaspace / byte fallback)")

    @classmethod
    def _from_tiktoken(cls, enc, vocab_size, eos_ids) -> Vocabulary:
        special = set(getattr(enc, "special_tokens_set", set()))
        special_ids = {enc.encode_single_token(s) for s in special}
        out = []
        for i in range(enc.n_vocab):
            if i in special_ids:
                out.append(None)
                continue
            try:
                out.append(enc.decode_single_token_bytes(i))
            except KeyError:
                out.append(None)
        if eos_ids is None:
            eos_ids = [enc.eot_token] if getattr(enc, "eot_token", None) is not None else []
        return cls(tuple(out), tuple(eos_ids), vocab_size or enc.n_vocab, enc.name)

    @classmethod
    def _from_tekkenizer(cls, tok, vocab_size, eos_ids) -> Vocabulary:
        n = tok.n_words
        nspecial = tok.num_special_tokens
        out = [None] * nspecial + [tok._model.decode_single_token_bytes(i)
                                   for i in range(n - nspecial)]
        return cls(tuple(out), tuple(eos_ids if eos_ids is not None else [tok.eos_id]),
                   vocab_size or n, "tekken")

    @classmethod
    def from_tekken_json(cls, path: str | Path, vocab_size: int | None = None) -> Vocabulary:
        """Build from a mistral `tekken*.json` file (tiktoken-style, byte tokens). With
        STRUCTGEN_VOCAB_CACHE set, a file read before comes from the cache, keyed by its
        bytes: its JSON and base64 are not decoded again."""
        raw = Path(path).read_bytes()
        folder = vocab_cache.cache_folder()
        key = vocab_cache.file_key(raw, "tekken") if folder is not None else None
        got = vocab_cache.load(folder, key, TokenTrie, TokenColumns) if key else None
        eos, size = (got.meta.get("eos_ids"), got.meta.get("size")) if got is not None else (None, None)
        if got is not None and type(size) is int and size >= len(got.token_bytes) and isinstance(eos, list) \
                and all(type(e) is int and 0 <= e < size for e in eos):  # (else: the file is read again)
            vocab = cls(got.token_bytes, tuple(eos), vocab_size or size, Path(path).name)
            vocab.__dict__["trie"], vocab.__dict__["columns"] = got.trie, got.columns  # (as prepare() does)
            return vocab.prepare()
        data = json.loads(raw)
        cfg = data["config"]
        nspecial = cfg.get("default_num_special_tokens", len(data.get("special_tokens", [])))
        total = cfg.get("default_vocab_size", nspecial + len(data["vocab"]))
        ranks = data["vocab"][: total - nspecial]
        out = [None] * nspecial + [base64.b64decode(v["token_bytes"]) for v in ranks]
        eos = [t["rank"] for t in data.get("special_tokens", []) if t.get("token_str") == "</s>"]
        return cls(tuple(out), tuple(eos or [2]), vocab_size or total, Path(path).name).prepare(
            key, {"eos_ids": eos or [2], "size": total})

    # -- derived arrays (cached: a Vocabulary is shared by every constraint on it) ------
    @property
    def num_words(self) -> int:
        """Width of a bitmask row: ceil(size / 32)."""
        return (self.size + 31) // 32

    def prepare(self, cache_key: str | None = None, meta: dict | None = None) -> Vocabulary:
        """Build the tables every constraint's masks read (the token trie, its levels
        as Python lists, the byte columns, and the front ends' own: PREPARERS) now, as
        the vocabulary loads, not inside the first mask that needs them. Returns self;
        the builders (`from_tokenizer`, `from_tekken_json`) call it. With
        STRUCTGEN_VOCAB_CACHE set, the trie and columns come from that folder where an
        earlier process left them, and go there otherwise (vocab_cache.py), under
        `cache_key` (a builder's key of its tokenizer file, with its `meta`) or a hash
        of the token bytes."""
        folder = vocab_cache.cache_folder()
        if folder is not None and "trie" not in self.__dict__:
            key = cache_key or vocab_cache.vocab_key(self.token_bytes)
            got = None if cache_key else vocab_cache.load(folder, key, TokenTrie, TokenColumns,
                                                          len(self.token_bytes))
            if got is not None:  # (cached_property reads the instance's __dict__: frozen or not)
                self.__dict__["trie"], self.__dict__["columns"] = got.trie, got.columns
            else:
                vocab_cache.save(folder, key, self.trie, self.columns, self.token_bytes,
                                 meta or {"eos_ids": list(self.eos_ids), "size": self.size})
        trie = self.trie
        _ = self.columns, trie.lists, trie.below, trie.node_of_token
        with paused_gc():  # (a collection would scan the tokenizer's objects, not yet frozen)
            for prepare in PREPARERS:
                prepare(self)
        freeze_long_lived()  # (what is loaded by now lives as long as the process)
        return self

    @cached_property
    def trie(self) -> TokenTrie:
        return TokenTrie.build(self.token_bytes)

    @cached_property
    def columns(self) -> TokenColumns:
        return TokenColumns.build(self.token_bytes)

    def fingerprint(self) -> tuple:
        return (self.name, self.size, len(self.token_bytes), self.eos_ids,
                hash(self.token_bytes))


# The bytes of results TokenColumns.memo keeps per vocabulary (their arrays, as
# stored: the least recently used dropped first). A class's entry is a few bytes per
# token: a server's many schemas need hundreds of them, which a cap on entries would
# drop and rebuild over and over, hence a cap on bytes.
WALK_CACHE_BYTES = 64 << 20
_MISSING = object()


def _nbytes(x) -> int:
    """The bytes of the numpy arrays in x, a memo result (arrays in tuples, lists and
    dicts, one level down), at least 1."""
    if isinstance(x, np.ndarray):
        return x.nbytes
    parts = x.values() if isinstance(x, dict) else x if isinstance(x, (tuple, list)) else ()
    return 1 + sum(y.nbytes for y in parts if isinstance(y, np.ndarray))


@dataclass(frozen=True)
class TokenColumns:
    """The tokens with bytes, longest first, stored byte column by byte column, with
    each token's set of bytes: for walks that treat tokens one by one (a state that
    loops on a wide byte class keeps every token made of that class alive; only
    the others need walking).

    `order[k]` is the token at position k; the tokens with more than j bytes are
    positions 0..count[j]-1, and `column[j]` holds their j-th bytes. `byte_sets[w][k]`
    has bit (b - 64w) set when the token at position k contains byte b (64w <= b < 64w+64).
    """

    order: np.ndarray
    count: tuple
    column: tuple
    byte_sets: tuple
    first: np.ndarray  # column[0] as intp (fast take())
    high: np.ndarray  # byte_sets[2] | byte_sets[3]: the token has a byte >= 128
    utf8: np.ndarray  # bool: whole UTF-8 characters, the last one possibly cut short
    whole: np.ndarray  # bool: whole UTF-8 characters only
    broken: np.ndarray  # the positions (ascending) of the others
    chars: np.ndarray  # characters begun (bytes that are not UTF-8 continuations)
    by_chars: np.ndarray  # positions in ascending order of chars
    first_counts: np.ndarray  # float64[256]: how many tokens start with each byte
    first_of_id: np.ndarray  # int16 per token id: its first byte (256: no bytes)
    # positions (ascending) of the tokens that contain byte b: with_byte[with_start[b]:
    # with_start[b + 1]]; with_high: those with a byte >= 128; starting with byte b:
    # with_first[first_start[b]:first_start[b + 1]] (a loop's exceptions: with_bytes)
    with_byte: np.ndarray
    with_start: np.ndarray
    with_high: np.ndarray
    with_first: np.ndarray
    first_start: np.ndarray
    walks: dict = field(default_factory=dict, compare=False)  # memo(): key -> (result, bytes)
    walk_bytes: list = field(default_factory=lambda: [0], compare=False)  # their sum

    def memo(self, key, make):
        """make()'s result, remembered for this vocabulary under `key` and shared by
        every constraint on it (the token lists of a character class's runs, of a
        string's or comment's loop: the same for every schema or grammar that has one).
        At most WALK_CACHE_BYTES of arrays (as stored; the small caches some entries
        keep of their own are not counted), the least recently used dropped first;
        entries are never changed in place but for their own caches."""
        got = self.walks.pop(key, _MISSING)  # (put back last: the most recent)
        if got is _MISSING:
            r = make()  # (which may remember entries of its own: the bound is kept after)
            got = (r, _nbytes(r))
            self.walk_bytes[0] += got[1]
            while self.walk_bytes[0] > WALK_CACHE_BYTES and self.walks:
                try:
                    self.walk_bytes[0] -= self.walks.pop(next(iter(self.walks)))[1]
                except (RuntimeError, StopIteration, KeyError):  # another thread changed it meanwhile
                    break
        self.walks[key] = got
        return got[0]

    @classmethod
    def build(cls, token_bytes: Sequence[bytes | None]) -> TokenColumns:
        lengths = np.array([len(b) if b else 0 for b in token_bytes], dtype=np.intp)
        order = np.argsort(-lengths, kind="stable")
        order = order[: int(np.count_nonzero(lengths))]
        lens = lengths[order]
        flat = np.frombuffer(b"".join(token_bytes[i] for i in order.tolist()), dtype=np.uint8)
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]) if len(lens) else lens
        depth = int(lens[0]) if len(lens) else 0
        count = tuple(int(np.count_nonzero(lens > j)) for j in range(depth))
        column = tuple(flat[starts[: count[j]] + j] for j in range(depth))
        owner = np.repeat(np.arange(len(lens)), lens)
        byte_sets = []
        for w in range(4):  # OR each token's bits of bytes 64w..64w+63 together
            part = np.zeros(len(lens), dtype=np.uint64)
            inside = (flat >> 6) == w
            np.bitwise_or.at(part, owner[inside], np.left_shift(np.uint64(1), (flat[inside] & 63).astype(np.uint64)))
            byte_sets.append(part)
        first = column[0].astype(np.intp) if depth else np.zeros(0, dtype=np.intp)
        kinds = np.array([_utf8_kind(token_bytes[i]) for i in order.tolist()], dtype=np.int8).reshape(-1)
        utf8, whole = kinds >= 1, kinds == 2
        chars = np.bincount(owner[(flat & 0xC0) != 0x80], minlength=len(lens)).astype(np.int32)
        first_of_id = np.full(len(token_bytes), 256, dtype=np.int16)
        first_of_id[order] = first
        by_byte = np.argsort(flat, kind="stable")  # (a radix sort: positions stay ascending)
        byte_of, with_byte = flat.take(by_byte), owner.take(by_byte)
        once = np.ones(len(by_byte), dtype=bool)  # a token's repeated byte: once
        once[1:] = (byte_of[1:] != byte_of[:-1]) | (with_byte[1:] != with_byte[:-1])
        byte_of, with_byte = byte_of[once], with_byte[once]
        high = byte_sets[2] | byte_sets[3]
        by_first = np.argsort(first, kind="stable")
        return cls(order, count, column, tuple(byte_sets), first, high, utf8, whole, np.flatnonzero(~whole),
                   chars, np.argsort(chars, kind="stable"),
                   np.bincount(first, minlength=256).astype(np.float64), first_of_id,
                   with_byte, np.searchsorted(byte_of, np.arange(257)), np.flatnonzero(high), by_first,
                   np.searchsorted(first.take(by_first), np.arange(257)))

    def with_bytes(self, outside: np.ndarray, firsts: np.ndarray, most: int) -> np.ndarray | None:
        """The positions (ascending) of the tokens that contain a byte of `outside` or
        start with a byte of `firsts` (bool[256] each), from the lists above; None where
        those lists hold more than `most` entries (most tokens: a test of every token's
        byte set costs less)."""
        parts, start, fstart = [], self.with_start, self.first_start
        if outside[0x80:].all():  # one list for the 128 high bytes
            parts.append(self.with_high)
            outside = outside[:0x80]
        sizes = np.diff(start[:len(outside) + 1])[outside].sum() + np.diff(fstart)[firsts].sum()
        if sum(map(len, parts)) + int(sizes) > most:
            return None
        for lists, bounds, mark in ((self.with_byte, start, outside), (self.with_first, fstart, firsts)):
            for b in np.flatnonzero(mark).tolist():
                parts.append(lists[bounds[b]:bounds[b + 1]])
        return ascending_set(parts)


def ascending_set(parts: list) -> np.ndarray:
    """The integers of arrays `parts`, ascending, each once (np.unique imports
    numpy.ma on its first call, which would land inside some mask)."""
    if not parts:
        return np.zeros(0, dtype=np.intp)
    out = np.sort(np.concatenate(parts))
    keep = np.ones(len(out), dtype=bool)
    keep[1:] = out[1:] != out[:-1]
    return out[keep]


def _utf8_kind(data: bytes) -> int:
    """2: data is whole UTF-8 characters; 1: it starts at a character boundary and is
    valid UTF-8 up to a last character cut short; 0: neither (surrogates and overlong
    forms are invalid)."""
    try:
        data.decode("utf-8")
        return 2
    except UnicodeDecodeError:
        pass
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
        return 1
    except UnicodeDecodeError:
        return 0


@dataclass(frozen=True)
class TokenTrie:
    """The vocabulary's tokens as a byte trie, stored level by level for vectorised
    walks (a token is walked once per distinct prefix: 100k nodes instead of 330k
    bytes for SmolLM2).

    Level j holds the distinct (j+1)-byte prefixes in sorted order, so the children
    of a node are contiguous in the next level: `byte[j][k]` is node k's last byte,
    `parent[j][k]` its parent's index in level j-1, and `child_start[j][k]`,
    `child_end[j][k]` its children's range in level j+1. Nodes are also numbered
    flat (`offset[j] + k`); `token_of_node[n]` is the token id that ends at flat
    node n (-1 for none); tokens sharing their bytes with another are listed in
    `dup_nodes` / `dup_ids`.
    """

    byte: tuple
    parent: tuple
    child_start: tuple
    child_end: tuple
    offset: tuple
    num_nodes: int
    token_of_node: np.ndarray
    dup_nodes: np.ndarray
    dup_ids: np.ndarray
    descendants: tuple  # descendants[j][k]: nodes below node k of level j
    num_tokens: int

    @cached_property
    def node_of_token(self) -> np.ndarray:
        """node_of_token[i]: the flat node where token i ends (`num_nodes`, a slot no
        walk reaches, for tokens without bytes)."""
        out = np.full(self.num_tokens, self.num_nodes, dtype=np.intp)
        nodes = np.flatnonzero(self.token_of_node >= 0)
        out[self.token_of_node[nodes]] = nodes
        out[self.dup_ids] = self.dup_nodes
        return out

    def path(self, prefix: bytes) -> list[int]:
        """The level indices of the nodes along `prefix`, as far as the trie has it
        (shorter than the prefix where no token goes on with its next byte)."""
        byte, cstart, cend = self.lists
        out: list[int] = []
        lo, hi = 0, len(byte[0]) if byte else 0
        for j, b in enumerate(prefix[: len(byte)]):
            k = bisect.bisect_left(byte[j], b, lo, hi)
            if k == hi or byte[j][k] != b:
                break
            out.append(k)
            lo, hi = cstart[j][k], cend[j][k]
        return out

    def tokens_at(self, nodes: np.ndarray) -> np.ndarray:
        """The ids of the tokens that end at the flat nodes `nodes` (duplicates too)."""
        ids = self.token_of_node.take(nodes)
        ids = ids[ids >= 0]
        if len(self.dup_nodes):
            ids = np.concatenate([ids, self.dup_ids[np.isin(self.dup_nodes, nodes)]])
        return ids

    def tokens_under(self, prefix: bytes) -> np.ndarray:
        """The ids of the tokens whose bytes start with `prefix` (its subtree: one
        contiguous range of nodes per level)."""
        path = self.path(prefix)
        if not prefix or len(path) < len(prefix):
            return np.zeros(0, dtype=np.intp)
        _, cstart, cend = self.lists
        j, lo, hi, nodes = len(prefix) - 1, path[-1], path[-1] + 1, []
        while lo < hi:
            nodes.append(np.arange(self.offset[j] + lo, self.offset[j] + hi))
            if j + 1 == len(cstart):
                break
            lo, hi = cstart[j][lo], cend[j][hi - 1]
            j += 1
        return self.tokens_at(np.concatenate(nodes))

    @cached_property
    def below(self) -> list[int]:
        """below[j]: how many nodes levels j and deeper hold (below[depth] is 0)."""
        out = [0] * (len(self.byte) + 1)
        for j in range(len(self.byte) - 1, -1, -1):
            out[j] = out[j + 1] + len(self.byte[j])
        return out

    @cached_property
    def lists(self) -> tuple:
        """byte, child_start, child_end as Python lists (for walks of small subtrees)."""
        return (tuple(b.tolist() for b in self.byte), tuple(c.tolist() for c in self.child_start),
                tuple(c.tolist() for c in self.child_end))

    @cached_property
    def dfs(self) -> tuple:
        """The nodes in depth-first order, for the C walk (walks.py): each node's last
        byte (uint8), depth, subtree size counting itself, token id (-1: none) and flat id,
        then each flat node's position in that order (int32 the rest). A node's position
        is its parent's plus one plus the subtrees of its elder siblings."""
        n = self.num_nodes
        byte, depth, size, token, flat, pos_of = (np.zeros(n, dtype=t) for t in (np.uint8, *[np.int32] * 5))
        parent_pos = None
        for j in range(len(self.byte)):
            sizes = 1 + self.descendants[j]
            before = np.cumsum(sizes) - sizes  # subtrees before each node in its level
            if j == 0:
                pos = before
            else:
                par = self.parent[j]
                pos = parent_pos.take(par) + 1 + before - before.take(self.child_start[j - 1].take(par))
            ids = np.arange(self.offset[j], self.offset[j] + len(self.byte[j]))
            byte[pos], depth[pos], size[pos] = self.byte[j], j, sizes
            token[pos], flat[pos], pos_of[ids] = self.token_of_node.take(ids), ids, pos
            parent_pos = pos
        return byte, depth, size, token, flat, pos_of

    @classmethod
    def build(cls, token_bytes: Sequence[bytes | None]) -> TokenTrie:
        """Level by level over the tokens in sorted order, where the tokens that share a
        (j+1)-byte prefix are neighbours: a node of level j begins wherever a token's
        first j+1 bytes differ from the previous token's (or it is too short to have them)."""
        ids = sorted((i for i, b in enumerate(token_bytes) if b), key=token_bytes.__getitem__)  # (stable)
        n = len(ids)
        lens = np.fromiter((len(token_bytes[i]) for i in ids), dtype=np.intp, count=n)
        flat = np.frombuffer(b"".join(token_bytes[i] for i in ids), dtype=np.uint8)
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.intp) if n else lens
        depth = int(lens.max()) if n else 0
        ids = np.array(ids, dtype=np.intp)
        byte, parent, child_start, child_end, offset = [], [], [], [], []
        same = np.ones(n, dtype=bool)  # the token's first j bytes equal the previous token's
        node = np.zeros(n, dtype=np.intp)  # the token's node at the previous level
        token_of_node, dup_nodes, dup_ids, total = [], [], [], 0
        for j in range(depth):
            at = np.flatnonzero(lens > j)  # the tokens that reach level j (positions, ascending)
            col = np.full(n + 1, -1, dtype=np.int16)  # (col[-1]: nothing before the first token)
            col[at] = flat[starts[at] + j]
            same[at] &= col[at] == col[at - 1]
            new = ~same[at]
            begins = at[new]
            level = np.cumsum(new) - 1  # each token's node index at level j
            byte.append(col[begins].astype(np.intp))  # intp: fast take()
            par = node[begins] if j else np.zeros(len(begins), dtype=np.intp)
            parent.append(par)
            if j:  # children ranges of level j-1, from the sorted parent column
                n_prev = len(byte[j - 1])
                child_start.append(np.searchsorted(par, np.arange(n_prev), "left"))
                child_end.append(np.searchsorted(par, np.arange(n_prev), "right"))
            node[at] = level
            ends = np.flatnonzero(lens[at] == j + 1)  # (indices into `at`) the tokens that end here
            here = level[ends]
            first = np.ones(len(ends), dtype=bool)  # the first (lowest id) of tokens with equal bytes
            first[1:] = here[1:] != here[:-1]
            token_of_node.append((total + here[first], ids[at[ends[first]]]))
            dup_nodes.append(total + here[~first])
            dup_ids.append(ids[at[ends[~first]]])
            offset.append(total)
            total += len(begins)
        child_start.append(np.zeros(len(byte[-1]) if byte else 0, dtype=np.intp))
        child_end.append(np.zeros(len(byte[-1]) if byte else 0, dtype=np.intp))
        owner = np.full(total, -1, dtype=np.intp)
        for where, who in token_of_node:
            owner[where] = who
        below = [np.zeros(len(level), dtype=np.intp) for level in byte]
        for j in range(len(byte) - 2, -1, -1):  # children count + their descendants
            per_child = 1 + below[j + 1]
            sums = np.concatenate([[0], np.cumsum(per_child)])
            below[j] = sums[child_end[j]] - sums[child_start[j]]
        dup_nodes, dup_ids = (np.concatenate([np.zeros(0, np.intp), *x]).astype(np.intp) for x in (dup_nodes, dup_ids))
        return cls(tuple(byte), tuple(parent), tuple(child_start), tuple(child_end),
                   tuple(offset), total, owner, dup_nodes, dup_ids, tuple(below), len(token_bytes))


def _decoder_kind(tok) -> str:
    if hasattr(tok, "backend_tokenizer"):
        backend = tok.backend_tokenizer  # (its parts' own JSON: the whole tokenizer's is the vocabulary)
        decoder, pre = (json.loads(x.__getstate__()) if x is not None else {}
                        for x in (backend.decoder, backend.pre_tokenizer))
        text = json.dumps(decoder)
        if '"ByteLevel"' in text:
            return "bytelevel"
        if '"ByteFallback"' in text or '"Metaspace"' in text or "\u2581" in text:
            return "sentencepiece"
        if type(backend.model).__name__ == "BPE" and pre.get("type") == "ByteLevel":
            return "bytelevel"
        return "unknown"
    if hasattr(tok, "sp_model"):
        return "sentencepiece"
    if hasattr(tok, "byte_decoder"):
        return "bytelevel"
    return "unknown"
