"""Shared helpers for the engine tests (fixtures are module-scoped in each test file)."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

# One thread by default: on a shared 2-core machine, two OpenMP threads per process
# oversubscribe the cores and every op waits at barriers (measured 7x slower here).
torch.set_num_threads(int(os.environ.get("STRUCTGEN_TEST_THREADS", "1")))

# Prompts of quite different lengths; the last two share a long prefix (prefix caching).
LONG = ("You are a careful assistant. Answer briefly and precisely, in plain English, "
        "without lists. The user will ask about geography, arithmetic and poetry; keep "
        "every answer under twenty words and never invent facts you are unsure of. ")
PROMPTS = [
    "The capital of France is",
    "1, 2, 3, 4,",
    "Write a haiku about the sea.\n",
    LONG + "Question: what is the largest ocean?\nAnswer: The largest ocean is",
    LONG + "Question: what is seven times six?\nAnswer: Seven times six is",
]


def hf_greedy(hf_model, tokenizer, prompts, max_new_tokens, **gen_kw):
    """transformers' greedy continuation of each prompt, one at a time (no padding), on
    the model's device."""
    outs = []
    for p in prompts:
        ids = tokenizer(p, return_tensors="pt").input_ids.to(hf_model.device)
        with torch.inference_mode():
            g = hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                  do_sample=False, pad_token_id=tokenizer.eos_token_id, **gen_kw)
        outs.append(g[0, ids.shape[1]:].tolist())
    return outs


class FakeConstraint:
    """Allows any of `allowed` for `length` tokens, then only EOS. Optionally forces
    a fixed token sequence first (to exercise jump-forward)."""

    def __init__(self, allowed, length, eos, vocab_size, forced=()):
        self.allowed, self.length, self.eos, self.vocab_size = list(allowed), length, eos, vocab_size
        self.forced = list(forced)

    def matcher(self):
        return FakeMatcher(self)


class FakeMatcher:
    def __init__(self, c: FakeConstraint):
        self.c = c
        self.accepted: list[int] = []
        self.terminated = False

    def _allowed(self):
        n = len(self.accepted)
        if n < len(self.c.forced):
            return [self.c.forced[n]]
        if n < len(self.c.forced) + self.c.length:
            return self.c.allowed
        return [self.c.eos]

    def accept_token(self, t):
        if self.terminated or t not in self._allowed():
            return False
        if t == self.c.eos:
            self.terminated = True
        self.accepted.append(t)
        return True

    def fill_next_token_bitmask(self, row):
        row = np.asarray(row)
        row[:] = 0
        for t in self._allowed():
            row[t // 32] |= np.int32(np.uint32(1 << (t % 32)).view(np.int32))

    def is_terminated(self):
        return self.terminated

    def rollback(self, n):
        for _ in range(n):
            self.accepted.pop()
        self.terminated = False

    def forced_tokens(self):
        n = len(self.accepted)
        return self.c.forced[n:] if n < len(self.c.forced) else []


@pytest.fixture(scope="session")
def smol_folder():
    from structgen.engine.loader import resolve_model
    try:
        return resolve_model()
    except FileNotFoundError as e:
        pytest.skip(f"embedded model unavailable: {e}")
