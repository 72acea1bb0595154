"""Flatten a scheduled batch, run the model once, and sample the next tokens.

One forward per step covers every scheduled sequence: decodes (one token each,
batched in attention) first, then prefill chunks (any length, possibly after
cached context). Logits are computed only at each sequence's last position, and
only for sequences whose whole known token list is now in the cache (a partial
prefill chunk samples nothing); and, for requests that want logprobs, at the
positions before jump-forward tokens (see _forced_rows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import kernels
from ..kernels import reference
from .attention import AttentionMetadata, attention_backend
from .cuda_graphs import DecodeGraphs
from .model import CausalLM
from .sampler import SamplingBatch, apply_penalties, sample
from .sequence import Sequence


@dataclass
class SampleResult:
    seq: Sequence
    token: int | None               # None when the row failed: `error` says why
    logprobs: dict | None = None    # {token_id: logprob} (chosen first), when requested
    error: str | None = None


class ModelRunner:
    def __init__(self, model: CausalLM, num_blocks: int, block_size: int, device, dtype,
                 seed: int = 0, attention: str | None = None, max_batch: int = 1,
                 max_model_len: int = 1, cuda_graphs: bool = True):
        cfg = model.config
        self.model = model
        self.device = torch.device(device)
        self.block_size = block_size
        self.vocab_size = cfg.vocab_size
        # One preallocated tensor for every layer's K and V: [2, layers, blocks, block, kv_heads, dim].
        # torch.empty: on CPU the OS maps pages only as blocks are first written.
        self.kv_cache = torch.empty(2, cfg.num_layers, num_blocks, block_size, cfg.num_kv_heads,
                                    cfg.head_dim, dtype=dtype, device=self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.mask_words = (self.vocab_size + 31) // 32
        self.attention = attention_backend(self.device, attention)
        # The bitmask kernel goes with the attention backend (Triton, or the torch reference).
        self.apply_bitmask = (kernels.apply_token_bitmask_inplace if self.attention.name == "triton"
                              else reference.apply_token_bitmask_inplace)
        # Step inputs go to the GPU from pinned host memory, without blocking the host.
        self.pin = self.device.type == "cuda"
        self.graphs = None
        if cuda_graphs and self.pin and self.attention.name == "triton":
            self.bind_cache()
            self.graphs = DecodeGraphs(model, max_batch, -(-max_model_len // block_size), block_size,
                                       self.device)

    def to_device(self, data, dtype: torch.dtype) -> torch.Tensor:
        """A host list or array as a device tensor; on CUDA through pinned memory, non-blocking."""
        t = torch.as_tensor(data, dtype=dtype)
        if not self.pin:
            return t.to(self.device)
        return t.pin_memory().to(self.device, non_blocking=True)

    # -- inputs -----------------------------------------------------------------------
    def _prepare(self, batch: list[tuple[Sequence, int]]):
        bs = self.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        seq_lens: list[int] = []
        query_lens: list[int] = []
        for seq, n in batch:
            c = seq.num_computed_tokens
            input_ids.extend(seq.token_ids[c:c + n])
            bt = seq.block_table
            for p in range(c, c + n):
                slots.append(bt[p // bs] * bs + p % bs)
            positions.extend(range(c, c + n))
            seq_lens.append(c + n)
            query_lens.append(n)
        max_blocks = max(len(seq.block_table) for seq, _ in batch)
        tables = [seq.block_table + [0] * (max_blocks - len(seq.block_table)) for seq, _ in batch]
        qsl = np.zeros(len(batch) + 1, dtype=np.int32)
        np.cumsum(query_lens, out=qsl[1:])
        meta = AttentionMetadata(
            slot_mapping=self.to_device(slots, torch.int64),
            block_tables=self.to_device(tables, torch.int32),
            seq_lens=self.to_device(seq_lens, torch.int32),
            query_start_loc=self.to_device(qsl, torch.int32),
            num_decodes=sum(1 for q in query_lens if q == 1),   # sorted first by execute()
            seq_lens_host=seq_lens, query_lens_host=query_lens, block_size=bs)
        return (self.to_device(input_ids, torch.int64), self.to_device(positions, torch.int64), meta, qsl)

    # -- one step -----------------------------------------------------------------------
    def bind_cache(self) -> None:
        # Rebound every step: engines may share one model's weights (LLM.with_config).
        for i, layer in enumerate(self.model.layers):
            layer.self_attn.k_cache = self.kv_cache[0, i]
            layer.self_attn.v_cache = self.kv_cache[1, i]
            layer.self_attn.backend = self.attention

    @torch.inference_mode()
    def forward_logits(self, batch: list[tuple[Sequence, int]]) -> tuple[torch.Tensor, list[Sequence]]:
        """Run the forward for `batch`; return fp32 logits for the sequences that reached
        their last known token (a finished prefill or a decode), and those sequences.

        Updates each sequence's `num_computed_tokens`.
        """
        self.bind_cache()
        # Decodes first, so attention can batch them, shortest context first, so that
        # neighbouring decodes (attended together) have similar lengths.
        batch = sorted(batch, key=lambda sn: (sn[1] != 1, sn[0].num_computed_tokens))
        input_ids, positions, meta, qsl = self._prepare(batch)
        if self.graphs is not None and self.graphs.fits(meta, len(input_ids)):
            hidden = self.graphs.run(input_ids, positions, meta)
        else:
            hidden = self.model(input_ids, positions, meta)

        rows, seqs, forced = [], [], []
        for i, (seq, n) in enumerate(batch):
            if seq.logprobs is not None:
                forced.extend(_forced_rows(seq, n, int(qsl[i])))
            seq.num_computed_tokens += n
            if seq.num_computed_tokens == seq.num_tokens:
                rows.append(int(qsl[i + 1]) - 1)
                seqs.append(seq)
        if not seqs and not forced:
            return hidden.new_empty(0, self.vocab_size, dtype=torch.float32), []
        # A decode-only step samples every row: no need to copy them out first.
        if forced or len(rows) < hidden.shape[0]:
            hidden = hidden[rows + [r for _, _, r in forced]]
        logits = self.model.compute_logits(hidden).float()
        if forced:
            lp = torch.log_softmax(logits[len(rows):], dim=-1)
            for (seq, j, _), row in zip(forced, lp):
                seq.logprobs[j] = _logprob_entry(row, seq.token_ids[seq.num_prompt_tokens + j],
                                                 seq.params.logprobs)
            logits = logits[:len(rows)]
        return logits, seqs

    @torch.inference_mode()
    def execute(self, batch: list[tuple[Sequence, int]], eos_ids: set[int]) -> list[SampleResult]:
        """Forward `batch` and sample a token for each sequence that reached its end."""
        logits, seqs = self.forward_logits(batch)
        if not seqs:
            return []
        return self._sample(logits, seqs, eos_ids)

    def _sample(self, logits: torch.Tensor, seqs: list[Sequence], eos_ids: set[int]) -> list[SampleResult]:
        B, V = logits.shape
        dev = logits.device
        # The masks first: on CUDA the forward is still running, and the host's mask work
        # overlaps it; the copy does not wait either.
        # A matcher may be the user's own object: one that raises fails its row alone.
        matched = [i for i, s in enumerate(seqs) if s.matcher is not None]
        faults: dict[int, str] = {}
        if matched:
            mask = np.full((B, self.mask_words), -1, dtype=np.int32)
            for i in matched:
                try:
                    seqs[i].matcher.fill_next_token_bitmask(mask[i])
                except Exception as e:  # noqa: BLE001
                    faults[i] = f"the constraint's mask failed: {type(e).__name__}: {e}"
            mask = self.to_device(mask, torch.int32)
        params = [s.params for s in seqs]
        want_logprobs = [p.logprobs is not None for p in params]
        raw_logprobs = torch.log_softmax(logits, dim=-1) if any(want_logprobs) else None

        if any(p.has_penalties for p in params):
            prompt_mask = torch.zeros(B, V, dtype=torch.bool, device=dev)
            counts = torch.zeros(B, V, dtype=logits.dtype, device=dev)
            for i, s in enumerate(seqs):
                if not s.params.has_penalties:
                    continue
                if s.params.repetition_penalty != 1.0:
                    prompt_mask[i, torch.tensor(s.token_ids[:s.num_prompt_tokens], device=dev)] = True
                out = s.output_token_ids
                if out:
                    idx = torch.tensor(out, device=dev)
                    counts[i].index_add_(0, idx, torch.ones(len(out), device=dev))
            f = lambda attr, d: torch.tensor([getattr(p, attr) for p in params], device=dev,  # noqa: E731
                                             dtype=logits.dtype)
            apply_penalties(logits, prompt_mask, counts, f("repetition_penalty", 1.0),
                            f("presence_penalty", 0.0), f("frequency_penalty", 0.0))

        # min_tokens: no EOS / stop ids yet.
        for i, s in enumerate(seqs):
            if s.params.min_tokens and s.num_output_tokens < s.params.min_tokens:
                banned = set(s.params.stop_token_ids) | (set() if s.params.ignore_eos else eos_ids)
                banned = [t for t in banned if t < V]
                if banned:
                    logits[i, banned] = float("-inf")

        live = None
        if matched:
            self.apply_bitmask(logits, mask, matched if len(matched) < B else None)
            # A row the constraint leaves no token is discarded; zeros keep sampling defined.
            live = torch.isfinite(logits).any(dim=-1)
            logits.masked_fill_(~live[:, None], 0.0)

        try:
            tokens = sample(logits, self._sampling_batch(seqs, logits), self.generator)
        except Exception:  # noqa: BLE001 - find the row at fault: sample each alone (logits are unchanged)
            tokens = torch.zeros(B, dtype=torch.int64, device=dev)
            for i in range(B):
                try:
                    tokens[i:i + 1] = sample(logits[i:i + 1], self._sampling_batch(seqs[i:i + 1], logits),
                                             self.generator)
                except Exception as e:  # noqa: BLE001
                    faults[i] = f"sampling failed: {type(e).__name__}: {e}"
        if live is not None:            # one device-to-host sync for both
            tokens, live = torch.stack([tokens, live.to(tokens.dtype)]).tolist()
            for i, ok in enumerate(live):
                if not ok:
                    faults.setdefault(i, "the constraint allows no token here")
        else:
            tokens = tokens.tolist()

        results = []
        for i, s in enumerate(seqs):
            if i in faults:
                results.append(SampleResult(s, None, error=faults[i]))
                continue
            lp = _logprob_entry(raw_logprobs[i], tokens[i], params[i].logprobs) if want_logprobs[i] else None
            results.append(SampleResult(s, tokens[i], lp))
        return results

    def _sampling_batch(self, seqs: list[Sequence], logits: torch.Tensor) -> SamplingBatch:
        params, V, dev = [s.params for s in seqs], logits.shape[1], logits.device
        temps = [p.temperature for p in params]
        sb = SamplingBatch(temperature=torch.tensor(temps, device=dev, dtype=logits.dtype),
                           all_greedy=all(t == 0 for t in temps))
        if not sb.all_greedy:
            if any(p.top_k > 0 for p in params):
                sb.top_k = torch.tensor([p.top_k if p.top_k > 0 else V for p in params], device=dev)
            if any(p.top_p < 1 for p in params):
                sb.top_p = torch.tensor([p.top_p for p in params], device=dev, dtype=logits.dtype)
            if any(p.min_p > 0 for p in params):
                sb.min_p = torch.tensor([p.min_p for p in params], device=dev, dtype=logits.dtype)
            sb.generators = [s.generator for s in seqs]
        return sb


def _forced_rows(seq: Sequence, n: int, start: int):
    """(seq, output index, flat row) for each jump-forward token of `seq` still without
    logprobs whose predecessor is among this step's n positions (flat rows from `start`).

    A forced token is appended without a forward, so its logprobs come from the one
    that next computes its predecessor's position: an extra LM head row, only for
    requests that asked for logprobs. Forced tokens that end the sequence are never
    followed by a forward and keep None.
    """
    c, p0 = seq.num_computed_tokens, seq.num_prompt_tokens
    for p in range(max(c, p0 - 1), min(c + n, seq.num_tokens - 1)):   # empty for a decode
        if seq.logprobs[p + 1 - p0] is None:
            yield seq, p + 1 - p0, start + p - c


def _logprob_entry(logprobs: torch.Tensor, token: int, k: int | None) -> dict:
    """{token: logprob} for the chosen token first, then the top k (raw model logprobs)."""
    entry = {token: float(logprobs[token])}
    if k:
        top = torch.topk(logprobs, k)
        for tid, val in zip(top.indices.tolist(), top.values.tolist()):
            entry.setdefault(tid, val)
    return entry
