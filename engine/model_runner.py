"""Flatten a scheduled batch, run the model once, and sample the next tokens.

One forward per step covers every scheduled sequence: decodes (one token each,
batched in attention) first, then prefill chunks (any length, possibly after
cached context). Logits are computed only at each sequence's last position, and
only for sequences whose whole known token list is now in the cache (a partial
prefill chunk samples nothing); at each speculative draft riding after it (see
speculative.py), to verify them; and, for requests that want logprobs, at the
positions before jump-forward tokens (see _forced_rows) and, with prompt_logprobs, at
prompt positions (_prompt_rows).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .. import kernels
from ..kernels import reference
from .attention import AttentionMetadata, attention_backend
from .cuda_graphs import DecodeGraphs
from .model import CausalLM
from .sampler import SamplingBatch, apply_penalties, greedy_tokens, probabilities, rejection_sample, sample
from .sequence import Sequence


@dataclass
class StepInputs:
    """One forward's inputs, on the host: what rank 0 sends the other tensor-parallel ranks
    (tensor_parallel.py), so that they run the same forward over their own caches."""
    input_ids: list[int]
    positions: list[int]
    slots: list[int]
    block_tables: list[list[int]]
    seq_lens: list[int]
    query_lens: list[int]
    rows: list[int]                 # flat token rows whose logits are wanted; [] for none
    copies: list[tuple[int, int]] = field(default_factory=list)   # (src, dst) blocks to copy first


@dataclass
class SampleResult:
    seq: Sequence
    tokens: list[int]               # accepted drafts, then the sampled token; [] when it failed
    logprobs: list | None = None    # per token {token_id: logprob} (chosen first), when requested
    error: str | None = None        # why it failed


class ModelRunner:
    def __init__(self, model: CausalLM, num_blocks: int, block_size: int, device, dtype,
                 seed: int = 0, attention: str | None = None, max_batch: int = 1,
                 max_model_len: int = 1, cuda_graphs: bool = True, ranks=None):
        cfg = model.config
        self.ranks = ranks              # rank 0 of a tensor-parallel group: its RankGroup
        self.model = model
        self.device = torch.device(device)
        self.block_size = block_size
        self.vocab_size = cfg.vocab_size
        # One preallocated tensor for every layer's K and V: [2, layers, blocks, block, kv_heads, dim].
        # torch.empty: on CPU the OS maps pages only as blocks are first written.
        self.kv_cache = torch.empty(2, cfg.num_layers, num_blocks, block_size, model.num_kv_heads,
                                    cfg.head_dim, dtype=dtype, device=self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.pending_copies: list[tuple[int, int]] = []   # made by the next forward (copy_blocks)
        self.mask_words = (self.vocab_size + 31) // 32
        self.attention = attention_backend(self.device, attention)
        # The bitmask kernel goes with the attention backend (Triton, or the torch reference).
        self.apply_bitmask = (kernels.apply_token_bitmask_inplace if self.attention.name == "triton"
                              else reference.apply_token_bitmask_inplace)
        # Step inputs go to the GPU from pinned host memory, without blocking the host.
        self.pin = self.device.type == "cuda"
        self.graphs = None
        # Not under tensor parallel: its all-reduces were never captured and checked here.
        if cuda_graphs and self.pin and self.attention.name == "triton" and model.shard.size == 1:
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
    def _host_inputs(self, batch: list[tuple[Sequence, int]]) -> StepInputs:
        bs = self.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        seq_lens: list[int] = []
        query_lens: list[int] = []
        for seq, n in batch:
            c = seq.num_computed_tokens
            input_ids.extend(seq.token_ids[c:c + n])
            input_ids.extend(seq.draft_token_ids)     # only where the chunk reaches the end
            bt = seq.block_table
            for p in range(c, c + n):
                slots.append(bt[p // bs] * bs + p % bs)
            positions.extend(range(c, c + n))
            seq_lens.append(c + n)
            query_lens.append(n)
        max_blocks = max(len(seq.block_table) for seq, _ in batch)
        tables = [seq.block_table + [0] * (max_blocks - len(seq.block_table)) for seq, _ in batch]
        copies, self.pending_copies = self.pending_copies, []
        return StepInputs(input_ids, positions, slots, tables, seq_lens, query_lens, [], copies)

    def _prepare(self, inp: StepInputs):
        qsl = np.zeros(len(inp.query_lens) + 1, dtype=np.int32)
        np.cumsum(inp.query_lens, out=qsl[1:])
        meta = AttentionMetadata(
            slot_mapping=self.to_device(inp.slots, torch.int64),
            block_tables=self.to_device(inp.block_tables, torch.int32),
            seq_lens=self.to_device(inp.seq_lens, torch.int32),
            query_start_loc=self.to_device(qsl, torch.int32),
            num_decodes=sum(1 for q in inp.query_lens if q == 1),   # sorted first by forward_logits()
            seq_lens_host=inp.seq_lens, query_lens_host=inp.query_lens, block_size=self.block_size)
        return self.to_device(inp.input_ids, torch.int64), self.to_device(inp.positions, torch.int64), meta

    @torch.inference_mode()
    def run(self, inp: StepInputs) -> torch.Tensor | None:
        """The forward over `inp` (writing the KV cache), and fp32 logits at `inp.rows`
        (None without rows). Every rank of a tensor-parallel group runs it in step."""
        return self._logits_at(self._forward(inp), inp.rows)

    def _forward(self, inp: StepInputs) -> torch.Tensor:
        self._copy_blocks(inp.copies)      # on every rank: each holds its own share of the cache
        self.bind_cache()
        input_ids, positions, meta = self._prepare(inp)
        if self.graphs is not None and self.graphs.fits(meta, len(input_ids)):
            return self.graphs.run(input_ids, positions, meta)
        return self.model(input_ids, positions, meta)

    def _logits_at(self, hidden: torch.Tensor, rows: list[int]) -> torch.Tensor | None:
        if not rows:
            return None
        # A decode-only step samples every row, in order: no need to copy them out first.
        if len(rows) < hidden.shape[0] or rows != list(range(hidden.shape[0])):
            hidden = hidden[rows]
        return self.model.compute_logits(hidden).float()

    # -- one step -----------------------------------------------------------------------
    def copy_blocks(self, copies: list[tuple[int, int]]) -> None:
        """Queue (source, destination) block copies (copy on write: BlockManager.pop_copies);
        the next forward makes them before it writes."""
        self.pending_copies.extend(copies)

    def _copy_blocks(self, copies: list[tuple[int, int]]) -> None:
        """Copy each block's K and V in every layer; all sources are read before any
        destination is written."""
        if copies:
            src, dst = (self.to_device(ids, torch.int64) for ids in zip(*copies))
            self.kv_cache[:, :, dst] = self.kv_cache[:, :, src]

    def bind_cache(self) -> None:
        # Checked every step: engines may share one model's weights (LLM.with_config).
        # Layer 0 tells: all layers are bound together, and a bound view keeps its cache
        # alive, so no other cache can reuse the address.
        first = self.model.layers[0].self_attn
        if (first.backend is self.attention and first.k_cache is not None
                and first.k_cache.data_ptr() == self.kv_cache.data_ptr()):
            return
        for i, layer in enumerate(self.model.layers):
            layer.self_attn.k_cache = self.kv_cache[0, i]
            layer.self_attn.v_cache = self.kv_cache[1, i]
            layer.self_attn.backend = self.attention

    @torch.inference_mode()
    def forward_logits(self, batch: list[tuple[Sequence, int]]) -> tuple[torch.Tensor, list[Sequence]]:
        """Run the forward for `batch`; return fp32 logits for the sequences that reached
        their last known token (a finished prefill or a decode), and those sequences: one
        row each, at its last token, then one per draft (`seq.draft_token_ids`) it carries.

        Updates each sequence's `num_computed_tokens` (drafts are not counted: see
        Speculator.accept).
        """
        # Decodes first, so attention can batch them, shortest context first, so that
        # neighbouring decodes (attended together) have similar lengths.
        batch = sorted(batch, key=lambda sn: (sn[1] != 1, sn[0].num_computed_tokens))
        inp = self._host_inputs(batch)
        # On one device the forward goes first: on CUDA the host work below overlaps it.
        # Under tensor parallel the other ranks need the rows with the inputs.
        hidden = self._forward(inp) if self.ranks is None else None
        qsl = np.zeros(len(batch) + 1, dtype=np.int64)
        np.cumsum(inp.query_lens, out=qsl[1:])
        rows, seqs, forced = [], [], []
        for i, (seq, n) in enumerate(batch):
            n -= len(seq.draft_token_ids)        # the chunk's own tokens; drafts end it
            if seq.logprobs is not None:
                forced.extend(_forced_rows(seq, n, int(qsl[i])))
            if seq.prompt_logprobs is not None:
                forced.extend(_prompt_rows(seq, n, int(qsl[i])))
            seq.num_computed_tokens += n
            if seq.num_computed_tokens == seq.num_tokens:
                end = int(qsl[i + 1])
                rows.extend(range(end - 1 - len(seq.draft_token_ids), end))
                seqs.append(seq)
        inp.rows = rows + [r for *_, r in forced]
        if hidden is None:
            logits = self.ranks.run(inp, self.run)
        else:
            logits = self._logits_at(hidden, inp.rows)
        if logits is None:
            return torch.empty(0, self.vocab_size, dtype=torch.float32, device=self.device), []
        if forced:
            lp = torch.log_softmax(logits[len(rows):], dim=-1)
            for (entries, j, token, k, _), row in zip(forced, lp):
                entries[j] = _logprob_entry(row, token, k)
            logits = logits[:len(rows)]
        return logits, seqs

    @torch.inference_mode()
    def execute(self, batch: list[tuple[Sequence, int]], eos_ids: set[int]) -> list[SampleResult]:
        """Forward `batch` and sample a token for each sequence that reached its end (after
        the drafts it accepts, if it carries any)."""
        logits, seqs = self.forward_logits(batch)
        if not seqs:
            return []
        return self._sample(logits, seqs, eos_ids)

    def _sample(self, logits: torch.Tensor, seqs: list[Sequence], eos_ids: set[int]) -> list[SampleResult]:
        # One row per position sampled from: a sequence's last token, then each draft.
        # Row (seq, j) sees the sequence's tokens followed by its first j drafts.
        rows = [(s, j) for s in seqs for j in range(len(s.draft_token_ids) + 1)]
        B, V = logits.shape
        # The masks first: on CUDA the forward is still running, and the host's mask work
        # overlaps it; the copy does not wait either.
        faults: dict[int, str] = {}          # row -> why it failed
        mask, matched = self._masks(rows, faults)
        params = [s.params for s, _ in rows]
        want_logprobs = [s.logprobs is not None for s, _ in rows]
        raw_logprobs = torch.log_softmax(logits, dim=-1) if any(want_logprobs) else None

        if any(p.has_penalties for p in params):
            self._penalise(logits, rows)
        # min_tokens: no EOS / stop ids yet.
        for i, (s, j) in enumerate(rows):
            if s.params.min_tokens and s.num_output_tokens + j < s.params.min_tokens:
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

        # Rows drawn one token each: all but those of sampled requests with drafts, which
        # rejection sampling settles (_verify).
        drawn = [i for i, (s, _) in enumerate(rows) if s.params.greedy or not s.draft_token_ids]
        if len(drawn) == B:
            tokens = self._draw(logits, [s for s, _ in rows], faults, drawn)
        else:
            tokens = torch.zeros(B, dtype=torch.int64, device=logits.device)
            if drawn:
                tokens[drawn] = self._draw(logits[drawn], [rows[i][0] for i in drawn], faults, drawn)
        if live is not None:            # one device-to-host sync for both
            tokens, live = torch.stack([tokens, live.to(tokens.dtype)]).tolist()
            for i, ok in enumerate(live):
                if not ok:
                    faults.setdefault(i, "the constraint allows no token here")
        else:
            tokens = tokens.tolist()

        results, start = [], 0
        for s in seqs:
            d = len(s.draft_token_ids)
            result = self._verify(s, logits[start:start + d + 1], tokens[start:start + d + 1],
                                  faults, start)
            if result.error is None and want_logprobs[start]:
                result.logprobs = [_logprob_entry(raw_logprobs[start + j], t, s.params.logprobs)
                                   for j, t in enumerate(result.tokens)]
            results.append(result)
            start += d + 1
        return results

    def _masks(self, rows: list[tuple[Sequence, int]], faults: dict[int, str]):
        """The constrained rows' bitmasks, on the device, and those rows' indices. A row with
        drafts takes the masks the speculator kept; a matcher (possibly the user's own
        object) that raises fails its row alone."""
        matched = [i for i, (s, _) in enumerate(rows) if s.matcher is not None]
        if not matched:
            return None, matched
        mask = np.full((len(rows), self.mask_words), -1, dtype=np.int32)
        for i in matched:
            s, j = rows[i]
            if s.draft_masks is not None:
                mask[i] = s.draft_masks[j]
                continue
            try:
                s.matcher.fill_next_token_bitmask(mask[i])
            except Exception as e:  # noqa: BLE001
                faults[i] = f"the constraint's mask failed: {type(e).__name__}: {e}"
        return self.to_device(mask, torch.int32), matched

    def _penalise(self, logits: torch.Tensor, rows: list[tuple[Sequence, int]]) -> None:
        B, V = logits.shape
        dev = logits.device
        prompt_mask = torch.zeros(B, V, dtype=torch.bool, device=dev)
        counts = torch.zeros(B, V, dtype=logits.dtype, device=dev)
        for i, (s, j) in enumerate(rows):
            if not s.params.has_penalties:
                continue
            if s.params.repetition_penalty != 1.0:
                prompt_mask[i, torch.tensor(s.token_ids[:s.num_prompt_tokens], device=dev)] = True
            out = s.output_token_ids + s.draft_token_ids[:j]
            if out:
                idx = torch.tensor(out, device=dev)
                counts[i].index_add_(0, idx, torch.ones(len(out), device=dev))
        params = [s.params for s, _ in rows]
        f = lambda attr: torch.tensor([getattr(p, attr) for p in params], device=dev,  # noqa: E731
                                      dtype=logits.dtype)
        apply_penalties(logits, prompt_mask, counts, f("repetition_penalty"), f("presence_penalty"),
                        f("frequency_penalty"))

    def _draw(self, logits: torch.Tensor, seqs: list[Sequence], faults: dict[int, str],
              row_ids: list[int]) -> torch.Tensor:
        """One token per row; if the batched draw raises, each row is drawn alone to find the
        one at fault (the logits are unchanged by then), recorded under its id in row_ids."""
        if all(s.params.greedy for s in seqs):    # no sampling settings to build
            return greedy_tokens(logits)
        try:
            return sample(logits, self.sampling_batch(seqs, logits), self.generator)
        except Exception:  # noqa: BLE001
            tokens = torch.zeros(len(seqs), dtype=torch.int64, device=logits.device)
            for i in range(len(seqs)):
                try:
                    tokens[i:i + 1] = sample(logits[i:i + 1], self.sampling_batch(seqs[i:i + 1], logits),
                                             self.generator)
                except Exception as e:  # noqa: BLE001
                    faults[row_ids[i]] = f"sampling failed: {type(e).__name__}: {e}"
            return tokens

    def _verify(self, seq: Sequence, logits: torch.Tensor, tokens: list[int], faults: dict[int, str],
                start: int) -> SampleResult:
        """Settle one sequence's rows (its last token's, then one per draft, from `start`):
        the accepted drafts and the token after them.

        Greedy: drafts are accepted while each equals the argmax before it, and the argmax
        after the last accepted one follows: exactly what decoding one token at a time
        gives. Sampled: rejection sampling (sampler.rejection_sample). A fault in any row
        used fails the sequence; rows after the first rejection are ignored.
        """
        drafts = seq.draft_token_ids
        if drafts and not seq.params.greedy:
            try:
                probs = probabilities(logits, self.sampling_batch([seq] * len(tokens), logits))
                a, token = rejection_sample(probs, drafts, seq.generator or self.generator, seq.draft_probs)
            except Exception as e:  # noqa: BLE001
                return SampleResult(seq, [], error=f"sampling failed: {type(e).__name__}: {e}")
        else:
            a = 0
            while a < len(drafts) and tokens[a] == drafts[a]:
                a += 1
            token = tokens[a]
        for j in range(a + 1):
            if start + j in faults:
                return SampleResult(seq, [], error=faults[start + j])
        return SampleResult(seq, drafts[:a] + [token])

    def sampling_batch(self, seqs: list[Sequence], logits: torch.Tensor) -> SamplingBatch:
        """The sampling parameters of `seqs`, one row each, as tensors on the logits' device
        (also the draft model's, for its own draws)."""
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
    """(seq.logprobs, output index, token, top k, flat row) for each jump-forward token of `seq` still without
    logprobs whose predecessor is among this step's n positions (flat rows from `start`).

    A forced token is appended without a forward, so its logprobs come from the one
    that next computes its predecessor's position: an extra LM head row, only for
    requests that asked for logprobs. Forced tokens that end the sequence are never
    followed by a forward and keep None.
    """
    c, p0 = seq.num_computed_tokens, seq.num_prompt_tokens
    for p in range(max(c, p0 - 1), min(c + n, seq.num_tokens - 1)):   # empty for a decode
        if seq.logprobs[p + 1 - p0] is None:
            yield seq.logprobs, p + 1 - p0, seq.token_ids[p + 1], seq.params.logprobs, start + p - c


def _prompt_rows(seq: Sequence, n: int, start: int):
    """Like _forced_rows, for prompt_logprobs: each prompt token after the first whose
    predecessor is among this step's n positions and has no entry yet (a preempted
    sequence recomputes its prompt but keeps the entries it has)."""
    c = seq.num_computed_tokens
    for p in range(c, min(c + n, seq.num_prompt_tokens - 1)):
        if seq.prompt_logprobs[p + 1] is None:
            yield seq.prompt_logprobs, p + 1, seq.token_ids[p + 1], seq.params.prompt_logprobs, start + p - c


def _logprob_entry(logprobs: torch.Tensor, token: int, k: int | None) -> dict:
    """{token: logprob} for the chosen token first, then the top k (raw model logprobs)."""
    entry = {token: float(logprobs[token])}
    if k:
        top = torch.topk(logprobs, k)
        for tid, val in zip(top.indices.tolist(), top.values.tolist()):
            entry.setdefault(tid, val)
    return entry
