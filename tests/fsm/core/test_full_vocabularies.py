"""Every token of every full-size vocabulary we ship tests for, against the tokenizer's own
decoding (issue #54): SmolLM2's byte-level BPE (49k), mistral's SentencePiece with byte
fallback (32k) and tekken (131k, tiktoken's ranks). test_vocabulary.py checks samples and
sequences; here it is each token alone.

A single token's decoding is text: where a token's bytes are not whole UTF-8 characters
the tokenizer writes U+FFFD, so those compare as `bytes.decode("utf-8", "replace")`; their
exact bytes are pinned down by decoding them beside the tokens that complete them."""
from __future__ import annotations

import numpy as np
import pytest


def _by_id(tok, ids, anchor: list[int]) -> list[str]:
    return tok.batch_decode([anchor + [i] for i in ids], clean_up_tokenization_spaces=False)


def _whole(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _every_token(vocab, tok, strip_space: bool) -> list[int]:
    ids = [i for i, b in enumerate(vocab.token_bytes) if b is not None]
    # after an anchor token: a SentencePiece decoder strips the leading spaces of its first piece
    anchor = tok.encode("x", add_special_tokens=False)[-1:] if strip_space else []
    head = b"".join(vocab.token_bytes[a] for a in anchor)
    got = _by_id(tok, ids, anchor)
    bad = []
    for i, text in zip(ids, got):
        want = (head + vocab.token_bytes[i]).decode("utf-8", "replace")
        if strip_space:  # (and one leading space of the text)
            text, want = text.removeprefix(" "), want.removeprefix(" ")
        if text != want:
            bad.append((i, vocab.token_bytes[i], text))
    assert not bad, f"{len(bad)} tokens differ from the tokenizer's decoding, e.g. {bad[:5]}"
    specials = set(getattr(tok, "all_special_ids", ()))
    assert all(vocab.token_bytes[i] is None for i in specials)
    return [i for i in ids if not _whole(vocab.token_bytes[i])]


@pytest.mark.slow
def test_smollm2_every_token(smol_tokenizer, smol_vocab):
    assert len(smol_vocab.token_bytes) == len(smol_tokenizer) == 49152
    partial = _every_token(smol_vocab, smol_tokenizer, strip_space=False)
    assert partial  # (byte-level BPE has tokens that cut characters: they must be exercised)
    pieces = smol_tokenizer.get_vocab()
    byte_ids = {pieces[c]: b for c, b in _byte_pieces().items() if c in pieces}
    assert len(byte_ids) > 200
    for i, b in byte_ids.items():  # the single-byte tokens are exactly their bytes
        assert smol_vocab.token_bytes[i] == bytes([b])
    _pairs_decode(smol_vocab, smol_tokenizer, partial, strip_space=False)


@pytest.mark.slow
def test_sentencepiece_every_token(sp_tokenizer, sp_vocab):
    assert len(sp_vocab.token_bytes) == 32000
    partial = _every_token(sp_vocab, sp_tokenizer, strip_space=True)
    for b in range(256):  # byte fallback: <0xNN> is byte NN
        assert sp_vocab.token_bytes[sp_tokenizer.convert_tokens_to_ids(f"<0x{b:02X}>")] == bytes([b])
    _pairs_decode(sp_vocab, sp_tokenizer, partial, strip_space=True)


@pytest.mark.slow
def test_tekken_every_token(tekken_vocab, tekken_encoding):
    enc, nspecial = tekken_encoding
    assert len(tekken_vocab.token_bytes) == nspecial + enc.n_vocab == 131072
    assert tekken_vocab.token_bytes[:nspecial] == (None,) * nspecial
    got = enc.decode_bytes_batch([[r] for r in range(enc.n_vocab)])
    assert tekken_vocab.token_bytes[nspecial:] == tuple(got)


def _byte_pieces() -> dict[str, int]:
    """GPT-2's byte-to-character alphabet, as transformers' converter has it (not ours)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    return {c: b for b, c in bytes_to_unicode().items()}


def _pairs_decode(vocab, tok, partial: list[int], strip_space: bool) -> None:
    """Tokens that cut a character: decoded in sequences that make whole UTF-8 text (a
    token with a character's start, then tokens with its rest), the tokenizer's text must
    be their bytes' exactly, not only where U+FFFD would stand."""
    rng = np.random.default_rng(0)
    starts = [i for i in partial if _missing(vocab.token_bytes[i])]
    continuations = {}
    for i, b in enumerate(vocab.token_bytes):
        if b and 0x80 <= b[0] < 0xC0:
            continuations.setdefault(_leading_continuations(b), []).append(i)
    checked = 0
    for i in rng.permutation(starts)[:2000].tolist():
        need = _missing(vocab.token_bytes[i])
        options = [j for j in continuations.get(need, [])[:50] if _whole(vocab.token_bytes[i] + vocab.token_bytes[j])]
        if not options:
            continue
        j = options[int(rng.integers(len(options)))]
        text = tok.decode([i, j], clean_up_tokenization_spaces=False)
        want = (vocab.token_bytes[i] + vocab.token_bytes[j]).decode()
        if strip_space:
            text, want = text.removeprefix(" "), want.removeprefix(" ")
        assert text == want, (i, j, vocab.token_bytes[i], vocab.token_bytes[j], text)
        checked += 1
    assert checked >= min(100, len(starts) // 4), f"only {checked} pairs of {len(starts)} cut tokens checked"


def _missing(b: bytes) -> int:
    """How many continuation bytes the last character of b lacks (0: none cut)."""
    for back in range(1, min(4, len(b)) + 1):
        c = b[-back]
        if c < 0x80:
            return 0
        if c >= 0xC0:
            size = 2 if c < 0xE0 else 3 if c < 0xF0 else 4
            return max(0, size - back)
    return 0


def _leading_continuations(b: bytes) -> int:
    n = 0
    while n < len(b) and 0x80 <= b[n] < 0xC0:
        n += 1
    return n


# Llama-3 (128k, 256 reserved special tokens) and Qwen2 (152k) vocabularies: llama.cpp ships
# them, with texts and its own token ids for them, in the llama-cpp-python sdist:
#   pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/l && cd /tmp/l &&
#   tar xzf *.tar.gz --wildcards '*/models/ggml-vocab-llama-bpe.gguf*' '*/models/ggml-vocab-qwen2.gguf*'
#   LLAMA_CPP_MODELS=/tmp/l/llama_cpp_python-0.3.36/vendor/llama.cpp/models pytest --runslow ...
# (transformers reads the GGUF vocabulary with the `gguf` package; about 30 s each here).
@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama-bpe", "qwen2"])
def test_gguf_vocabularies_every_token(name):
    import os
    from pathlib import Path
    folder = Path(os.environ.get("LLAMA_CPP_MODELS", "/nonexistent"))
    if not (folder / f"ggml-vocab-{name}.gguf").exists():
        pytest.skip("set LLAMA_CPP_MODELS to llama.cpp's models/ folder (see above)")
    pytest.importorskip("gguf")
    from transformers import AutoTokenizer

    from structgen import fsm
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=f"ggml-vocab-{name}.gguf")
    vocab = fsm.Vocabulary.from_tokenizer(tok)
    assert len(vocab.token_bytes) == len(tok) > 128000
    _every_token(vocab, tok, strip_space=False)
    texts = (folder / f"ggml-vocab-{name}.gguf.inp").read_text().split("\n__ggml_vocab_test__\n")
    ids = (folder / f"ggml-vocab-{name}.gguf.out").read_text().split("\n")
    checked = 0
    for text, line in zip(texts, ids):  # llama.cpp's own tokenization, an independent oracle
        want = [int(x) for x in line.split()]
        if want:
            assert b"".join(vocab.token_bytes[i] for i in want) == text.encode(), text
            checked += 1
    assert checked > 20
    if name == "llama-bpe":  # the reserved special tokens are never text
        reserved = [i for t, i in tok.get_vocab().items() if t.startswith("<|reserved_special_token_")]
        assert len(reserved) >= 200 and all(vocab.token_bytes[i] is None for i in reserved)
