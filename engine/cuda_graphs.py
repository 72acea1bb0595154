"""Decode steps replayed from CUDA graphs, one per batch-size bucket (as nano-vllm does).

A decode step launches hundreds of small kernels; replaying a captured graph costs one
launch. Graphs read from static input tensors: a step of n decodes is copied into the
first n rows of the smallest bucket >= n, and the spare rows are inert (slot -1: nothing
stored; context length 0: nothing read). Prefill steps and batches above the largest
bucket run eagerly. Only the Triton backend is captured: it never reads the metadata's
host lists, which a graph would freeze.

With `capture=False` the same padded static path runs eagerly: how CPU tests check the
padding without a GPU.
"""
from __future__ import annotations

import torch

from .attention import AttentionMetadata


def buckets(max_batch: int) -> list[int]:
    """>>> buckets(40)
    [1, 2, 4, 8, 16, 32, 40]
    """
    sizes = [b for b in (1, 2, 4, 8) if b < max_batch] + list(range(16, max_batch, 16))
    return sizes + [max_batch]


class DecodeGraphs:
    def __init__(self, model, max_batch: int, max_blocks: int, block_size: int, device,
                 capture: bool = True):
        self.model, self.block_size = model, block_size
        self.sizes = buckets(max_batch)
        n = self.sizes[-1]
        i32, i64 = dict(dtype=torch.int32, device=device), dict(dtype=torch.int64, device=device)
        self.input_ids = torch.zeros(n, **i64)
        self.positions = torch.zeros(n, **i64)
        self.slot_mapping = torch.full((n,), -1, **i64)
        self.seq_lens = torch.zeros(n, **i32)
        self.block_tables = torch.zeros(n, max_blocks, **i32)
        self.query_start_loc = torch.arange(n + 1, **i32)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        if capture:
            self._capture()

    def _meta(self, bs: int) -> AttentionMetadata:
        return AttentionMetadata(slot_mapping=self.slot_mapping[:bs], block_tables=self.block_tables[:bs],
                                 seq_lens=self.seq_lens[:bs], query_start_loc=self.query_start_loc[:bs + 1],
                                 num_decodes=bs, seq_lens_host=None, query_lens_host=None,
                                 block_size=self.block_size)

    def _forward(self, bs: int) -> torch.Tensor:
        return self.model(self.input_ids[:bs], self.positions[:bs], self._meta(bs))

    @torch.inference_mode()
    def _capture(self) -> None:
        pool = None
        for bs in reversed(self.sizes):           # largest first: the others reuse its pool
            self._forward(bs)                      # warm up (Triton compiles, allocator settles)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.outputs[bs] = self._forward(bs)
            pool = graph.pool()
            self.graphs[bs] = graph
        torch.cuda.synchronize()

    def fits(self, meta: AttentionMetadata, num_tokens: int) -> bool:
        """A decode-only step of at most the largest bucket, within the captured width."""
        return (meta.num_decodes == num_tokens <= self.sizes[-1]
                and meta.block_tables.shape[1] <= self.block_tables.shape[1])

    def run(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """Hidden states [n, hidden] of a decode-only step (`fits` must hold)."""
        n = input_ids.shape[0]
        bs = next(b for b in self.sizes if b >= n)
        width = meta.block_tables.shape[1]
        self.input_ids[:n].copy_(input_ids)
        self.positions[:n].copy_(positions)
        self.slot_mapping[:n].copy_(meta.slot_mapping)
        self.slot_mapping[n:bs].fill_(-1)
        self.seq_lens[:n].copy_(meta.seq_lens)
        self.seq_lens[n:bs].fill_(0)
        self.block_tables[:n, :width].copy_(meta.block_tables)
        if bs in self.graphs:
            self.graphs[bs].replay()
            return self.outputs[bs][:n]
        with torch.inference_mode():
            return self._forward(bs)[:n]
