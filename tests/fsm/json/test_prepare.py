"""Vocabulary.prepare() builds what every JSON constraint's first masks share
(fsm/json/prepare.py): the vocabulary's tables of a string's tokens and of keys, and of
the common formats; and what regexes share (fsm/regex/prepare.py): the tokens of common
character classes. Masks read from them equal token-by-token walks, and those of a
vocabulary that built nothing ahead, on SmolLM2's vocabulary and tekken's 131k."""
from __future__ import annotations

import pytest
from oracles import live_tokens_brute_force

from structgen import fsm
from structgen.fsm.json.schema import build_automaton


@pytest.mark.parametrize("vocab_name", ["smol_vocab", "tekken_vocab"])
def test_prepared_tables_keep_masks_exact(vocab_name, request):
    vocab = request.getfixturevalue(vocab_name)
    assert any(k[0] == "split" for k in vocab.columns.walks) and "KeyTokens" in vocab._cache
    bare = fsm.Vocabulary(vocab.token_bytes, vocab.eos_ids, vocab.size)  # (nothing built ahead)
    schema = {"type": "object", "properties": {"sku": {"type": "string"}, "q": {"type": "integer"},
                                               "t": {"type": "string", "maxLength": 5},
                                               "e": {"type": "string", "format": "email"}}}
    for prefix in ['{"sku":"', '{"sku":"a\\"', '{"q":', '{"t":"ab', '{"e":"ada.l', '{"e":"ada@exa']:
        masks = []
        for v in (vocab, bare):
            a = build_automaton(schema, v)
            s = a.dfa.walk(a.start, prefix.encode())
            masks.append(set(a.allowed_tokens(s).tolist()) - set(v.eos_ids))
        assert masks[0] == masks[1] == live_tokens_brute_force(a, s), prefix


@pytest.mark.parametrize("vocab_name", ["smol_vocab", "tekken_vocab"])
def test_prepared_class_tables_keep_regex_masks_exact(vocab_name, request):
    """The regex preparer's class tables (Unicode \\d and \\w: their non-ASCII tokens
    walked) give the masks of a vocabulary that built nothing ahead, and of token walks."""
    from structgen.fsm.core.automaton import TokenAutomaton
    from structgen.fsm.core.terms import TermBuilder
    from structgen.fsm.regex.syntax import regex_to_term
    vocab = request.getfixturevalue(vocab_name)
    assert any(k[0] == "class tokens" for k in vocab.columns.walks)
    bare = fsm.Vocabulary(vocab.token_bytes, vocab.eos_ids, vocab.size)
    for pattern, prefix in [(r"\(\d{3}\) \d{3}", b"("), (r"\w+@[a-z]+", b""), (r"[0-9a-fA-F]{8}-\s*x", b"ab")]:
        masks = []
        for v in (vocab, bare):
            tb = TermBuilder()
            a = TokenAutomaton.from_term(tb, regex_to_term(tb, pattern), v)
            s = a.dfa.walk(a.start, prefix)
            masks.append(set(a.allowed_tokens(s).tolist()) - set(v.eos_ids))
        assert masks[0] == masks[1] == live_tokens_brute_force(a, s), pattern
