"""Speculative decoding by prompt lookup (n-gram drafts), verified in one forward.

Each step, a running sequence whose whole remaining chunk is scheduled gets drafts: the
tokens that followed the latest earlier occurrence of its longest suffix (see
`ngram_draft`). With a constraint, the matcher checks them first: drafting stops at the
first token it rejects, and the bitmasks at every draft position are kept for the
verification. The matcher is then rolled back to the sequence's own tokens: accepted
drafts are appended later through the same path as sampled tokens (matcher, stop checks,
detokenizer), so its state never holds an unverified token.

The drafts ride at the end of the sequence's chunk (`Sequence.draft_token_ids`), in slots
allocated only from what is left this step (budget and free blocks: drafting never
preempts anyone), never hashed for the prefix cache. The model runner computes logits at
the chunk's last token and at every draft, and accepts a prefix of them (greedy: drafts
equal to the argmax; sampled: rejection sampling); `accept` then counts the accepted
drafts as computed and gives back the blocks past them.

With `method="draft_model"` the drafts come from a smaller model instead
(engine/draft_model.py): the sequence's target slots for up to `num_speculative_tokens`
drafts are reserved first, the draft model proposes for all drafting sequences in batched
forwards, and the slots past its drafts go back. Verification is the same, with the draft
model's distributions q for sampled requests.
"""
from __future__ import annotations

import numpy as np

from .block_manager import BlockManager
from .config import SpeculativeConfig
from .sequence import Sequence


def ngram_draft(tokens, n_min: int, n_max: int, k: int) -> list[int]:
    """Up to k tokens that followed the latest earlier occurrence of the longest suffix of
    `tokens` between n_min and n_max tokens long; [] when no such suffix occurred before.

    >>> ngram_draft([1, 2, 3, 9, 1, 2], 1, 3, 2)
    [3, 9]
    >>> ngram_draft([5, 1, 7, 1, 6, 1], 1, 2, 4)     # the latest occurrence of [1]
    [6, 1]
    """
    arr = np.asarray(tokens)
    last = len(arr) - 1               # the suffix ends here; an earlier match ends before it
    # ok[e]: the j+1 tokens ending at position e equal the suffix's last j+1 tokens.
    ok = np.ones(max(last, 0), dtype=bool)
    end = None
    for j in range(min(n_max, last)):
        ok[j:] &= arr[:last - j] == arr[last - j]
        ok[:j] = False                # too close to the start for j+1 tokens
        hits = np.flatnonzero(ok)
        if not hits.size:
            break
        if j + 1 >= n_min:
            end = int(hits[-1])       # the latest match of this (longer) length
    if end is None:
        return []
    return arr[end + 1:end + 1 + k].tolist()


def check_drafts(matcher, drafts: list[int], mask_words: int) -> tuple[list[int], np.ndarray]:
    """The longest prefix of `drafts` the matcher allows, and its bitmasks at the position
    before each of them and after the last one ([len + 1, mask_words]).

    The matcher walks the drafts and is rolled back before returning, even on error.
    Drafting stops after a token that terminates the matcher (EOS: nothing can follow).
    """
    masks = np.empty((len(drafts) + 1, mask_words), dtype=np.int32)
    taken = 0
    try:
        for t in drafts:
            matcher.fill_next_token_bitmask(masks[taken])
            allowed = (int(masks[taken, t >> 5]) >> (t & 31)) & 1
            if not allowed or not matcher.accept_token(t):
                return drafts[:taken], masks[:taken + 1]
            taken += 1
            if matcher.is_terminated():
                break
        matcher.fill_next_token_bitmask(masks[taken])
        return drafts[:taken], masks[:taken + 1]
    finally:
        if taken:
            matcher.rollback(taken)


class Speculator:
    """Adds drafts (n-gram or a draft model's) to a scheduled batch and settles them after verification."""

    def __init__(self, config: SpeculativeConfig, block_manager: BlockManager, max_num_batched_tokens: int,
                 max_model_len: int, mask_words: int, eos_ids: set[int], draft_model=None):
        self.config = config
        self.draft_model = draft_model      # engine.draft_model.DraftModel for method="draft_model"
        self.block_manager = block_manager
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_model_len = max_model_len
        self.mask_words = mask_words
        self.eos_ids = eos_ids
        self.stats = {"draft_tokens": 0, "accepted_tokens": 0}

    def draft(self, batch: list[tuple[Sequence, int]]) -> dict[Sequence, str]:
        """Give each eligible sequence of `batch` its drafts, in place (the pair's token count
        grows by their number). Returns the sequences whose matcher (or draft model) failed
        while drafting, with the error: they run this step without drafts, then fail."""
        budget = self.max_num_batched_tokens - sum(n for _, n in batch)
        faults: dict[Sequence, str] = {}
        wanted: list[tuple[int, Sequence, int]] = []      # draft model: (index, seq, room)
        if self.draft_model is not None:
            self.draft_model.sweep()
        for i, (seq, n) in enumerate(batch):
            seq.draft_token_ids, seq.draft_masks, seq.draft_probs = [], None, None
            room = min(budget, self._room(seq, n))
            if room <= 0:
                continue
            if self.draft_model is not None:
                # Reserve the slots now, so that the next sequence's room counts them taken.
                fits = self.block_manager.allocate(seq, n + room)
                assert fits, "_room counted the free slots"
                wanted.append((i, seq, room))
                budget -= room
                continue
            c = self.config
            drafts = self._stop_at_end(seq, ngram_draft(seq.token_ids, c.prompt_lookup_min,
                                                        c.prompt_lookup_max, room))
            if drafts and seq.matcher is not None:
                try:
                    drafts, seq.draft_masks = check_drafts(seq.matcher, drafts, self.mask_words)
                except Exception as e:  # noqa: BLE001 - a broken matcher fails its request only
                    faults[seq] = f"the constraint failed while checking drafts: {type(e).__name__}: {e}"
                    seq.draft_masks = None
                    continue
            if drafts:
                fits = self.block_manager.allocate(seq, n + len(drafts))
                assert fits, "_room counted the free slots"
                budget -= self._take(batch, i, drafts)
        if wanted:
            proposals, failed = self.draft_model.propose([(seq, room) for _, seq, room in wanted],
                                                         self._ends, self.mask_words)
            faults.update(failed)
            for i, seq, _ in wanted:
                p = proposals.get(seq)
                if p is not None and p.tokens:
                    seq.draft_masks, seq.draft_probs = p.masks, p.probs
                    self._take(batch, i, p.tokens)
                self.block_manager.free_tail(seq, seq.num_computed_tokens + batch[i][1])
        return faults

    def _take(self, batch: list[tuple[Sequence, int]], i: int, drafts: list[int]) -> int:
        seq, n = batch[i]
        seq.draft_token_ids = drafts
        batch[i] = (seq, n + len(drafts))
        self.stats["draft_tokens"] += len(drafts)
        return len(drafts)

    def _room(self, seq: Sequence, n: int) -> int:
        """How many drafts `seq` may take with its n scheduled tokens (0: none)."""
        p = seq.params
        if (n != seq.num_uncomputed_tokens or seq.num_output_tokens == 0
                or (seq.matcher is not None and not hasattr(seq.matcher, "rollback"))):
            # Only a chunk reaching the sequence's end can carry drafts; a prompt's first
            # token is sampled alone; a matcher that cannot roll back (a user's own
            # object) cannot check drafts.
            return 0
        bm = self.block_manager
        if bm.blocks_needed(seq, n):
            # Its chunk writes into a block published when scheduled and already matched by a
            # sequence admitted after it: allocating again would copy that block on write,
            # and the other sequence would read a block nobody writes. No drafts this step.
            return 0
        # Tokens it may still get, the sampled one after the drafts included.
        left = min(p.max_tokens - seq.num_output_tokens, self.max_model_len - seq.num_tokens)
        free_slots = ((len(seq.block_table) + bm.num_free_blocks) * bm.block_size
                      - seq.num_computed_tokens - n)
        return min(self.config.num_speculative_tokens, left - 1, free_slots)

    def _stop_at_end(self, seq: Sequence, drafts: list[int]) -> list[int]:
        """Drafts up to the first that would end the sequence (EOS, a stop id): none can follow it."""
        for j, t in enumerate(drafts):
            if self._ends(seq, t):
                return drafts[:j + 1]
        return drafts

    def _ends(self, seq: Sequence, token: int) -> bool:
        p = seq.params
        return token in p.stop_token_ids or (not p.ignore_eos and token in self.eos_ids)

    def release(self, seq: Sequence) -> None:
        """`seq` finished or was aborted: free what the draft model holds for it."""
        if self.draft_model is not None:
            self.draft_model.release(seq)

    def release_all(self) -> None:
        if self.draft_model is not None:
            self.draft_model.release_all()

    def accept(self, seq: Sequence, num_accepted: int) -> None:
        """`num_accepted` of seq's drafts were verified: their KV is in the cache. Release the
        blocks past them (rejected drafts' slots are simply overwritten later)."""
        if not seq.draft_token_ids:
            return
        self.stats["accepted_tokens"] += num_accepted
        seq.num_computed_tokens += num_accepted
        self.block_manager.free_tail(seq, seq.num_computed_tokens)

    @staticmethod
    def clear(batch: list[tuple[Sequence, int]]) -> None:
        """Drafts live within one step."""
        for seq, _ in batch:
            seq.draft_token_ids, seq.draft_masks, seq.draft_probs = [], None, None
