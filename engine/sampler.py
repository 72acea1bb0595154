"""Turn a batch of logits into next tokens: penalties, constraint mask, temperature,
top-k, top-p, min-p, then greedy or seeded sampling.

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


def sample(logits: torch.Tensor, batch: SamplingBatch,
           default_generator: torch.Generator | None = None) -> torch.Tensor:
    """Sample one token per row from processed logits (fp32). Returns int64 [B]."""
    greedy = logits.argmax(dim=-1)
    if batch.all_greedy:
        return greedy
    temp = batch.temperature.clamp_min(1e-5)[:, None]
    logits = logits / temp
    logits = apply_top_k_top_p_min_p(logits, batch.top_k, batch.top_p, batch.min_p)
    probs = logits.softmax(dim=-1)
    # Exponential race (Gumbel-max in disguise): argmax(p / E) with E ~ Exp(1) draws
    # from p, and lets each row take its noise from its own generator.
    noise = torch.empty_like(probs)
    gens = batch.generators or [None] * probs.shape[0]
    shared = [i for i, g in enumerate(gens) if g is None]
    if shared:
        noise[shared] = torch.empty(len(shared), probs.shape[1], device=probs.device).exponential_(
            generator=default_generator)
    for i, g in enumerate(gens):
        if g is not None:
            noise[i].exponential_(generator=g)
    # Exp(1) can return exactly 0 (about once per 2^24 draws, i.e. often over a whole
    # vocabulary): clamp so that a zero-probability token never wins by 0/0.
    sampled = (probs / noise.clamp_min_(1e-20)).argmax(dim=-1)
    return torch.where(batch.temperature == 0, greedy, sampled)
