"""Token bytes are exact: concatenations equal what the tokenizer itself decodes."""
from __future__ import annotations

import numpy as np
import pytest

from structgen import fsm

TEXTS = ["Hello, world!", "  indented\n\ttabs\r\n", "价格是 42 元。中文测试", "emoji 😀🎉👍🏽 mixed ü é ß",
         "日本語のテキストと한국어", "code: def f(x):\n    return x**2  # ok", "\u200b zero width \ufeff"]


def test_smollm2_canonical_tokenizations(smol_tokenizer, smol_vocab):
    for text in TEXTS:
        ids = smol_tokenizer.encode(text, add_special_tokens=False)
        assert b"".join(smol_vocab.token_bytes[i] for i in ids) == text.encode()


def test_smollm2_random_sequences_match_decode(smol_tokenizer, smol_vocab):
    rng = np.random.default_rng(0)
    ordinary = [i for i, b in enumerate(smol_vocab.token_bytes) if b is not None]
    for _ in range(300):
        ids = rng.choice(ordinary, size=int(rng.integers(1, 12))).tolist()
        data = b"".join(smol_vocab.token_bytes[i] for i in ids)
        assert data.decode("utf-8", "replace") == smol_tokenizer.decode(ids)


def test_smollm2_special_tokens_have_no_bytes(smol_tokenizer, smol_vocab):
    assert smol_vocab.eos_ids == (smol_tokenizer.eos_token_id,)
    for tid in smol_tokenizer.all_special_ids:
        assert smol_vocab.token_bytes[tid] is None
    assert smol_vocab.token_bytes[smol_tokenizer.convert_tokens_to_ids("<|im_start|>")] is None


def test_sentencepiece_byte_fallback(sp_tokenizer, sp_vocab):
    assert len(sp_vocab.token_bytes) == 32000
    byte_tok = sp_tokenizer.convert_tokens_to_ids("<0xE4>")
    assert sp_vocab.token_bytes[byte_tok] == b"\xe4"
    for text in TEXTS:
        ids = sp_tokenizer.encode(text, add_special_tokens=False)
        # SentencePiece adds a dummy-prefix space that decoding strips again.
        data = b"".join(sp_vocab.token_bytes[i] for i in ids)
        assert data == b" " + text.encode() or data == text.encode()
        assert data.decode().removeprefix(" ") == sp_tokenizer.decode(ids)
    rng = np.random.default_rng(1)
    ordinary = [i for i, b in enumerate(sp_vocab.token_bytes) if b is not None]
    for _ in range(300):
        ids = rng.choice(ordinary, size=int(rng.integers(1, 10))).tolist()
        data = b"".join(sp_vocab.token_bytes[i] for i in ids)
        # decode() strips one leading space and maps invalid UTF-8 to U+FFFD
        assert data.decode("utf-8", "replace").removeprefix(" ") == sp_tokenizer.decode(ids).removeprefix(" ")


def test_tekken_matches_tiktoken(tekken_vocab, tekken_encoding):
    enc, nspecial = tekken_encoding
    assert tekken_vocab.size == 131072 and all(b is None for b in tekken_vocab.token_bytes[:nspecial])
    for text in TEXTS:
        ids = [nspecial + r for r in enc.encode(text)]
        assert b"".join(tekken_vocab.token_bytes[i] for i in ids) == text.encode()
    rng = np.random.default_rng(2)
    for _ in range(300):
        ranks = rng.integers(0, enc.n_vocab, size=int(rng.integers(1, 10))).tolist()
        assert b"".join(tekken_vocab.token_bytes[nspecial + r] for r in ranks) == enc.decode_bytes(ranks)


def test_logits_width_padding_is_never_allowed(smol_tokenizer):
    vocab = fsm.Vocabulary.from_tokenizer(smol_tokenizer, vocab_size=49152 + 64)
    a = fsm.compile_regex(r"(.|\n)*", vocab)
    allowed = a.allowed_tokens(a.start)
    assert allowed.max() < 49152 and vocab.num_words == (49152 + 64 + 31) // 32
    specials = set(smol_tokenizer.all_special_ids) - set(vocab.eos_ids)
    assert not specials & set(allowed.tolist())
    assert set(vocab.eos_ids) <= set(allowed.tolist())  # the empty string matches


def test_vocab_size_smaller_than_tokenizer_is_an_error(smol_tokenizer):
    with pytest.raises(ValueError, match="smaller"):
        fsm.Vocabulary.from_tokenizer(smol_tokenizer, vocab_size=100)


def test_many_added_tokens(smol_tokenizer, smol_vocab):
    """A thousand plain added tokens are their literal text, two hundred special ones
    have no bytes, and the base vocabulary is unchanged: against the tokenizer's own
    decoding of each id."""
    import copy
    tok = copy.deepcopy(smol_tokenizer)
    tok.add_tokens([f"<extra_{i}>" for i in range(1000)])
    tok.add_special_tokens({"additional_special_tokens": [f"<sp_{i}>" for i in range(200)]})
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    base = len(smol_tokenizer)
    assert len(vocab.token_bytes) == base + 1200
    assert vocab.token_bytes[:base] == smol_vocab.token_bytes
    special = set(tok.all_special_ids)
    for i in range(base, base + 1200):
        if i in special:
            assert vocab.token_bytes[i] is None
        else:
            assert vocab.token_bytes[i] == tok.decode([i]).encode()
    assert sum(b is None for b in vocab.token_bytes[base:]) == 200


def _trie_by_prefix_sets(token_bytes):
    """The trie's levels the plain way (an oracle for TokenTrie.build): each level's
    distinct prefixes, sorted, their parents, and the first token id ending at each."""
    ids = [i for i, b in enumerate(token_bytes) if b]
    depth = max((len(token_bytes[i]) for i in ids), default=0)
    levels = [sorted({token_bytes[i][:j + 1] for i in ids if len(token_bytes[i]) > j}) for j in range(depth)]
    index = [{p: k for k, p in enumerate(level)} for level in levels]
    parents = [[index[j - 1][p[:-1]] if j else 0 for p in level] for j, level in enumerate(levels)]
    ends, dups = {}, []
    for i in ids:
        b = token_bytes[i]
        key = (len(b) - 1, index[len(b) - 1][b])
        if key in ends:
            dups.append((key, i))
        else:
            ends[key] = i
    return levels, parents, ends, dups


@pytest.mark.parametrize("name", ["smol", "sp", "tekken", "random"])
def test_trie_levels_match_prefix_sets(name, request):
    if name == "random":
        rng = np.random.default_rng(7)
        alphabet = [b"a", b"b", b"\x00", b"\xff", b"ab"]
        token_bytes = [None, b""] + [b"".join(rng.choice(alphabet, size=int(rng.integers(1, 6))).tolist())
                                     for _ in range(3000)]  # (many repeats: duplicates)
    else:
        token_bytes = request.getfixturevalue(f"{name}_vocab").token_bytes
    trie = fsm.Vocabulary(tuple(token_bytes), (), len(token_bytes)).trie
    levels, parents, ends, dups = _trie_by_prefix_sets(token_bytes)
    assert len(trie.byte) == len(levels)
    for j, level in enumerate(levels):
        assert trie.byte[j].tolist() == [p[-1] for p in level]
        assert trie.parent[j].tolist() == parents[j]
        assert trie.offset[j] == sum(map(len, levels[:j]))
        if j + 1 < len(levels):  # a node's children: the next level's nodes whose parent it is
            kids: dict[int, list[int]] = {}
            for k, q in enumerate(parents[j + 1]):
                kids.setdefault(q, []).append(k)
            for p in range(len(level)):
                c = kids.get(p, [])
                assert trie.child_end[j][p] - trie.child_start[j][p] == len(c)
                assert not c or (trie.child_start[j][p], trie.child_end[j][p] - 1) == (c[0], c[-1])
    owner = {trie.offset[j] + k: i for (j, k), i in ends.items()}
    assert {n: int(i) for n, i in enumerate(trie.token_of_node.tolist()) if i >= 0} == owner
    assert sorted(zip(trie.dup_nodes.tolist(), trie.dup_ids.tolist())) == \
        sorted((trie.offset[j] + k, i) for (j, k), i in dups)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(token_bytes), size=500).tolist():  # tokens are found where their bytes lead
        if token_bytes[i]:
            assert i in trie.tokens_under(token_bytes[i]).tolist()
