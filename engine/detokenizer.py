"""Incremental detokenisation that never emits half a character.

Byte-level BPE and byte-fallback tokens can split one UTF-8 character across
tokens; decoding such a prefix yields U+FFFD. Following the prefix/read offsets
scheme (TGI, vLLM): decode a short window of recent tokens twice, with and without
the newest ones, and emit the difference only once it no longer ends in U+FFFD.
Decoding a window (rather than one token) keeps tokenizer-specific spacing rules
(SentencePiece's leading "▁") right.
"""
from __future__ import annotations

from .sequence import Sequence

# Tokens kept before the read offset, for context-dependent decoders.
_WINDOW = 5


def start(seq: Sequence) -> None:
    """Place the offsets at the end of the prompt."""
    seq.read_offset = seq.num_prompt_tokens
    seq.prefix_offset = max(seq.num_prompt_tokens - _WINDOW, 0)
    seq.text = ""


def decode_next(tokenizer, seq: Sequence, skip_special_tokens: bool = True) -> str:
    """Advance over newly appended tokens; return the new text (may be "").

    >>> start(seq); seq.token_ids.append(tok_id)        # doctest: +SKIP
    >>> decode_next(tokenizer, seq)                      # doctest: +SKIP
    'Hello'
    """
    delta = _new_text(tokenizer, seq.token_ids, seq.prefix_offset, seq.read_offset, skip_special_tokens)
    if delta:
        seq.prefix_offset = seq.read_offset
        seq.read_offset = len(seq.token_ids)
        seq.text += delta
    return delta


def peek_next(tokenizer, seq: Sequence, token: int, skip_special_tokens: bool = True) -> str:
    """What `decode_next` would return were `token` appended to `seq`, which stays as it
    is (beam search weighs candidates before one becomes a beam)."""
    ids = seq.token_ids[seq.prefix_offset:] + [token]
    return _new_text(tokenizer, ids, 0, seq.read_offset - seq.prefix_offset, skip_special_tokens)


def _new_text(tokenizer, ids: list[int], prefix_offset: int, read_offset: int, skip_special_tokens: bool) -> str:
    prefix = tokenizer.decode(ids[prefix_offset:read_offset], skip_special_tokens=skip_special_tokens)
    full = tokenizer.decode(ids[prefix_offset:], skip_special_tokens=skip_special_tokens)
    if len(full) > len(prefix) and not full.endswith("\ufffd"):
        return full[len(prefix):]
    return ""


def cut_at_stop(text: str, num_new: int, stop: list[str], include: bool) -> tuple[str, str] | None:
    """Where a stop string ends within the last `num_new` characters of `text` (the text
    before them held none): the text up to its first occurrence (through it with
    `include`) and that stop string; None where there is none.

    >>> cut_at_stop("1, 2, 3", 3, ["2", ", 3"], include=False)
    ('1, ', '2')
    """
    longest = max(len(s) for s in stop)
    start = max(0, len(text) - num_new - longest + 1)
    hits = [(text.find(s, start), s) for s in stop]
    hits = [(i, s) for i, s in hits if i >= 0]
    if not hits:
        return None
    i, s = min(hits)
    return (text[:i + len(s)] if include else text[:i]), s


def flush(tokenizer, seq: Sequence, skip_special_tokens: bool = True) -> str:
    """At the end of a sequence, emit whatever is held back (even a partial character)."""
    prefix = tokenizer.decode(seq.token_ids[seq.prefix_offset:seq.read_offset],
                              skip_special_tokens=skip_special_tokens)
    full = tokenizer.decode(seq.token_ids[seq.prefix_offset:], skip_special_tokens=skip_special_tokens)
    delta = full[len(prefix):] if len(full) > len(prefix) else ""
    seq.prefix_offset = seq.read_offset = len(seq.token_ids)
    seq.text += delta
    return delta

