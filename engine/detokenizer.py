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
    ids = seq.token_ids
    prefix = tokenizer.decode(ids[seq.prefix_offset:seq.read_offset],
                              skip_special_tokens=skip_special_tokens)
    full = tokenizer.decode(ids[seq.prefix_offset:], skip_special_tokens=skip_special_tokens)
    if len(full) > len(prefix) and not full.endswith("\ufffd"):
        delta = full[len(prefix):]
        seq.prefix_offset = seq.read_offset
        seq.read_offset = len(ids)
        seq.text += delta
        return delta
    return ""


def flush(tokenizer, seq: Sequence, skip_special_tokens: bool = True) -> str:
    """At the end of a sequence, emit whatever is held back (even a partial character)."""
    prefix = tokenizer.decode(seq.token_ids[seq.prefix_offset:seq.read_offset],
                              skip_special_tokens=skip_special_tokens)
    full = tokenizer.decode(seq.token_ids[seq.prefix_offset:], skip_special_tokens=skip_special_tokens)
    delta = full[len(prefix):] if len(full) > len(prefix) else ""
    seq.prefix_offset = seq.read_offset = len(seq.token_ids)
    seq.text += delta
    return delta

