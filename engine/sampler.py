"""Turn a batch of logits into next tokens: penalties, constraint mask, temperature,
top-k, top-p, min-p, then greedy or seeded sampling; and rejection sampling of drafts.

Everything is vectorised over the batch; the only per-row Python is drawing noise
from a request's own `torch.Generator`, which is what makes a seeded request give
the same tokens whatever else is in the batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def apply_penalties(logits: torch.Tensor, prompt_mask: torch.Tensor, output_counts: torch.Tensor,
                    repetition: torch.Tensor, presence: torch.Tensor,
                    frequency: torch.Tensor) -> torch.Tensor:
    """In place. Repetition penalty (HF/CTRL style) on tokens seen in prompt or output:
    positive logits divided by it, negative multiplied. Presence/frequency (OpenAI
    style) subtracted for tokens in the output.

    Shapes: logits, output_counts [B, V]; prompt_mask bool [B, V]; penalties [B].
    """
    seen = prompt_mask | (output_counts > 0)
    rep = repetition[:, None].expand_as(logits)
    penalised = torch.where(logits > 0, logits / rep, logits * rep)
    logits.copy_(torch.where(seen, penalised, logits))
    logits -= frequency[:, None] * output_counts + presence[:, None] * (output_counts > 0)
    return logits


def apply_top_k_top_p_min_p(logits: torch.Tensor, top_k: torch.Tensor | None,
                            top_p: torch.Tensor | None, min_p: torch.Tensor | None) -> torch.Tensor:
    """Mask logits outside top-k, the top-p nucleus and the min-p floor (in that order).

    top_k: int [B] (>= vocab means off); top_p: float [B] (1 off); min_p: float [B] (0 off).
    Ties at the top-k boundary are kept (as transformers does). Top-p keeps the
    smallest set of most likely tokens whose probability reaches p.
    """
    if top_k is not None:
        k = top_k.clamp(1, logits.shape[-1])
        kth = torch.topk(logits, int(k.max()), dim=-1).values.gather(1, (k - 1)[:, None])
        logits.masked_fill_(logits < kth, float("-inf"))
    if top_p is not None:
        sorted_logits, order = logits.sort(dim=-1, descending=False)
        cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        drop = cum <= (1 - top_p)[:, None]
        drop[:, -1] = False          # always keep the most likely token
        logits.masked_fill_(drop.scatter(1, order, drop), float("-inf"))
    if min_p is not None:
        probs = logits.softmax(dim=-1)
        floor = min_p[:, None] * probs.max(dim=-1, keepdim=True).values
        logits.masked_fill_(probs < floor, float("-inf"))
    return logits


@dataclass
class SamplingBatch:
    """Per-row sampling settings for one step, built by the model runner."""
    temperature: torch.Tensor            # [B] float; 0 = greedy
    all_greedy: bool
    top_k: torch.Tensor | None = None
    top_p: torch.Tensor | None = None
    min_p: torch.Tensor | None = None
    generators: list | None = None       # per row: torch.Generator or None


def probabilities(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """The distribution each row samples from: temperature, top-k, top-p, min-p, softmax."""
    temp = batch.temperature.clamp_min(1e-5)[:, None]
    logits = apply_top_k_top_p_min_p(logits / temp, batch.top_k, batch.top_p, batch.min_p)
    return logits.softmax(dim=-1)


def exponential_race(probs: torch.Tensor, generators: list | None,
                     default_generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of `probs`: argmax(p / E) with E ~ Exp(1) (Gumbel-max in disguise)
    draws from p, and lets each row take its noise from its own generator (or the default)."""
    noise = torch.empty_like(probs)
    gens = generators or [None] * probs.shape[0]
    shared = [i for i, g in enumerate(gens) if g is None]
    if shared:
        noise[shared] = torch.empty(len(shared), probs.shape[1], device=probs.device).exponential_(
            generator=default_generator)
    for i, g in enumerate(gens):
        if g is not None:
            noise[i].exponential_(generator=g)
    # Exp(1) can return exactly 0 (about once per 2^24 draws, i.e. often over a whole
    # vocabulary): clamp so that a zero-probability token never wins by 0/0.
    return (probs / noise.clamp_min_(1e-20)).argmax(dim=-1)


def sample(logits: torch.Tensor, batch: SamplingBatch,
           default_generator: torch.Generator | None = None) -> torch.Tensor:
    """Sample one token per row from processed logits (fp32). Returns int64 [B]."""
    greedy = logits.argmax(dim=-1)
    if batch.all_greedy:
        return greedy
    sampled = exponential_race(probabilities(logits, batch), batch.generators, default_generator)
    return torch.where(batch.temperature == 0, greedy, sampled)


def rejection_sample(probs: torch.Tensor, drafts: list[int],
                     generator: torch.Generator) -> tuple[int, int]:
    """Speculative sampling of one sequence's drafts: (how many are accepted, the next token).

    probs: [d + 1, V], the target distribution before each draft and after the last. The
    drafts are deterministic (their proposal puts all its mass on one token), so draft j
    is accepted with probability p_j(t_j); at the first rejection the token is drawn from
    p_j with t_j removed (renormalised), else from p_d after the last draft. The tokens
    so produced are distributed exactly as if drawn one at a time from the target.
    `generator`: the sequence's own, else the engine's.
    """
    d = len(drafts)
    u = torch.rand(d, generator=generator, device=probs.device)
    p_drafts = probs[torch.arange(d, device=probs.device), torch.tensor(drafts, device=probs.device)]
    rejected = (u >= p_drafts).nonzero()
    if rejected.numel() == 0:
        return d, int(exponential_race(probs[d:], [generator]))
    j = int(rejected[0])
    residual = probs[j:j + 1].clone()
    residual[0, drafts[j]] = 0.0
    return j, int(exponential_race(residual, [generator]))
