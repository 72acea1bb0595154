"""Continuous batching: which sequences run in the next forward, and how many tokens each.

Every step has a token budget (`max_num_batched_tokens`). Running sequences go first
(one token each when decoding; more when a prefill is chunked or a constraint forced
tokens in); then waiting ones join in FCFS order while budget, `max_num_seqs` and KV
blocks allow. With chunked prefill a long prompt is computed over several steps
alongside the decodes. When blocks run out, the latest-arrived running sequence is
preempted: its blocks are freed and it goes back to the front of the waiting queue to
be recomputed later (tokens, matcher state and outputs are kept, nothing is lost).
"""
from __future__ import annotations

import bisect
from collections import deque

from .block_manager import BlockManager
from .config import EngineConfig
from .sequence import Sequence, SequenceStatus


class Scheduler:
    def __init__(self, config: EngineConfig, block_manager: BlockManager):
        self.config = config
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []     # kept sorted by seq_id (arrival order)
        self.num_preemptions = 0
        self.failed: list[Sequence] = []      # finished with an error by the scheduler

    def add(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> list[tuple[Sequence, int]]:
        """Pick this step's (sequence, number of new tokens) pairs."""
        cfg, bm = self.config, self.block_manager
        budget = cfg.max_num_batched_tokens
        scheduled: list[tuple[Sequence, int]] = []
        preempted = False

        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = seq.num_uncomputed_tokens
            if n == 0:          # a beam whose logits are in, waiting for its siblings' (beam_search)
                i += 1
                continue
            if n > budget:
                if not cfg.enable_chunked_prefill and scheduled:
                    i += 1
                    continue
                n = budget
            while not bm.allocate(seq, n):
                victim = self.running.pop()       # latest arrival loses its blocks
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    break
            else:
                bm.register_full_blocks(seq, seq.num_computed_tokens + n)
                scheduled.append((seq, n))
                budget -= n
                i += 1
                continue
            break   # seq itself was preempted: nothing after it is left in running

        # Admit waiting sequences (FCFS) unless this step already had to preempt.
        while (self.waiting and not preempted and budget > 0
               and len(self.running) < cfg.max_num_seqs):
            seq = self.waiting[0]
            if not seq.block_table:
                bm.match_prefix(seq)
            n = seq.num_uncomputed_tokens
            if n > budget:
                if not cfg.enable_chunked_prefill:
                    if scheduled:
                        break      # whole prompts only: wait for a fresh step
                    # A prompt longer than the budget is refused at add time, so this
                    # only happens after preemption grew the sequence; run it whole.
                else:
                    n = budget
            if not bm.allocate(seq, n):
                # Give back the prefix blocks it matched (it matches again when next at
                # the head): a preemption may queue others in front of it, and blocks
                # held by a waiting sequence would be stranded until one "did not fit".
                bm.free_sequence(seq)
                if not scheduled and not self.running and bm.num_free_blocks == bm.num_blocks:
                    # Not even this one sequence fits in the whole cache. (Blocks held
                    # by another scheduler on this block manager, an AsyncEngine's beam
                    # requests', come back: then it waits.)
                    self.waiting.popleft()
                    seq.status = SequenceStatus.FINISHED
                    seq.finish_reason = "error"
                    seq.error = (f"sequence of {seq.num_tokens} tokens does not fit in the KV "
                                 f"cache ({bm.num_blocks} blocks of {bm.block_size})")
                    self.failed.append(seq)
                    continue
                break
            bm.register_full_blocks(seq, seq.num_computed_tokens + n)
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            bisect.insort(self.running, seq, key=lambda s: s.seq_id)
            scheduled.append((seq, n))
            budget -= n
        return scheduled

    def preempt_idle(self) -> bool:
        """Preempt the latest-arrived running sequence that has nothing to compute (a beam
        waiting for its siblings' logits), so that blocks it holds let a waiting sibling
        in; False if there is none."""
        for seq in reversed(self.running):
            if seq.num_uncomputed_tokens == 0:
                self.running.remove(seq)
                self._preempt(seq)
                return True
        return False

    def _preempt(self, seq: Sequence) -> None:
        self.block_manager.free_sequence(seq)
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.requeue(seq)

    def requeue(self, seq: Sequence) -> None:
        """Put a preempted sequence back: front of the queue, in arrival order among the
        preempted (beam search takes a beam out while it needs no forward)."""
        idx = 0
        while idx < len(self.waiting) and self.waiting[idx].seq_id < seq.seq_id \
                and self.waiting[idx].num_preemptions > 0:
            idx += 1
        self.waiting.insert(idx, seq)

    def finish(self, seq: Sequence) -> None:
        """Remove a finished sequence (running or waiting) and free its blocks."""
        seq.status = SequenceStatus.FINISHED
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.block_manager.free_sequence(seq)

    def add_fork(self, parent: Sequence, child: Sequence) -> None:
        """Queue `child`, a fork of `parent`, where its parent is: running with the parent's
        blocks shared, or waiting (a preempted parent holds no blocks) right behind it."""
        if parent.status is SequenceStatus.RUNNING:
            self.block_manager.fork(parent, child)
            child.status = SequenceStatus.RUNNING
            bisect.insort(self.running, child, key=lambda s: s.seq_id)
        else:
            child.status = SequenceStatus.WAITING
            self.waiting.insert(self.waiting.index(parent) + 1, child)
