"""A transformers logits processor that enforces a compiled constraint.

    >>> proc = ConstraintLogitsProcessor(fsm.compile_regex(r"\\d+", vocab))   # doctest: +SKIP
    >>> hf_model.generate(**inputs, logits_processor=[proc], max_new_tokens=8)  # doctest: +SKIP

Works with batches, left padding, sampling and beam search: each row's matcher is
found from its generated tokens (beams reorder rows between steps), so nothing
assumes row i stays row i. Use one processor per `generate` call.
"""
from __future__ import annotations

import numpy as np
import torch

from ..kernels import apply_token_bitmask_inplace


class ConstraintLogitsProcessor:
    def __init__(self, constraint):
        self.constraint = constraint.require_output()  # (fsm.ConstraintError where none can begin)
        self.reset()

    def reset(self) -> None:
        self._prompt_len: int | None = None
        self._matchers: dict[tuple, object] = {(): self.constraint.matcher()}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._prompt_len is None:
            self._prompt_len = input_ids.shape[1]
        vocab = self.constraint.vocab
        bitmask = np.zeros((input_ids.shape[0], vocab.num_words), dtype=np.int32)
        generated = input_ids[:, self._prompt_len:].tolist()
        live: dict[tuple, object] = {}
        for row, tokens in enumerate(generated):
            key = tuple(tokens)
            m = self._matchers.get(key) or live.get(key)
            if m is None:
                parent = self._matchers[key[:-1]]
                m = parent.copy()
                # After EOS transformers pads finished rows: the copy stays terminated.
                if not m.accept_token(key[-1]) and not parent.is_terminated():
                    raise RuntimeError(
                        f"token {key[-1]} was generated although the constraint forbids it: "
                        "a logits processor or warper that runs after this one re-enabled it")
            live[key] = m
            m.fill_next_token_bitmask(bitmask[row])
        self._matchers = live  # only the current beams can be parents next step
        apply_token_bitmask_inplace(scores, torch.from_numpy(bitmask).to(scores.device))
        return scores
