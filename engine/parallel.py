"""Tensor-parallel layer math: which slice of each weight a rank holds, and the collectives
that put the slices back together (Megatron's split, as vLLM and nano-vllm do it).

Attention heads and KV heads split across ranks: the fused QKV projection is
column-parallel (each rank computes its heads' q, k and v), the output projection
row-parallel (each rank multiplies its heads' part; an all-reduce sums them). The MLP's
fused gate/up is column-parallel, its down projection row-parallel. The embedding and
LM head split the vocabulary: each rank embeds the ids in its range (an all-reduce adds
the ranks' rows, zeros elsewhere) and computes the logits of its range (an all-gather
joins them). The vocabulary is padded up to a multiple of the size with zero rows, cut
off again after the gather.

`Shard()` (rank 0 of 1) is the single-device model: every split is the whole and every
collective a no-op. The processes and the step protocol are in tensor_parallel.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Shard:
    """This process's place in the tensor-parallel group, and the group (a torch.distributed
    process group of its own, not the default one: see tensor_parallel.py)."""
    rank: int = 0
    size: int = 1
    group: object = field(default=None, compare=False, repr=False)

    def part(self, n: int, what: str) -> int:
        """n split evenly across the ranks; a clear error where it does not divide.

        >>> Shard(1, 2).part(8, "heads")
        4
        """
        if n % self.size:
            raise ValueError(f"tensor_parallel_size={self.size} must divide the model's {what} ({n})")
        return n // self.size

    def check(self, cfg) -> None:
        """Raise before any rank starts if a model's heads or MLP do not split evenly."""
        self.part(cfg.num_heads, "attention heads")
        self.part(cfg.num_kv_heads, "KV heads")
        self.part(cfg.intermediate_size, "intermediate size")

    def vocab_part(self, vocab: int) -> int:
        """Rows of the embedding / LM head per rank: the vocabulary padded to a multiple
        of the size, split evenly."""
        return -(-vocab // self.size)

    def rows(self, tensor: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """This rank's slice of a full weight along `dim` (zero-padded to a multiple of the
        size, for the vocabulary)."""
        if self.size == 1:
            return tensor
        n = tensor.shape[dim]
        part = -(-n // self.size)
        start = self.rank * part
        piece = tensor.narrow(dim, min(start, n), max(0, min(part, n - start)))
        if piece.shape[dim] < part:
            pad = list(tensor.shape)
            pad[dim] = part - piece.shape[dim]
            piece = torch.cat([piece, tensor.new_zeros(pad)], dim=dim)
        return piece

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        if self.size > 1:
            self.group.allreduce([x]).wait()
        return x

    def embed(self, embedding: torch.nn.Embedding, ids: torch.Tensor, vocab: int) -> torch.Tensor:
        """Vocabulary-parallel embedding: each rank looks up the ids in its range."""
        if self.size == 1:
            return embedding(ids)
        part = self.vocab_part(vocab)
        local = ids - self.rank * part
        outside = (local < 0) | (local >= part)
        h = embedding(local.masked_fill(outside, 0))
        h.masked_fill_(outside[:, None], 0.0)
        return self.all_reduce(h)

    def gather_logits(self, logits: torch.Tensor, vocab: int) -> torch.Tensor:
        """Every rank's vocabulary slice of the logits, joined ([T, vocab])."""
        if self.size == 1:
            return logits
        parts = [torch.empty_like(logits) for _ in range(self.size)]
        self.group.allgather([parts], [logits.contiguous()]).wait()
        return torch.cat(parts, dim=-1)[:, :vocab]


SINGLE = Shard()
