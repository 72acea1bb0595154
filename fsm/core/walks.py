"""Walks of the vocabulary through a LazyDFA: the trie walk (every token, sharing
prefixes) and the token walk (some tokens, byte by byte). Every new state's mask runs
one of them, or both.

Each has two implementations of one signature: the C walks of `walks_c.c` (built with
the package where a C compiler is at hand), and the numpy ones below, which run
otherwise and serve the tests as the C walks' oracle. The C walks never compute a DFA
cell: they stop at the UNKNOWN ones and report them, `fill_cells` computes those here,
and the walk resumes where it stopped."""
from __future__ import annotations

import os

import numpy as np

from .dfa import DEAD, UNKNOWN, LazyDFA
from .vocabulary import PREPARERS, TokenColumns, TokenTrie

try:
    from . import walks_c as native
except ImportError:  # (no compiler at install: the numpy walks)
    native = None
if os.environ.get("STRUCTGEN_WALKS") == "numpy":  # (the numpy walks on request: to compare, or to rule C out)
    native = None


def token_run(cols: TokenColumns, token_bytes) -> tuple:
    """The bytes of the tokens at each TokenColumns position, end to end, for the C walk:
    (data uint8, start int64 per position, length int32 per position)."""
    def make():
        order = cols.order.tolist()
        lengths = np.fromiter((len(token_bytes[i]) for i in order), dtype=np.int32, count=len(order))
        start = np.zeros(len(order), dtype=np.int64)
        np.cumsum(lengths[:-1], out=start[1:])
        return np.frombuffer(b"".join(token_bytes[i] for i in order), dtype=np.uint8), start, lengths
    return cols.memo(("token run",), make)


def prepare_walks(vocab) -> None:
    """Vocabulary.prepare: the C walks' tables, built at load."""
    if native is not None:
        _ = vocab.trie.dfs
        token_run(vocab.columns, vocab.token_bytes)


PREPARERS.append(prepare_walks)


def fill_cells(dfa: LazyDFA, states: np.ndarray, bytes_: np.ndarray) -> None:
    """Compute the cells (states[i], bytes_[i]) that are UNKNOWN: the cells met, by
    state, where the DFA is sparse; else the whole rows."""
    if dfa.sparse:
        cells: dict = {}
        for k in set((states.astype(np.intp) * 256 + bytes_).tolist()):
            cells.setdefault(k >> 8, []).append(k & 255)
        for u, cs in cells.items():
            dfa.fill(u, cs)
    else:
        for u in set(states.tolist()):  # (np.unique imports numpy.ma on first use)
            dfa.expand(u)


_NO_FLAGS = np.zeros(1, dtype=np.uint8)  # (a walk for its nodes only: every token to the scratch entry)


def native_walk(dfa: LazyDFA, trie: TokenTrie, seeds, seed_states, flags: np.ndarray,
                nodes: bool) -> tuple | None:
    """The C walk of the subtrees below the flat nodes `seeds` (None: the whole trie)
    from states `seed_states`: sets flags[t] = 1 (uint8, an entry per token id and one
    more) for each live token t, and with `nodes`, returns the live nodes' (flat ids,
    states). Each UNKNOWN cell met is computed here and the walk resumes at its node."""
    byte, depth, size, token, flat, pos_of = trie.dfs
    if not len(seeds):
        return (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)) if nodes else None
    stack = np.zeros(len(trie.byte) + 2, dtype=np.int32)
    out_n = out_s = None
    if nodes:  # (room for every node below every seed: seeds may repeat)
        room = trie.num_nodes if seeds[0] is None else int(size.take(pos_of.take(seeds)).sum())
        out_n, out_s = np.empty(room, dtype=np.int32), np.empty(room, dtype=np.int32)
    n_out = 0
    for seed, st in zip(seeds, seed_states):
        if seed is None:
            p, end, d = 0, len(byte), 0
        else:
            q = int(pos_of[seed])
            p, end, d = q + 1, q + int(size[q]), int(depth[q]) + 1
        stack[d] = st
        while True:
            p, n_out = native.trie(dfa.table, byte, depth, size, token, flat, stack, p, end, flags, out_n, out_s,
                                   n_out)
            if p == end:
                break
            cell = stack[depth[p]:depth[p] + 1], byte[p:p + 1]  # the UNKNOWN cell that stopped it
            fill_cells(dfa, *cell)
            _computed(dfa, *cell)
    if len(flags) > 1 and len(trie.dup_ids):  # tokens with another's bytes live with it
        flags[trie.dup_ids] = flags.take(trie.token_of_node.take(trie.dup_nodes))
    return (out_n[:n_out].copy(), out_s[:n_out].copy()) if nodes else None


def _computed(dfa: LazyDFA, states, bytes_) -> None:
    """Raise unless the cells the C walk stopped at are computed now: the walk would
    stop there again, for ever."""
    if (dfa.table.reshape(-1).take(states.astype(np.intp) * 256 + bytes_) == UNKNOWN).any():
        raise RuntimeError("a DFA cell the walk needs was not computed (LazyDFA.fill)")


def native_tokens(dfa: LazyDFA, cols: TokenColumns, token_bytes, pos: np.ndarray, st: np.ndarray,
                  j: int) -> tuple:
    """walk_columns by the C walk: (positions alive at their end, their states)."""
    data, start, length = token_run(cols, token_bytes)
    starts = start.take(pos)
    lengths = length.take(pos)
    states = st.astype(np.int32)  # (a copy: walked in place)
    at = np.full(len(pos), j, dtype=np.int32)
    stuck = np.empty(len(pos), dtype=np.int64)
    k = native.tokens(dfa.table, data, starts, lengths, states, at, stuck)
    while k:
        idx = stuck[:k].copy()
        u, b = states.take(idx), data.take(starts.take(idx) + at.take(idx)).astype(np.intp)
        fill_cells(dfa, u, b)
        _computed(dfa, u, b)
        sub_s, sub_at = states.take(idx), at.take(idx)
        k = native.tokens(dfa.table, data, starts.take(idx), lengths.take(idx), sub_s, sub_at, stuck)
        stuck[:k] = idx.take(stuck[:k])
        states[idx], at[idx] = sub_s, sub_at
    live = np.flatnonzero(states)
    return pos.take(live), states.take(live)


# Below this many trie nodes a subtree is walked node by node in Python: numpy's fixed
# cost per level outweighs Python's per node there (the trie's deep levels hold a few
# long tokens).
SMALL_SUBTREE = 256
SMALL_SUBTREE_REMEMBERED = 512  # the walk of each is kept: worth more levels in Python


class TrieWalker:
    """Walks of the vocabulary trie through a LazyDFA: the live nodes and their states.

    Levels are computed whole with numpy while most of a level lives (a dead parent is
    state 0, whose row is all 0: no compaction needed), then only the children of live
    nodes, and small subtrees (the deep levels, or few live nodes) in Python: work
    scales with the live nodes. `remember`: small subtrees are kept per (state, level,
    node). A grammar's lexer DFA meets the same deep subtrees (long runs of spaces,
    dashes, string content) from many positions; a regex's states are walked once
    each, so there they are walked in one batch and not kept."""

    def __init__(self, dfa: LazyDFA, trie, remember: bool):
        self.dfa, self.trie, self.remember = dfa, trie, remember
        self.small = SMALL_SUBTREE_REMEMBERED if remember else SMALL_SUBTREE
        self._small: dict = {}  # (state, level, node) -> (flat nodes, states) below it

    def walk(self, s: int) -> tuple:
        """(flat trie nodes, their states) of every live node reached from state s."""
        dfa, trie = self.dfa, self.trie
        nodes, states = [], []
        if not trie.num_nodes or s == DEAD:
            return _joined(nodes, states)
        if native is not None:
            return native_walk(dfa, trie, [None], [s], _NO_FLAGS, True)
        dfa.expand(s)
        cur = dfa.table[s].take(trie.byte[0])
        j, depth = 0, len(trie.byte)
        while True:  # whole levels
            live = np.flatnonzero(cur)
            if not live.size:
                return _joined(nodes, states)
            st = cur.take(live)
            nodes.append(live + trie.offset[j])
            states.append(st)
            if j + 1 == depth:
                return _joined(nodes, states)
            if live.size * 8 < len(cur) or trie.below[j + 1] <= self.small:
                break
            j += 1
            cur = step_states(dfa, cur.take(trie.parent[j]), trie.byte[j])
        self.descend(j, live, st, nodes, states)
        return _joined(nodes, states)

    def walk_words(self, s: int, num_words: int) -> np.ndarray | None:
        """The packed bitmask of the tokens live from state s, by the C walk (which flags
        them as it goes); None without it (walk() then tokens_at)."""
        if native is None:
            return None
        flags = np.zeros(32 * num_words + 1, dtype=np.uint8)  # (+1: the C walk's scratch entry)
        if self.trie.num_nodes and s != DEAD:
            native_walk(self.dfa, self.trie, [None], [s], flags, False)
        return np.packbits(flags[:-1], bitorder="little").view(np.uint32)

    def descend(self, j: int, live: np.ndarray, st: np.ndarray, nodes: list, states: list) -> None:
        """Append to `nodes` (flat) and `states` the live descendants of the nodes `live`
        of level j, which are in states `st`."""
        trie = self.trie
        if native is not None:
            n, s = native_walk(self.dfa, trie, (live + trie.offset[j]).tolist(), st.tolist(), _NO_FLAGS, True)
            if len(n):
                nodes.append(n)
                states.append(s)
            return
        while j + 1 < len(trie.byte):
            if int(trie.descendants[j].take(live).sum()) <= self.small:
                self._walk_small(j, live.tolist(), st.tolist(), nodes, states)
                return
            starts = trie.child_start[j].take(live)
            sizes = trie.child_end[j].take(live) - starts
            n = int(sizes.sum())
            if n == 0:
                return
            children = np.repeat(starts - (np.cumsum(sizes) - sizes), sizes) + np.arange(n)
            j += 1
            nxt = step_states(self.dfa, np.repeat(st, sizes), trie.byte[j].take(children))
            keep = np.flatnonzero(nxt)
            if not keep.size:
                return
            live, st = children.take(keep), nxt.take(keep)
            nodes.append(live + trie.offset[j])
            states.append(st)

    def _walk_small(self, level: int, live: list, sts: list, nodes: list, states: list) -> None:
        if not self.remember:
            n, s = walk_small(self.trie, self.dfa, level, live, sts)
            nodes.append(np.array(n, dtype=np.intp))
            states.append(np.array(s, dtype=np.int32))
            return
        memo = self._small
        for k, st in zip(live, sts):
            r = memo.get((st, level, k))
            if r is None:
                n, s = walk_small(self.trie, self.dfa, level, [k], [st])
                r = memo[(st, level, k)] = (np.array(n, dtype=np.intp), np.array(s, dtype=np.int32))
            if len(r[0]):
                nodes.append(r[0])
                states.append(r[1])


def _joined(nodes: list, states: list) -> tuple:
    if not nodes:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int32)
    return np.concatenate(nodes), np.concatenate(states).astype(np.int32, copy=False)


def step_states(dfa: LazyDFA, st: np.ndarray, col: np.ndarray) -> np.ndarray:
    """One byte per walker: table[st, col], expanding the rows met for the first time."""
    idx = st * np.intp(256)  # intp indices: take() converts anything else first
    idx += col
    nxt = dfa.table.reshape(-1).take(idx)
    if dfa.unexpanded and nxt.size and nxt.min() < 0:  # UNKNOWN: rows not expanded yet
        missing = nxt < 0
        fill_cells(dfa, st[missing], col[missing])
        nxt[missing] = dfa.table.reshape(-1).take(idx[missing])
    return nxt


def walk_from(dfa: LazyDFA, s: int | None, cols, token_bytes, pos: np.ndarray) -> np.ndarray:
    """The positions among `pos` (ascending) of TokenColumns `cols` (`token_bytes`: the
    bytes of the tokens they order) whose tokens live from state s (None: the start)."""
    s = dfa.start if s is None else s
    dfa.expand(s)
    first = dfa.table[s].take(cols.first.take(pos))
    keep = np.flatnonzero(first)
    return walk_columns(dfa, cols, token_bytes, pos.take(keep), first.take(keep))[0]


def walk_columns(dfa: LazyDFA, cols, token_bytes, pos: np.ndarray, st: np.ndarray,
                 j: int = 1) -> tuple:
    """The tokens at TokenColumns positions `pos` (ascending), in DFA states `st` after
    their first `j` bytes, walked on byte column by byte column: (the positions of those
    alive at their end, their final states). The last 32 tokens or fewer (the longest)
    finish one at a time in Python, where a numpy column costs more than their bytes."""
    if native is not None:
        return native_tokens(dfa, cols, token_bytes, pos, st, j)
    done_pos, done_st = [], []
    while len(pos):
        n = int(np.searchsorted(pos, cols.count[j])) if j < len(cols.count) else 0
        done_pos.append(pos[n:])  # tokens of j bytes end here, alive
        done_st.append(st[n:])
        if not n:
            break
        pos, st = pos[:n], st[:n]
        if n <= 32:
            _finish_columns(dfa, cols, token_bytes, j, pos.tolist(), st.tolist(), done_pos, done_st)
            break
        st = step_states(dfa, st, cols.column[j].take(pos))
        live = np.flatnonzero(st)
        pos, st = pos.take(live), st.take(live)
        j += 1
    if not done_pos:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int32)
    return np.concatenate(done_pos), np.concatenate(done_st)


def _finish_columns(dfa: LazyDFA, cols, token_bytes, j: int, pos: list, sts: list,
                    done_pos: list, done_st: list) -> None:
    """walk_columns' tail: the tokens at positions `pos` (in states `sts`) from byte j
    on, one token at a time."""
    flat, order = dfa.table.reshape(-1), cols.order
    out_p, out_s = [], []
    for p, st in zip(pos, sts):
        for c in token_bytes[order[p]][j:]:
            nxt = flat.item(st * 256 + c)
            if nxt == UNKNOWN:
                dfa.fill(st, (c,))
                flat = dfa.table.reshape(-1)
                nxt = flat.item(st * 256 + c)
            st = nxt
            if not st:
                break
        if st:
            out_p.append(p)
            out_s.append(st)
    done_pos.append(np.array(out_p, dtype=np.intp))
    done_st.append(np.array(out_s, dtype=np.int32))


def walk_small(trie, dfa: LazyDFA, level: int, nodes: list, states: list) -> tuple[list, list]:
    """The live descendants of a few trie nodes of `level` (given with their DFA
    states), with their states, walked one by one: deep levels hold few nodes, where
    numpy's per-call cost dominates."""
    byte, cstart, cend = trie.lists
    offset, flat = trie.offset, dfa.table.reshape(-1)
    out_n, out_s, todo = [], [], [(level, k, st) for k, st in zip(nodes, states)]
    while todo:
        j, k, st = todo.pop()
        if j + 1 >= len(byte):
            continue
        bj, base = byte[j + 1], st * 256
        for c in range(cstart[j][k], cend[j][k]):
            nxt = flat.item(base + bj[c])
            if nxt < 0:  # UNKNOWN: the cell is not computed yet
                dfa.fill(st, (bj[c],))
                flat = dfa.table.reshape(-1)
                nxt = flat.item(base + bj[c])
            if nxt:
                out_n.append(offset[j + 1] + c)
                out_s.append(nxt)
                todo.append((j + 1, c, nxt))
    return out_n, out_s
