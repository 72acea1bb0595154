"""The disk cache of a vocabulary's trie and columns (STRUCTGEN_VOCAB_CACHE): a second load
reads the tables an earlier one wrote, and they are the tables a build makes; a broken,
foreign or unwritable cache never changes a mask."""
from __future__ import annotations

import threading
import warnings
from dataclasses import fields

import numpy as np
import pytest
from oracles import live_tokens_brute_force

from structgen import fsm
from structgen.fsm.core import vocab_cache, vocabulary
from structgen.fsm.core.vocabulary import TokenColumns, TokenTrie

TOKENS = (None, b"a", b"ab", b"abc", b"b", b"\xc3", b"\xa9", b"\xc3\xa9", b"{\"", b"\"}", b"1", b"12", b"",
          b" x", b"ab")  # (a duplicate, an empty token, half a character)


def _vocab(tokens=TOKENS) -> fsm.Vocabulary:
    return fsm.Vocabulary(tuple(tokens), (0,), len(tokens) + 3)


def _same_tables(a, b) -> None:
    for f in fields(a):
        if not f.compare:
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        elif isinstance(x, tuple) and x and isinstance(x[0], np.ndarray):
            assert len(x) == len(y) and all(u.dtype == v.dtype and np.array_equal(u, v) for u, v in zip(x, y)), f.name
        else:
            assert x == y, f.name


def _masks_exact(vocab) -> None:
    a = fsm.compile_regex(r"(ab|é|\{\"[0-9]+\"\})+", vocab)
    for prefix in (b"", b"a", b"ab", b'{"', b'{"1', b"\xc3"):
        s = a.dfa.walk(a.start, prefix)
        if s:
            assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == live_tokens_brute_force(a, s)


def test_second_load_reads_the_tables_the_first_wrote(tmp_path, monkeypatch):
    monkeypatch.setenv(vocab_cache.ENV, str(tmp_path))
    built = _vocab()
    built.prepare()
    files = list(tmp_path.glob("vocab-*.bin"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    loaded = _vocab()
    calls = []
    for cls in (TokenTrie, TokenColumns):  # a build of the whole vocabulary's tables now would be a miss
        def build(token_bytes, _build=cls.build):
            calls.append(tuple(token_bytes) == TOKENS)
            return _build(token_bytes)
        monkeypatch.setattr(cls, "build", build)
    loaded.prepare()
    assert not any(calls)
    monkeypatch.undo()
    plain = fsm.Vocabulary(TOKENS, (0,), len(TOKENS) + 3)
    _same_tables(loaded.trie, plain.trie)
    _same_tables(loaded.columns, plain.columns)
    assert np.array_equal(loaded.trie.node_of_token, plain.trie.node_of_token)
    _masks_exact(loaded)


def test_key_follows_every_token():
    key = vocab_cache.vocab_key(TOKENS)
    assert key == vocab_cache.vocab_key(list(TOKENS))
    for changed in (TOKENS[:-1], TOKENS[:3] + (b"abd",) + TOKENS[4:], TOKENS[:12] + (None,) + TOKENS[13:],
                    TOKENS[:1] + (b"",) + TOKENS[1:-1]):
        assert vocab_cache.vocab_key(changed) != key


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign"])
def test_a_bad_file_is_rebuilt_and_replaced(tmp_path, monkeypatch, damage):
    monkeypatch.setenv(vocab_cache.ENV, str(tmp_path))
    _vocab().prepare()
    path = next(tmp_path.glob("vocab-*.bin"))
    good = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a zip file at all")
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    else:  # another vocabulary's tables under this one's name (a collision, a hand-copied file)
        other = _vocab(TOKENS[::-1])  # (as many tokens: only the key tells)
        vocab_cache.save(tmp_path, "other", other.trie, other.columns, other.token_bytes)
        (tmp_path / "vocab-other.bin").replace(path)
    vocab = _vocab()
    vocab.prepare()
    _masks_exact(vocab)
    assert vocab_cache.load(tmp_path, path.stem.removeprefix("vocab-"), TokenTrie, TokenColumns, len(TOKENS))


def test_unwritable_folder_warns_once_and_masks_stay_exact(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would be")
    monkeypatch.setenv(vocab_cache.ENV, str(blocker / "cache"))
    monkeypatch.setattr(vocab_cache, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            vocab = _vocab()
            vocab.prepare()
    assert [str(w.message) for w in caught if "vocabulary cache" in str(w.message)][:1] and \
        sum("vocabulary cache" in str(w.message) for w in caught) == 1
    _masks_exact(vocab)


def test_concurrent_writers_leave_one_whole_file(tmp_path, monkeypatch):
    monkeypatch.setenv(vocab_cache.ENV, str(tmp_path))
    vocab = _vocab()
    key = vocab_cache.vocab_key(vocab.token_bytes)
    threads = [threading.Thread(target=vocab_cache.save, args=(tmp_path, key, vocab.trie, vocab.columns,
                                                               vocab.token_bytes))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.name for p in tmp_path.iterdir()] == [f"vocab-{key}.bin"]
    got = vocab_cache.load(tmp_path, key, TokenTrie, TokenColumns, len(TOKENS))
    assert got.token_bytes == vocab.token_bytes
    _same_tables(got.trie, vocab.trie)
    _same_tables(got.columns, vocab.columns)


def test_off_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(vocab_cache.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    _vocab().prepare()
    assert vocab_cache.cache_folder() is None and not list(tmp_path.iterdir())


def _tekken_file(path, tokens, nspecial=3):
    import base64
    import json
    vocab = [{"rank": i, "token_bytes": base64.b64encode(t).decode()} for i, t in enumerate(tokens)]
    special = [{"rank": i, "token_str": s} for i, s in enumerate(["<unk>", "<s>", "</s>"][:nspecial])]
    path.write_text(json.dumps({"config": {"default_num_special_tokens": nspecial,
                                           "default_vocab_size": nspecial + len(tokens)},
                                "vocab": vocab, "special_tokens": special}))


def test_tekken_file_hit_skips_its_base64_and_is_the_same_vocabulary(tmp_path, monkeypatch):
    tokens = [t for t in TOKENS if t]
    path = tmp_path / "tekken.json"
    _tekken_file(path, tokens)
    plain = fsm.Vocabulary.from_tekken_json(path)  # (no cache: the oracle)
    monkeypatch.setenv(vocab_cache.ENV, str(tmp_path / "cache"))
    first = fsm.Vocabulary.from_tekken_json(path, vocab_size=40)
    assert len(list((tmp_path / "cache").glob("vocab-*.bin"))) == 1
    with monkeypatch.context() as m:
        m.setattr(vocabulary.base64, "b64decode", lambda *a: pytest.fail("a hit decoded the file's tokens"))
        second = fsm.Vocabulary.from_tekken_json(path)
    for v in (first, second):
        assert v.token_bytes == plain.token_bytes and v.eos_ids == plain.eos_ids == (2,)
        assert v.name == plain.name
        _same_tables(v.trie, plain.trie)
        _same_tables(v.columns, plain.columns)
    assert (first.size, second.size) == (40, plain.size)
    _masks_exact(second)


def test_a_changed_tekken_file_is_read_again(tmp_path, monkeypatch):
    path = tmp_path / "tekken.json"
    tokens = [t for t in TOKENS if t]
    _tekken_file(path, tokens)
    monkeypatch.setenv(vocab_cache.ENV, str(tmp_path / "cache"))
    before = fsm.Vocabulary.from_tekken_json(path)
    _tekken_file(path, tokens[:4] + [b"zz"] + tokens[5:])  # (the same size: one token's bytes changed)
    after = fsm.Vocabulary.from_tekken_json(path)
    monkeypatch.delenv(vocab_cache.ENV)
    plain = fsm.Vocabulary.from_tekken_json(path)
    assert after.token_bytes == plain.token_bytes and after.token_bytes[3 + 4] == b"zz" != before.token_bytes[3 + 4]
    _same_tables(after.trie, plain.trie)
    _same_tables(after.columns, plain.columns)


def test_a_tekken_entry_with_bad_meta_is_read_again(tmp_path, monkeypatch):
    """The cache file's own values (EOS ids, size) that do not fit its tokens: the tekken
    file is decoded again, never a Vocabulary built from them (nor an error)."""
    path = tmp_path / "tekken.json"
    tokens = [t for t in TOKENS if t]
    _tekken_file(path, tokens)
    plain = fsm.Vocabulary.from_tekken_json(path)
    monkeypatch.setenv(vocab_cache.ENV, str(tmp_path / "cache"))
    key = vocab_cache.file_key(path.read_bytes(), "tekken")
    for meta in ({"eos_ids": [99], "size": 20}, {"eos_ids": [2], "size": 3}, {"eos_ids": ["2"], "size": 20}, {}):
        vocab_cache.save(tmp_path / "cache", key, plain.trie, plain.columns, plain.token_bytes, meta)
        got = fsm.Vocabulary.from_tekken_json(path)
        assert (got.token_bytes, got.eos_ids, got.size) == (plain.token_bytes, plain.eos_ids, plain.size)
