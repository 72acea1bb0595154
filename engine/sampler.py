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


def greedy_tokens(logits: torch.Tensor) -> torch.Tensor:
    """Each row's argmax (the first maximum; a NaN counts as the maximum), int64 [B]. On CPU
    in fp32 through numpy, whose argmax over a vocabulary takes a small fraction of torch's."""
    if logits.device.type == "cpu" and logits.dtype == torch.float32:
        return torch.from_numpy(logits.detach().numpy().argmax(axis=-1))
    return logits.argmax(dim=-1)


def sample(logits: torch.Tensor, batch: SamplingBatch,
           default_generator: torch.Generator | None = None) -> torch.Tensor:
    """Sample one token per row from processed logits (fp32). Returns int64 [B]."""
    greedy = greedy_tokens(logits)
    if batch.all_greedy:
        return greedy
    sampled = exponential_race(probabilities(logits, batch), batch.generators, default_generator)
    return torch.where(batch.temperature == 0, greedy, sampled)


def rejection_sample(probs: torch.Tensor, drafts: list[int], generator: torch.Generator,
                     draft_probs: torch.Tensor | None = None) -> tuple[int, int]:
    """Speculative sampling of one sequence's drafts: (how many are accepted, the next token).

    probs: [d + 1, V], the target distribution p_j before each draft and after the last.
    draft_probs: [d, V], the distribution q_j each draft was drawn from (a draft model);
    None for deterministic drafts (n-gram: q_j puts all its mass on t_j). Draft j is
    accepted with probability min(1, p_j(t_j) / q_j(t_j)); at the first rejection the token
    is drawn from max(0, p_j - q_j) renormalised (for a one-hot q: p_j without t_j), else
    from p_d after the last draft. The tokens so produced are distributed exactly as if
    drawn one at a time from the target (Leviathan et al. 2023; Chen et al. 2023).
    `generator`: the sequence's own, else the engine's.
    """
    d = len(drafts)
    dev = probs.device
    u = torch.rand(d, generator=generator, device=dev)
    idx, toks = torch.arange(d, device=dev), torch.tensor(drafts, device=dev)
    p_drafts = probs[idx, toks]
    q_drafts = torch.ones_like(p_drafts) if draft_probs is None else draft_probs[idx, toks]
    rejected = (u * q_drafts >= p_drafts).nonzero()     # u >= p/q without dividing by q
    if rejected.numel() == 0:
        return d, int(exponential_race(probs[d:], [generator]))
    j = int(rejected[0])
    if draft_probs is None:
        residual = probs[j:j + 1].clone()
        residual[0, drafts[j]] = 0.0
    else:
        residual = (probs[j:j + 1] - draft_probs[j:j + 1]).clamp_min_(0.0)
        if not bool(residual.sum() > 0):    # p == q up to rounding: rejection had probability ~0
            residual = probs[j:j + 1]
    return j, int(exponential_race(residual, [generator]))
