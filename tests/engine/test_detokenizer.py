"""Incremental detokenisation never emits half a character (tokenizer only, no model)."""
from __future__ import annotations

import pytest

from structgen.engine import detokenizer
from structgen.engine.sampling_params import SamplingParams
from structgen.engine.sequence import Sequence

TEXTS = ["你好，世界！今天天气很好。", "Emoji: 🙂🚀👩‍👩‍👧 done", "naïve café — ünïcödé",
         "mixed 中文 and English 🎉 and ελληνικά"]


@pytest.fixture(scope="module")
def tokenizer(smol_folder):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(smol_folder)


def stream(tokenizer, prompt_ids, out_ids):
    seq = Sequence(0, 0, 0, list(prompt_ids), len(prompt_ids), SamplingParams())
    detokenizer.start(seq)
    deltas = []
    for t in out_ids:
        seq.token_ids.append(t)
        deltas.append(detokenizer.decode_next(tokenizer, seq))
    deltas.append(detokenizer.flush(tokenizer, seq))
    return deltas, seq.text


@pytest.mark.parametrize("text", TEXTS)
def test_stream_has_no_partial_characters(tokenizer, text):
    prompt = tokenizer.encode("Say:", add_special_tokens=False)
    ids = tokenizer.encode(text, add_special_tokens=False)
    deltas, full = stream(tokenizer, prompt, ids)
    assert all("\ufffd" not in d for d in deltas)
    assert "".join(deltas) == full == tokenizer.decode(ids)


def test_the_test_splits_characters(tokenizer):
    # Byte-level BPE must cut at least one of these characters across tokens, or the
    # test above would prove nothing.
    ids = tokenizer.encode("".join(TEXTS), add_special_tokens=False)
    assert any("\ufffd" in tokenizer.decode([t]) for t in ids)


def test_special_tokens_are_skipped(tokenizer):
    ids = tokenizer.encode("hi 🙂", add_special_tokens=False) + [tokenizer.eos_token_id]
    deltas, full = stream(tokenizer, [], ids)
    assert full == "hi 🙂"
