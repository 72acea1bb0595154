"""Fixed-size KV blocks with reference counts and prefix caching.

A block is `block_size` token slots in every layer's cache. A full block whose KV is
computed (or being computed this step) is registered under a chained hash (hash of the previous block's hash
and this block's tokens), so a later sequence whose prompt starts with the same
tokens reuses it instead of recomputing it. Freed blocks keep their hash until they
are handed out again (LRU order), so a shared system prompt survives between
batches while memory allows.

Beams (engine.beam_search) fork a sequence: the child shares every block of its parent
through the reference counts, and a shared block is copied only when one of them is
about to write into it (copy on write). Only a partly filled last block is ever written
again, so that is the only block a fork can copy; the copies are queued here and the
model runner makes them before the step's forward writes (`pop_copies`).
"""
from __future__ import annotations

from collections import OrderedDict

from .sequence import Sequence


def chain_hash(prev_hash: int | None, tokens) -> int:
    # Python's tuple hash is fast and, with the previous hash folded in, collisions
    # would need two equal 64-bit hashes; the token check in `lookup` guards anyway.
    return hash((prev_hash, tuple(tokens)))


class BlockManager:
    """Hands out KV blocks to sequences.

    >>> bm = BlockManager(num_blocks=4, block_size=2)
    >>> bm.num_free_blocks
    4
    """

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.ref_counts = [0] * num_blocks
        self.block_hash: list[int | None] = [None] * num_blocks
        self.block_tokens: list[tuple | None] = [None] * num_blocks
        self.hash_to_block: dict[int, int] = {}
        # Free blocks in eviction order (oldest first); values unused.
        self.free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        # (source, destination) block copies owed before the next forward (copy on write).
        self.pending_copies: list[tuple[int, int]] = []

    @property
    def num_free_blocks(self) -> int:
        return len(self.free)

    def blocks_needed(self, seq: Sequence, num_new_tokens: int) -> int:
        total = seq.num_computed_tokens + num_new_tokens
        need = -(-total // self.block_size)
        return max(0, need - len(seq.block_table)) + (self._shared_write_block(seq, num_new_tokens) is not None)

    def _shared_write_block(self, seq: Sequence, num_new_tokens: int) -> int | None:
        """Index in seq's block table of a block shared with another sequence that the
        next `num_new_tokens` tokens would write into (at most one: the partly filled last)."""
        i = seq.num_computed_tokens // self.block_size
        if num_new_tokens > 0 and i < len(seq.block_table) and self.ref_counts[seq.block_table[i]] > 1:
            return i
        return None

    # -- beams: fork and copy on write ------------------------------------------------
    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Give `child` (fresh, no blocks) all of `parent`'s blocks, shared."""
        assert not child.block_table
        for block in parent.block_table:
            self.ref_counts[block] += 1
        child.block_table = list(parent.block_table)
        child.block_hashes = list(parent.block_hashes)
        child.num_computed_tokens = parent.num_computed_tokens
        child.num_cached_tokens = parent.num_cached_tokens

    def pop_copies(self) -> list[tuple[int, int]]:
        """The (source, destination) block copies queued since the last call."""
        copies, self.pending_copies = self.pending_copies, []
        return copies

    # -- prefix cache -----------------------------------------------------------
    def match_prefix(self, seq: Sequence) -> None:
        """Attach cached blocks for the longest cached prefix of a fresh sequence.

        At least one token is always left to compute: the last position's logits
        are needed to sample from.
        """
        assert not seq.block_table and seq.num_computed_tokens == 0
        # A request that wants its prompt's logprobs computes the whole prompt: the cache
        # holds KV, not logits. (Its blocks are still published for others.)
        if not self.enable_prefix_caching or seq.prompt_logprobs is not None:
            return
        bs = self.block_size
        max_blocks = (seq.num_tokens - 1) // bs
        prev = None
        for i in range(max_blocks):
            tokens = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = chain_hash(prev, tokens)
            block = self.hash_to_block.get(h)
            if block is None or self.block_tokens[block] != tokens:
                break
            if self.ref_counts[block] == 0:
                del self.free[block]
            self.ref_counts[block] += 1
            seq.block_table.append(block)
            seq.block_hashes.append(h)
            prev = h
        seq.num_computed_tokens = seq.num_cached_tokens = len(seq.block_table) * bs
        if seq.num_preemptions == 0:
            seq.prefix_hit_tokens = seq.num_cached_tokens

    def register_full_blocks(self, seq: Sequence, num_tokens: int) -> None:
        """Hash and publish `seq`'s blocks that are full within its first `num_tokens` tokens.

        The scheduler calls this as soon as a chunk is scheduled, before its KV exists:
        a sequence admitted later in the same step may then reuse these blocks, because
        every layer writes the whole step's keys/values before any attention reads them.
        """
        if not self.enable_prefix_caching:
            return
        bs = self.block_size
        full = min(num_tokens, seq.num_tokens) // bs
        while len(seq.block_hashes) < full:
            i = len(seq.block_hashes)
            tokens = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = chain_hash(seq.block_hashes[-1] if seq.block_hashes else None, tokens)
            seq.block_hashes.append(h)
            block = seq.block_table[i]
            if h not in self.hash_to_block and self.block_hash[block] is None:
                self.block_hash[block] = h
                self.block_tokens[block] = tokens
                self.hash_to_block[h] = block

    def reset_prefix_cache(self) -> None:
        """Forget every cached prefix (after an aborted step its blocks may be unwritten)."""
        self.hash_to_block.clear()
        self.block_hash = [None] * self.num_blocks
        self.block_tokens = [None] * self.num_blocks

    # -- allocation -------------------------------------------------------------
    def allocate(self, seq: Sequence, num_new_tokens: int) -> bool:
        """Grow `seq`'s block table to hold `num_new_tokens` more tokens; False if out of blocks."""
        need = self.blocks_needed(seq, num_new_tokens)
        if need > len(self.free):
            return False
        shared = self._shared_write_block(seq, num_new_tokens)
        if shared is not None:                          # copy on write
            src, dst = seq.block_table[shared], self._take_free_block()
            self.ref_counts[src] -= 1                   # still >= 1: another sequence holds it
            seq.block_table[shared] = dst
            self.pending_copies.append((src, dst))
            need -= 1
        for _ in range(need):
            seq.block_table.append(self._take_free_block())
        return True

    def _take_free_block(self) -> int:
        block, _ = self.free.popitem(last=False)       # least recently freed first
        h = self.block_hash[block]
        if h is not None:                               # evict its cached prefix
            if self.hash_to_block.get(h) == block:
                del self.hash_to_block[h]
            self.block_hash[block] = None
            self.block_tokens[block] = None
        self.ref_counts[block] = 1
        return block

    def free_sequence(self, seq: Sequence) -> None:
        """Release all of `seq`'s blocks (finish or preemption)."""
        # Free in reverse so a sequence's tail blocks are evicted before its head:
        # the head (e.g. a shared system prompt) is the part most likely reused.
        for block in reversed(seq.block_table):
            self._release(block)
        seq.block_table = []
        seq.block_hashes = []
        seq.num_computed_tokens = 0
        seq.num_cached_tokens = 0

    def free_tail(self, seq: Sequence, num_tokens: int) -> None:
        """Release `seq`'s blocks past those holding its first `num_tokens` tokens.

        Speculative decoding allocates slots for drafts; those past the accepted ones go
        back. Such a block never held a verified token (blocks are hashed only over a
        sequence's own tokens, never over drafts), so it is unhashed and reused first.
        """
        keep = -(-num_tokens // self.block_size)
        assert keep >= len(seq.block_hashes)
        for block in reversed(seq.block_table[keep:]):
            self._release(block)
        del seq.block_table[keep:]

    def _release(self, block: int) -> None:
        self.ref_counts[block] -= 1
        assert self.ref_counts[block] >= 0
        if self.ref_counts[block] == 0:
            self.free[block] = None
            if self.block_hash[block] is None:
                self.free.move_to_end(block, last=False)   # unhashed: reuse first
