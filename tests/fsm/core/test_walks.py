"""The vocabulary walks (fsm/core/walks.py): the C walks of walks_c.c against tokens
stepped one at a time through LazyDFA.walk, and the masks they give against the numpy
walks' masks, on fresh automata whose DFA cells are computed as the walks meet them."""
from __future__ import annotations

import numpy as np
import pytest
from oracles import live_tokens_brute_force

from structgen.fsm.core import walks
from structgen.fsm.core.automaton import TokenAutomaton
from structgen.fsm.core.terms import TermBuilder
from structgen.fsm.regex.syntax import regex_to_term

needs_c = pytest.mark.skipif(walks.native is None, reason="the C walks were not built (no compiler at install)")

PATTERNS = [r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}", r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
            r"(foo|bar|baz)+ [a-z ]{0,12}", r"\(\d{3}\) \d{3}-\d{4}", r"[^\n]{0,40}\n", r"(\w+,)*\w+"]


def _fresh(pattern: str, vocab) -> TokenAutomaton:
    """A new automaton of the pattern (compile_regex's are cached per vocabulary)."""
    tb = TermBuilder()
    return TokenAutomaton.from_term(tb, regex_to_term(tb, pattern), vocab)


def _paths(a, rng, steps=12) -> list:
    """Token sequences of a few random walks through automaton a (its masks computed on
    the way), each with its prefixes: the states to compare are where they lead."""
    out = [()]
    for _ in range(4):
        s, path = a.dfa.start, ()
        for _ in range(steps):
            allowed = [t for t in a.allowed_tokens(s).tolist() if t not in a.vocab.eos_ids]
            if not allowed:
                break
            t = int(rng.choice(allowed))
            s, path = a.next_state(s, t), path + (t,)
            out.append(path)
    return out


def _state(a, path) -> int:
    s = a.dfa.start
    for t in path:
        s = a.next_state(s, t)
    return s


@needs_c
@pytest.mark.parametrize("pattern", PATTERNS)
def test_trie_walk_equals_tokens_stepped_one_by_one(smol_vocab, pattern):
    """Every live token (and its state) of a C trie walk from a state equals LazyDFA.walk
    of its bytes; the walks begin on a fresh DFA, so they stop at UNKNOWN cells and resume."""
    paths = _paths(_fresh(pattern, smol_vocab), np.random.default_rng(1))
    a = _fresh(pattern, smol_vocab)  # (no mask computed yet)
    trie = smol_vocab.trie
    for path in paths[:8]:
        s = _state(a, path)
        nodes, states = a.walker.walk(s)
        ends = trie.token_of_node.take(nodes)
        got = {int(t): int(st) for t, st in zip(ends, states) if t >= 0}
        want = {i: a.dfa.walk(s, b) for i, b in enumerate(smol_vocab.token_bytes) if b}
        assert got == {i: st for i, st in want.items() if st}
        words = a.walker.walk_words(s, smol_vocab.num_words)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")
        assert set(np.flatnonzero(bits).tolist()) == live_tokens_brute_force(a, s)


@needs_c
@pytest.mark.parametrize("pattern", PATTERNS[:3])
def test_token_walk_equals_tokens_stepped_one_by_one(smol_vocab, pattern):
    """walk_columns by C (positions, j bytes already walked) equals LazyDFA.walk of each
    token's remaining bytes."""
    a = _fresh(pattern, smol_vocab)
    cols, data = smol_vocab.columns, smol_vocab.token_bytes
    rng = np.random.default_rng(2)
    pos = np.sort(rng.choice(cols.count[1], 3000, replace=False))  # tokens of 2+ bytes
    for j in (1, 2):
        pos_j = pos[pos < cols.count[j - 1]]
        first = np.array([a.dfa.walk(a.dfa.start, data[cols.order[p]][:j]) for p in pos_j], dtype=np.int32)
        keep = first != 0
        alive, states = walks.walk_columns(a.dfa, cols, data, pos_j[keep], first[keep], j)
        want = {int(p): a.dfa.walk(a.dfa.start, data[cols.order[p]]) for p in pos_j[keep]}
        assert dict(zip(alive.tolist(), states.tolist())) == {p: st for p, st in want.items() if st}


@pytest.mark.parametrize("pattern", PATTERNS)
def test_masks_equal_the_numpy_walks(smol_vocab, pattern, monkeypatch):
    """A pattern's masks along random walks, computed with the C walks (where built), equal
    those of a second compile that runs the numpy walks and the paths they choose."""
    a = _fresh(pattern, smol_vocab)
    paths = _paths(a, np.random.default_rng(3))
    monkeypatch.setattr(walks, "native", None)
    b = _fresh(pattern, smol_vocab)
    for path in paths:
        assert np.array_equal(a.mask(_state(a, path)), b.mask(_state(b, path))), path


@needs_c
def test_bad_buffers_raise_not_crash(smol_vocab):
    """The C walks check their buffers' sizes and ranges: a mistake is an exception."""
    a = _fresh("[a-z]+", smol_vocab)
    byte, depth, size, token, flat, _ = smol_vocab.trie.dfs
    stack, flags = np.zeros(len(smol_vocab.trie.byte) + 2, np.int32), np.zeros(1, np.uint8)
    walk = lambda *over: walks.native.trie(*[over[i] if i < len(over) and over[i] is not None else x  # noqa: E731
                                             for i, x in enumerate([a.dfa.table, byte, depth, size, token, flat, stack,
                                                                    0, len(byte), flags, None, None, 0])])
    stack[0] = a.dfa.start
    p = walk()[0]  # (no node wanted): it stops at the first UNKNOWN cell
    assert a.dfa.table[stack[depth[p]], byte[p]] == -1
    with pytest.raises(ValueError, match="inconsistent"):
        walk(None, byte[:-1])
    with pytest.raises(ValueError, match="inconsistent"):  # too small a node buffer
        walk(*[None] * 10, np.zeros(5, np.int32), np.zeros(5, np.int32))
    stack[0] = 10 ** 6  # a state past the table
    with pytest.raises(IndexError, match="out of range"):
        walk()
    with pytest.raises(TypeError, match="items of 4 bytes"):
        walk(a.dfa.table.astype(np.int64))
    data, start, length = walks.token_run(smol_vocab.columns, smol_vocab.token_bytes)
    st, at, stuck = np.ones(2, np.int32), np.zeros(2, np.int32), np.zeros(2, np.int64)
    with pytest.raises(IndexError, match="out of range"):
        walks.native.tokens(a.dfa.table, data, np.array([0, len(data)], np.int64), np.array([1, 5], np.int32),
                            st, at, stuck)


@needs_c
def test_a_cell_left_unknown_raises_not_hangs(smol_vocab, monkeypatch):
    """Were LazyDFA to leave the cell a C walk stopped at UNKNOWN, the walk would stop
    there again for ever: it raises instead."""
    a = _fresh("[a-z]+@[a-z]+", smol_vocab)
    monkeypatch.setattr(a.dfa, "expand", lambda s: None)
    monkeypatch.setattr(a.dfa, "fill", lambda s, cells: None)
    with pytest.raises(RuntimeError, match="not computed"):
        a.walker.walk_words(a.dfa.start, smol_vocab.num_words)
    cols = smol_vocab.columns
    pos = np.arange(cols.count[1], dtype=np.intp)
    with pytest.raises(RuntimeError, match="not computed"):
        walks.walk_columns(a.dfa, cols, smol_vocab.token_bytes, pos, np.full(len(pos), a.dfa.start, np.int32), 1)
