"""Beam search over the paged KV cache: beams share blocks, copied only on write.

`LLM.beam_search(prompts, BeamSearchParams(...))` runs here. Each prompt starts as one
sequence; once its logits are in, every beam step picks the best `2 * beam_width`
(beam, token) candidates over all of the request's beams and keeps the best
`beam_width` that did not finish. A kept candidate whose beam is kept once already is a
fork: a new Sequence that shares its parent's KV blocks through reference counts
(BlockManager.fork); the shared, partly filled last block is copied when one of them
writes into it. So k beams of a long prompt hold the prompt once plus their own tails.

The selection replicates transformers' `_beam_search` (candidates, finished hypotheses,
length penalty, early stopping, order of the result), so that outputs are
token-identical to `generate(num_beams=k)` on the same weights: docs/engine.md.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import torch

from . import detokenizer
from .sampling_params import BeamSearchParams, SamplingParams
from .sequence import Sequence

# transformers' placeholder score for an empty hypothesis slot.
_EMPTY = -1.0e9


@dataclass
class BeamSearchSequence:
    """One finished hypothesis: its output tokens (the EOS, or the tokens of the stop string,
    that ended it included), text (without the stop string unless
    include_stop_str_in_output), sum of token logprobs, and
    score = cum_logprob / len(token_ids) ** length_penalty."""
    token_ids: list[int]
    text: str
    cum_logprob: float
    score: float
    logprobs: list[float]              # per output token, under the model (raw, unmasked)
    finish_reason: str                 # "stop" (EOS or a stop string) | "length" | "constraint"
    stop_reason: object = None         # the stop string or EOS id that ended it


@dataclass
class BeamSearchOutput:
    """What `LLM.beam_search` returns per prompt: hypotheses best first (up to beam_width;
    fewer only where a constraint leaves fewer valid ones). `error` says why a request
    that could not run has none."""
    request_id: int
    prompt: str | None
    prompt_token_ids: list[int]
    sequences: list[BeamSearchSequence] = field(default_factory=list)
    num_cached_tokens: int = 0
    error: str | None = None


@dataclass(eq=False)
class _Beam:
    seq: Sequence
    score: torch.Tensor                # 0-d float32: cumulative logprob (transformers' dtype)
    token_logprobs: list[float]
    row: torch.Tensor | None = None    # this step's masked logprobs, once computed


@dataclass(eq=False)
class _Request:
    out: BeamSearchOutput
    params: BeamSearchParams
    beams: list[_Beam]
    finished: list[tuple[float, BeamSearchSequence]] = field(default_factory=list)  # best first
    prompt_seq: Sequence | None = None
    num_generated: int = 0


class BeamSearch:
    """Drives an LLM's model runner for beam requests, over `scheduler` (the LLM's by
    default; an AsyncEngine gives it one of its own on the same block manager, so that beam
    steps and the steps of other requests take turns). The caller holds the LLM's lock.

    `others_busy()`: whether sequences outside `scheduler` hold KV blocks and will free them
    (then a step that can schedule nothing waits instead of failing).

    >>> bs = BeamSearch(llm); r = bs.add("Hi", BeamSearchParams(2, max_tokens=4))   # doctest: +SKIP
    >>> while bs.has_unfinished(): bs.step()                                         # doctest: +SKIP
    >>> r.out.sequences                                                              # doctest: +SKIP
    """

    def __init__(self, llm, scheduler=None, others_busy=lambda: False):
        self.llm = llm
        self.scheduler, self.runner = scheduler or llm.scheduler, llm.runner
        self.others_busy = others_busy
        self.beam_of: dict[Sequence, _Beam] = {}
        self.request_of: dict[Sequence, _Request] = {}
        self.held: set[Sequence] = set()         # preempted beams out of the queue (_hold_preempted)
        self.pending: deque[_Request] = deque()  # not admitted yet
        self.active: list[_Request] = []

    def run(self, prompts, params: list[BeamSearchParams]) -> list[BeamSearchOutput]:
        """Every prompt to the end: one BeamSearchOutput each, in order."""
        for p in params:
            self.check(p)
        requests = [self.add(prompt, p) for prompt, p in zip(prompts, params)]
        try:
            while self.has_unfinished():
                self.step()
        finally:
            self.abort_all()
        return [r.out for r in requests]

    def check(self, p: BeamSearchParams) -> None:
        cap = self.llm.config.max_num_seqs
        if p.beam_width > cap:
            raise ValueError(f"BeamSearchParams.beam_width={p.beam_width} exceeds max_num_seqs={cap}: "
                             "every beam of a request runs in the same batch")

    def add(self, prompt, p: BeamSearchParams) -> _Request:
        """Queue a prompt; its `.out` (a BeamSearchOutput) is complete once `step` returns
        it. One that cannot run has `.out.error` set at once and is not queued."""
        self.check(p)
        r = self._make_request(prompt, p)
        if r.out.error is None:
            self.pending.append(r)
        return r

    def has_unfinished(self) -> bool:
        return bool(self.pending or self.active)

    def step(self) -> list[_Request]:
        """Admit what fits, run one forward and one beam step: the requests that ended."""
        cap = self.llm.config.max_num_seqs
        # Admit while every beam of every active request can run at once: a preempted
        # beam must always find room to come back, or its siblings would wait forever.
        while self.pending and (sum(r.params.beam_width for r in self.active)
                                + self.pending[0].params.beam_width <= cap):
            r = self.pending.popleft()
            self.scheduler.add(r.prompt_seq)
            self.active.append(r)
        done = self._step()
        for r in done:
            if r in self.active:
                self.active.remove(r)
        return done

    def abort(self, r: _Request, error: str = "aborted") -> None:
        """End a request now (no hypotheses, `error` set) and free its blocks."""
        if r in self.pending:
            self.pending.remove(r)
        if r in self.active:
            self.active.remove(r)
        self._fail(r, error)

    def abort_all(self, error: str = "aborted") -> list[_Request]:
        """End every unfinished request (an interrupted call, a failed step): those ended."""
        ended = list(self.pending) + list(self.active)
        for r in ended:
            self.abort(r, error)
        return ended

    def _make_request(self, prompt, p: BeamSearchParams) -> _Request:
        sp = SamplingParams(max_tokens=p.max_tokens, ignore_eos=p.ignore_eos, constraint=p.constraint,
                            stop=list(p.stop), include_stop_str_in_output=p.include_stop_str_in_output)
        out, (seq,) = self.llm._add_request(prompt, sp, queue=False)
        r = _Request(BeamSearchOutput(out.request_id, out.prompt, out.prompt_token_ids, error=seq.error),
                     p, [_Beam(seq, torch.zeros((), dtype=torch.float32), [])], prompt_seq=seq)
        self.beam_of[seq], self.request_of[seq] = r.beams[0], r
        return r

    # -- one engine step ------------------------------------------------------------------
    def _step(self) -> list[_Request]:
        """Run one forward; advance every request whose beams all have logits. Returns the
        requests that are done."""
        sch, done = self.scheduler, []
        batch = sch.schedule()
        failed = list(sch.failed)                # did not fit in the KV cache
        sch.failed.clear()
        if not batch and not failed and not sch.preempt_idle():
            if self.others_busy():               # their blocks come back as they finish
                return done
            raise RuntimeError("beam search made no progress: no sequence could be scheduled")
        self._hold_preempted()
        seqs: list[Sequence] = []
        if batch:
            self.runner.copy_blocks(self.llm.block_manager.pop_copies())
            self.llm.stats["steps"] += 1
            logits, seqs = self.runner.forward_logits(batch)
            if seqs:
                faults: dict[int, str] = {}
                for seq, row in zip(seqs, self._logprobs(logits, seqs, faults)):
                    self.beam_of[seq].row = row
                for i, error in faults.items():          # a matcher that raised fails its request
                    failed.append(seqs[i])
                    seqs[i].error = error
        for seq in failed:
            r = self.request_of.get(seq)
            if r is not None and r not in done:
                self._fail(r, seq.error)
                done.append(r)
        for r in {self.request_of[s] for s in seqs if s in self.request_of}:
            if r in done or any(b.row is None for b in r.beams):
                continue
            try:
                self._advance(r)
            except Exception as e:  # noqa: BLE001 - a matcher fault fails its request only
                self._fail(r, f"{type(e).__name__}: {e}")
            if not r.beams:
                done.append(r)
        return done

    def _hold_preempted(self) -> None:
        """Take preempted beams whose logits are already in out of the waiting queue until
        their request's next beam step: recomputing them now would take blocks their
        waiting siblings need, and two such beams could preempt each other forever."""
        for seq in [s for s in self.scheduler.waiting if s in self.beam_of and self.beam_of[s].row is not None]:
            self.scheduler.waiting.remove(seq)
            self.held.add(seq)

    def _logprobs(self, logits: torch.Tensor, seqs: list[Sequence], faults: dict[int, str]) -> torch.Tensor:
        """Raw log-softmax, then the constraint's disallowed tokens at -inf (transformers
        applies logits processors after the log-softmax: scores are not renormalised).
        A matcher whose mask raises is recorded in `faults` under its row."""
        lp = torch.log_softmax(logits, dim=-1)
        mask, matched = self.runner._masks([(s, 0) for s in seqs], faults)
        if matched:
            self.runner.apply_bitmask(lp, mask, matched if len(matched) < len(seqs) else None)
        return lp

    # -- one beam step (transformers' _beam_search, one prompt) ---------------------------------
    def _advance(self, r: _Request) -> None:
        p, eos = r.params, self.llm.eos_token_ids
        k, V = p.beam_width, r.beams[0].row.shape[0]
        scores = torch.stack([b.row for b in r.beams]) + torch.stack([b.score for b in r.beams])[:, None]
        n_eos = 0 if p.ignore_eos else len(eos)
        keep = min(max(2, 1 + n_eos) * k, scores.numel())
        top_scores, top_idx = torch.topk(scores.flatten(), keep)
        length = r.num_generated + 1             # output length of every candidate
        at_limit = length >= p.max_tokens or len(r.out.prompt_token_ids) + length >= self.llm.max_model_len
        full = len(r.finished) == k and p.early_stopping is True

        kept: list[tuple[_Beam, int, torch.Tensor]] = []
        new_finished = []
        for j, (score, idx) in enumerate(zip(top_scores, top_idx.tolist())):
            if score == float("-inf"):           # the constraint allows nothing more: no candidate
                break
            parent, token = r.beams[idx // V], idx % V
            ends_eos = token in eos and (not p.ignore_eos or parent.seq.matcher is not None)
            # (checked only where it matters: a candidate that may finish or be kept)
            stopped = self._stop_hit(parent, token, p) if p.stop and (j < k or len(kept) < k) else None
            if ends_eos or stopped is not None or at_limit:
                # Only the best k candidates may become hypotheses (transformers' top_num_beam_mask).
                if j < k and not full:
                    reason = "stop" if ends_eos or stopped is not None else "length"
                    new_finished.append((parent, token, score, reason, stopped))
            elif len(kept) < k:
                kept.append((parent, token, score))
        divisor = float(length) ** p.length_penalty
        for parent, token, score, reason, stopped in new_finished:
            hyp_score = float(score / divisor)
            if len(r.finished) < k or hyp_score > r.finished[-1][0]:
                if parent.seq.matcher is not None and token in eos:
                    reason = "constraint"
                hyp = self._hypothesis(r, parent, token, score, hyp_score, reason, stopped)
                r.finished.append((hyp_score, hyp))
                r.finished.sort(key=lambda h: -h[0])    # stable: earlier ones first among equals
                del r.finished[k:]
        r.num_generated = length

        self._rebeam(r, kept)
        if not r.beams and not r.finished:
            raise RuntimeError("the constraint left no valid continuation")
        if not r.beams or not self._can_improve(r):
            self._release(r)

    def _can_improve(self, r: _Request) -> bool:
        """transformers' stopping rule: go on while a hypothesis slot is empty or the best
        running beam could still beat the worst hypothesis (early_stopping=False judges at
        the current length, "never" at max_tokens when length_penalty > 0); with
        early_stopping=True, stop once beam_width hypotheses are in."""
        p = r.params
        if len(r.finished) < p.beam_width:
            return True
        if p.early_stopping is True:
            return False
        best_len = p.max_tokens if p.early_stopping == "never" and p.length_penalty > 0 else r.num_generated
        best_possible = float(r.beams[0].score / float(best_len) ** p.length_penalty)
        return best_possible > r.finished[-1][0]

    def _stop_hit(self, parent: _Beam, token: int, p: BeamSearchParams) -> tuple[str, str] | None:
        """(the text cut at the stop string, the stop string) where appending `token` to
        `parent` completes one (engine.detokenizer, as `generate` checks); else None."""
        delta = detokenizer.peek_next(self.llm.tokenizer, parent.seq, token)
        if not delta:
            return None
        return detokenizer.cut_at_stop(parent.seq.text + delta, len(delta), list(p.stop),
                                       p.include_stop_str_in_output)

    def _hypothesis(self, r: _Request, parent: _Beam, token: int, score, hyp_score: float,
                    reason: str, stopped: tuple[str, str] | None) -> BeamSearchSequence:
        ids = parent.seq.output_token_ids + [token]
        if stopped is not None:
            text, stop_reason = stopped
        else:
            text = self.llm.tokenizer.decode(ids, skip_special_tokens=True)
            stop_reason = token if reason in ("stop", "constraint") else None
        return BeamSearchSequence(ids, text, float(score), hyp_score,
                                  parent.token_logprobs + [float(parent.row[token])], reason, stop_reason)

    def _rebeam(self, r: _Request, kept: list[tuple[_Beam, int, torch.Tensor]]) -> None:
        """Replace r's beams by the kept (parent, token) pairs, in their order: a parent's
        first child continues its Sequence, the others fork it (sharing its blocks)."""
        children: dict[_Beam, int] = {}
        for parent, _, _ in kept:
            children[parent] = children.get(parent, 0) + 1
        for b in r.beams:                        # dropped beams first: fewer shared blocks to copy
            if b not in children:
                self._drop(b)
        for parent in children:
            if parent.seq in self.held:          # back in the queue, to be recomputed
                self.held.discard(parent.seq)
                self.scheduler.requeue(parent.seq)
        forks: dict[_Beam, list[Sequence]] = {}
        for parent, n in children.items():
            forks[parent] = [self._fork(r, parent) for _ in range(n - 1)]
        beams = []
        for parent, token, score in kept:
            seq = forks[parent].pop() if forks[parent] else parent.seq
            lp = parent.token_logprobs + [float(parent.row[token])]
            beam = _Beam(seq, score, lp)
            self.beam_of[seq] = beam
            if seq.matcher is not None and not seq.matcher.accept_token(token):
                raise RuntimeError(f"the constraint rejected token {token} it allowed")
            seq.token_ids.append(token)
            if r.params.stop:                    # its text, where the next stop check looks
                detokenizer.decode_next(self.llm.tokenizer, seq)
            beams.append(beam)
        r.beams = beams

    def _fork(self, r: _Request, parent: _Beam) -> Sequence:
        m = parent.seq.matcher
        if m is not None:
            if hasattr(m, "copy"):
                m = m.copy()
            else:                                # a user's matcher without copy(): replay
                m = self.llm.constraints.get(r.params.constraint).matcher()
                if not all(m.accept_token(t) for t in parent.seq.output_token_ids):
                    raise RuntimeError("replaying a beam into a fresh matcher failed")
        child = parent.seq.fork(next(self.llm._seq_ids), m)
        self.scheduler.add_fork(parent.seq, child)
        self.request_of[child] = r
        return child

    # -- ending ---------------------------------------------------------------------------
    def _drop(self, beam: _Beam) -> None:
        self.held.discard(beam.seq)
        self.scheduler.finish(beam.seq)
        self.beam_of.pop(beam.seq, None)
        self.request_of.pop(beam.seq, None)

    def _release(self, r: _Request) -> None:
        for b in r.beams:
            self._drop(b)
        r.beams = []
        r.out.sequences = [h for _, h in r.finished]
        r.out.num_cached_tokens = r.prompt_seq.prefix_hit_tokens

    def _fail(self, r: _Request, error: str | None) -> None:
        r.finished = []
        self._release(r)
        r.out.error = error or "failed"
