"""Drafts from a smaller model of the same vocabulary (`speculative_config={"method":
"draft_model", "model": ...}`), for speculative.Speculator to verify.

The draft model keeps its own paged KV cache and block manager (no prefix caching), with
`speculative_config["num_kv_blocks"]` blocks of `block_size` tokens, by default as many as
the target's cache: the draft then holds at most as many tokens as the target, so its
memory is the target's KV memory scaled by the draft's (layers x KV heads x head dim) over
the target's. A sequence whose shadow cannot get blocks is not drafted for that step; when
the cache cannot hold a shadow for every sequence, shadows take turns (`_rotate`).
Each sequence has a shadow `Sequence` in it: the tokens whose KV the draft holds. Each
step, for the sequences the speculator picks:

1. catch-up: the tokens the draft has not seen (the prompt on the first step, then the
   accepted drafts, the token sampled after them and forced tokens) run in one batched
   forward of at most the engine's `max_num_batched_tokens` (shortest catch-ups first; a
   longer one, a prompt, gets a chunk of what is left, over several steps, and drafts
   once caught up), and its logits at the last one propose the first draft;
2. the next drafts, one batched forward each (up to `num_speculative_tokens - 1`).

At each draft position the request's matcher masks the draft logits (drafts are always
valid; the masks are kept for the verification) and then accepts the draft; it is rolled
back when the drafts are done, so it never holds an unverified token. Greedy requests draft
the argmax; sampled ones draw from the draft's distribution at the request's temperature /
top-k / top-p / min-p, kept as q for exact rejection sampling (sampler.rejection_sample).

The shadow is trimmed at the next step to the longest prefix still equal to the sequence's
tokens (rejected drafts drop out, their blocks go back). Shadows of sequences no longer
running (finished, aborted, preempted) are freed at the next step, or at once through
`release`. A failure while drafting (the model, a matcher) fails only its request: the
batch is retried one sequence at a time to find it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .block_manager import BlockManager
from .loader import resolve_model
from .model import ModelConfig, load_model
from .model_runner import ModelRunner
from .sampler import exponential_race, probabilities
from .sequence import Sequence, SequenceStatus


@dataclass
class Turn:
    """A shadow's standing in the draft cache, in draft rounds (calls of `propose`)."""
    waited: int = 0                  # rounds in a row it was wanted and not fed
    since: int | None = None         # the round its shadow got blocks (None: it has none yet)
    drafted: int = 0                 # rounds it drafted since


@dataclass
class Proposal:
    """One sequence's drafts, its bitmasks before each draft and after the last (with a
    matcher), and the distributions the drafts were drawn from (sampled requests)."""
    tokens: list[int]
    masks: np.ndarray | None = None      # int32 [len(tokens) + 1, mask words]
    probs: torch.Tensor | None = None    # [len(tokens), V]


def check_same_vocabulary(target_name, target_cfg: ModelConfig, target_tok,
                          draft_name, draft_cfg: ModelConfig, draft_tok) -> None:
    """Refuse a draft model whose vocabulary differs from the target's: logits width, and,
    where both tokenizers are known, every token string and the special ids."""
    def refuse(what: str):
        raise ValueError(f"speculative_config.model: the draft model {str(draft_name)!r} does not share "
                         f"the vocabulary of the target {str(target_name)!r}: {what}")
    if draft_cfg.vocab_size != target_cfg.vocab_size:
        refuse(f"vocab_size {draft_cfg.vocab_size} in the draft, {target_cfg.vocab_size} in the target")
    if target_tok is None or draft_tok is None:
        return
    t_vocab, d_vocab = target_tok.get_vocab(), draft_tok.get_vocab()
    t_ids, d_ids = {i: s for s, i in t_vocab.items()}, {i: s for s, i in d_vocab.items()}
    for i in sorted(set(t_ids) | set(d_ids)):
        if t_ids.get(i) != d_ids.get(i):
            refuse(f"token {i} is {t_ids.get(i)!r} in the target and {d_ids.get(i)!r} in the draft")
    for attr in ("eos_token_id", "bos_token_id", "pad_token_id", "unk_token_id"):
        a, b = getattr(target_tok, attr, None), getattr(draft_tok, attr, None)
        if a != b:
            refuse(f"{attr} is {a} in the target and {b} in the draft")


class DraftModel:
    """A draft model, its KV cache and each drafting sequence's shadow in it."""

    # Rounds a sequence waits for draft blocks before it may take them from shadows that
    # have drafted as many rounds (docs/engine.md, "With a draft model": Its cache).
    ROTATE_AFTER = 4

    def __init__(self, model, target_name, target_cfg: ModelConfig, target_tok, *, num_blocks: int,
                 block_size: int, device, dtype, seed: int, attention: str | None, max_batch: int,
                 max_model_len: int, max_num_batched_tokens: int):
        self.folder = resolve_model(model)
        self.config = ModelConfig.from_folder(self.folder)
        draft_tok = None
        if target_tok is not None:
            from transformers import AutoTokenizer
            try:
                draft_tok = AutoTokenizer.from_pretrained(self.folder)
            except Exception:  # noqa: BLE001 - a folder without a tokenizer: vocab size alone is checked
                draft_tok = None
        check_same_vocabulary(target_name, target_cfg, target_tok, model, self.config, draft_tok)
        if self.config.max_position_embeddings < max_model_len:
            raise ValueError(f"speculative_config.model: the draft model {str(model)!r} has "
                             f"max_position_embeddings={self.config.max_position_embeddings}, under the "
                             f"target's max_model_len={max_model_len}: lower max_model_len")
        self.model = load_model(self.folder, dtype, device, self.config)
        self.block_manager = BlockManager(num_blocks, block_size, enable_prefix_caching=False)
        # No CUDA graphs: its decode steps are few per engine step and shaped by the drafts.
        self.runner = ModelRunner(self.model, num_blocks, block_size, device, dtype, seed=seed,
                                  attention=attention, max_batch=max_batch, max_model_len=max_model_len,
                                  cuda_graphs=False)
        # The catch-up forward's token budget: the engine's own, as chunked prefill.
        self.max_num_batched_tokens = max_num_batched_tokens
        self.shadows: dict[int, tuple[Sequence, Sequence]] = {}   # seq_id -> (sequence, shadow)
        self.verified: dict[int, int] = {}     # seq_id -> shadow tokens known equal to the sequence's
        self.turns: dict[int, Turn] = {}       # seq_id -> its turn in the cache
        self.rounds = 0

    # -- the shadows' lifetime ------------------------------------------------------------------
    def release(self, seq: Sequence) -> None:
        """Free `seq`'s draft cache (it finished, or was aborted or preempted)."""
        entry = self.shadows.pop(seq.seq_id, None)
        self.verified.pop(seq.seq_id, None)
        self.turns.pop(seq.seq_id, None)
        if entry is not None:
            self.block_manager.free_sequence(entry[1])

    def sweep(self) -> None:
        """Free the shadows of sequences no longer running (a preempted one catches up again)."""
        for seq, _ in list(self.shadows.values()):
            if seq.status is not SequenceStatus.RUNNING or not seq.block_table:
                self.release(seq)

    def release_all(self) -> None:
        for seq, _ in list(self.shadows.values()):
            self.release(seq)

    def _shadow(self, seq: Sequence) -> Sequence:
        """seq's shadow, trimmed to the tokens still equal to seq's (at least one left to feed)."""
        entry = self.shadows.get(seq.seq_id)
        if entry is None:
            shadow = Sequence(seq.seq_id, seq.request_id, 0, [], 0, seq.params)
            self.shadows[seq.seq_id] = (seq, shadow)
            self.verified[seq.seq_id] = 0
            self.turns[seq.seq_id] = Turn()
        shadow = self.shadows[seq.seq_id][1]
        # The sequence only grows by appending, so its first `verified` tokens are still the
        # shadow's; past them the shadow holds drafts, equal to seq's tokens until the first rejected.
        keep = self.verified[seq.seq_id]
        end = min(shadow.num_computed_tokens, seq.num_tokens - 1)
        while keep < end and shadow.token_ids[keep] == seq.token_ids[keep]:
            keep += 1
        del shadow.token_ids[keep:]         # (its first `keep` are seq's: only the tail is copied)
        shadow.token_ids.extend(seq.token_ids[keep:])
        shadow.num_computed_tokens = keep
        self.block_manager.free_tail(shadow, keep)
        self.verified[seq.seq_id] = keep
        return shadow

    # -- drafting --------------------------------------------------------------------------------
    def propose(self, wanted: list[tuple[Sequence, int]], ends, mask_words: int
                ) -> tuple[dict[Sequence, Proposal], dict[Sequence, str]]:
        """Drafts for each (sequence, up to how many) of `wanted`: a proposal per sequence, and
        the sequences whose drafting failed, with why (they fail; the others are unaffected).
        `ends(seq, token)`: the token would end the sequence (no draft follows it)."""
        try:
            return self._propose(wanted, ends, mask_words), {}
        except Exception:  # noqa: BLE001 - find the sequence at fault: each alone
            proposals, faults = {}, {}
            for seq, room in wanted:
                try:
                    proposals.update(self._propose([(seq, room)], ends, mask_words))
                except Exception as e:  # noqa: BLE001
                    faults[seq] = f"the draft model failed while drafting: {type(e).__name__}: {e}"
            return proposals, faults

    @torch.inference_mode()
    def _propose(self, wanted, ends, mask_words: int) -> dict[Sequence, Proposal]:
        bm = self.block_manager
        live: list[tuple[Sequence, Sequence, int]] = []     # (seq, shadow, room)
        behind: list[Sequence] = []                          # catching up on a chunk only
        feed: list[tuple[Sequence, int]] = []
        budget = self.max_num_batched_tokens
        self.rounds += 1
        shadows = [(seq, room, self._shadow(seq)) for seq, room in wanted]
        first = self._rotate(shadows)
        if first is not None:                  # shadows were evicted: start those again
            shadows = [(seq, room, self._shadow(seq)) for seq, room in wanted]
        # Shortest catch-ups first: the decodes keep drafting while a long prompt catches up
        # (a sequence given its turn by _rotate goes first, to take the blocks freed for it).
        for seq, room, shadow in sorted(shadows, key=lambda e: (e[0] is not first,
                                                                e[0].num_tokens - e[2].num_computed_tokens)):
            n = seq.num_tokens - shadow.num_computed_tokens    # catch-up, >= 1
            if budget <= 0:
                break
            if n > budget:                     # a chunk of it; drafts once it has caught up
                if bm.allocate(shadow, budget):
                    behind.append(seq)
                    feed.append((shadow, budget))
                    budget = 0
                continue
            if not bm.allocate(shadow, n + room - 1):
                continue                       # the draft cache is full: no drafts this step
            live.append((seq, shadow, room))
            feed.append((shadow, n))
            budget -= n
        self._count_turns(shadows, live, behind)
        out = {seq: Proposal([], np.empty((room + 1, mask_words), np.int32) if seq.matcher is not None
                             else None) for seq, _, room in live}
        q: dict[Sequence, list[torch.Tensor]] = {seq: [] for seq, _, _ in live}
        by_shadow = {id(shadow): (seq, room) for seq, shadow, room in live}
        try:
            while feed:
                logits, shadows = self.runner.forward_logits(feed)
                seqs = [by_shadow[id(s)][0] for s in shadows]
                tokens, probs, ok = self._choose(logits, seqs, [out[s] for s in seqs])
                feed = []
                for i, (seq, shadow) in enumerate(zip(seqs, shadows)):
                    p, room = out[seq], by_shadow[id(shadow)][1]
                    if not ok[i]:
                        continue                # the constraint allows nothing here: drafts end
                    t = tokens[i]
                    if seq.matcher is not None and not seq.matcher.accept_token(t):
                        continue
                    p.tokens.append(t)
                    if probs is not None and not seq.params.greedy:
                        q[seq].append(probs[i])
                    done = (ends(seq, t) or len(p.tokens) == room
                            or (seq.matcher is not None and seq.matcher.is_terminated()))
                    if not done:
                        shadow.token_ids.append(t)
                        feed.append((shadow, 1))
            for seq, shadow, _ in live:
                p = out[seq]
                if p.masks is not None:
                    seq.matcher.fill_next_token_bitmask(p.masks[len(p.tokens)])
                    p.masks = p.masks[:len(p.tokens) + 1]
                if q[seq]:
                    p.probs = torch.stack(q[seq])
                bm.free_tail(shadow, shadow.num_computed_tokens)
        except BaseException:
            for seq in [seq for seq, _, _ in live] + behind:     # start again from scratch next time
                self.release(seq)
            raise
        finally:
            for seq, _, _ in live:
                if seq.matcher is not None and out[seq].tokens:
                    seq.matcher.rollback(len(out[seq].tokens))
        return out

    def _rotate(self, shadows: list[tuple[Sequence, int, Sequence]]) -> Sequence | None:
        """Turns in a draft cache too small for every shadow. A sequence that has waited
        ROTATE_AFTER rounds (the longest first) takes the blocks of its catch-up (the chunk
        the budget allows, and its drafts' slots) from the shadows that have had their turn
        (drafted ROTATE_AFTER rounds, or themselves waited as long while holding blocks),
        the longest-held first; an evicted shadow is rebuilt by the catch-up forward when
        its turn comes again. Nothing is evicted where that would not free enough. Returns
        the sequence to seat first this round, or None."""
        bm, turns, budget = self.block_manager, self.turns, self.max_num_batched_tokens
        due = sorted((e for e in shadows if turns[e[0].seq_id].waited >= self.ROTATE_AFTER),
                     key=lambda e: -turns[e[0].seq_id].waited)
        if not due:  # (the usual round: no shadow list sorted)
            return None
        held = sorted((t.since, sid) for sid, t in turns.items() if t.since is not None
                      and self.shadows[sid][1].block_table
                      and max(t.drafted, t.waited) >= self.ROTATE_AFTER)
        for seq, room, shadow in due:
            n = seq.num_tokens - shadow.num_computed_tokens
            need = bm.blocks_needed(shadow, n + room - 1 if n <= budget else budget) - bm.num_free_blocks
            victims = []
            for _, sid in held:
                if need <= 0:
                    break
                if sid != seq.seq_id:
                    victims.append(self.shadows[sid][0])
                    need -= len(self.shadows[sid][1].block_table)
            if need <= 0:
                for victim in victims:
                    self.release(victim)
                return seq
        return None

    def _count_turns(self, shadows, live, behind) -> None:
        """After seating: who drafts this round, who is catching up, who waits."""
        fed = {id(seq) for seq, _, _ in live} | {id(seq) for seq in behind}
        drafting = {id(seq) for seq, _, _ in live}
        for seq, _, _ in shadows:
            turn = self.turns[seq.seq_id]
            if id(seq) not in fed:
                turn.waited += 1
                continue
            turn.waited = 0
            if turn.since is None:
                turn.since = self.rounds
            turn.drafted += int(id(seq) in drafting)

    def _choose(self, logits: torch.Tensor, seqs: list[Sequence], proposals: list[Proposal]):
        """Each row's draft: the constraint's mask (kept in the proposal), then the argmax or a
        draw from the request's sampling distribution. Returns (tokens, the distributions
        drawn from (None when all greedy), whether the row had any allowed token)."""
        rows = [i for i, p in enumerate(proposals) if p.masks is not None]
        if rows:
            mask = np.full((len(seqs), self.runner.mask_words), -1, dtype=np.int32)
            for i in rows:
                seqs[i].matcher.fill_next_token_bitmask(mask[i])
                proposals[i].masks[len(proposals[i].tokens)] = mask[i]
            self.runner.apply_bitmask(logits, self.runner.to_device(mask, torch.int32), rows)
        live = torch.isfinite(logits).any(dim=-1)
        logits.masked_fill_(~live[:, None], 0.0)
        sb = self.runner.sampling_batch(seqs, logits)
        if sb.all_greedy:
            return logits.argmax(dim=-1).tolist(), None, live.tolist()
        probs = probabilities(logits, sb)      # (a new tensor: logits stay as they are)
        drawn = exponential_race(probs, sb.generators, self.runner.generator)
        tokens = torch.where(sb.temperature == 0, logits.argmax(dim=-1), drawn)
        return tokens.tolist(), probs, live.tolist()
