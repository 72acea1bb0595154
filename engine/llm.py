"""The offline API: `LLM(model).generate(prompts, params)`."""
from __future__ import annotations

import itertools
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from ..fsm.core.terms import freeze_long_lived
from . import detokenizer
from .beam_search import BeamSearch, BeamSearchOutput
from .block_manager import BlockManager
from .config import EngineConfig, available_memory_bytes
from .constraints import ConstraintCompiler, ConstraintError
from .loader import resolve_model
from .model import ModelConfig, load_model
from .model_runner import ModelRunner
from .parallel import Shard
from .sampling_params import BeamSearchParams, SamplingParams
from .scheduler import Scheduler
from .sequence import Sequence, SequenceStatus
from .speculative import Speculator

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


@dataclass
class CompletionOutput:
    """One sample of a request."""
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None          # "stop" | "length" | "constraint" | "error"
    stop_reason: object = None         # the stop string / token id that ended it
    logprobs: list | None = None       # per token {id: logprob}; None for jump-forward
                                       # tokens that ended the sequence (no forward after them)
    error: str | None = None
    cumulative_logprob: float | None = None   # sum of the sampled tokens' logprobs, where tracked


@dataclass
class RequestOutput:
    """What `generate` returns per prompt; `.text` etc. are the first sample's.

    >>> out = llm.generate("Hi", SamplingParams(max_tokens=4))[0]   # doctest: +SKIP
    >>> out.text, out.finish_reason                                  # doctest: +SKIP
    (' there!', 'length')
    """
    request_id: int
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    num_cached_tokens: int = 0
    prompt_logprobs: list | None = None    # SamplingParams.prompt_logprobs: [None, {id: logprob}, ...]

    @property
    def text(self) -> str:
        return self.outputs[0].text

    @property
    def token_ids(self) -> list[int]:
        return self.outputs[0].token_ids

    @property
    def finish_reason(self) -> str | None:
        return self.outputs[0].finish_reason

    @property
    def logprobs(self):
        return self.outputs[0].logprobs

    @property
    def error(self):
        return self.outputs[0].error


class LLM:
    """A batched decode engine over a paged KV cache.

    `model`: None or "smollm2" (the embedded SmolLM2-135M-Instruct), a Hugging Face
    folder, or a .gguf file. `weights`: (name, tensor) pairs in transformers' naming, in
    place of the folder's safetensors (the folder still gives config and tokenizer).
    Keyword arguments are `EngineConfig` fields. Creating one
    calls gc.freeze() once loaded (process-wide: objects alive then are never scanned
    by the cyclic collector again; see the comment in __init__; STRUCTGEN_GC_FREEZE=0
    turns it off).

    >>> llm = LLM(max_num_seqs=16)                                          # doctest: +SKIP
    >>> outs = llm.generate(["The capital of France is"], SamplingParams(max_tokens=8))  # doctest: +SKIP
    >>> outs[0].text                                                         # doctest: +SKIP
    ' Paris.'
    """

    def __init__(self, model=None, tokenizer=None, *, weights=None, _shared=None, **config):
        self.config = cfg = EngineConfig(**config)
        self._ranks = None             # tensor parallel: the other ranks (tensor_parallel.py)
        if _shared is not None:          # with_config(): same weights, fresh cache and queues
            self.folder, tokenizer, self.device, self.dtype, self.model_config, self.model = _shared
        else:
            self.folder = resolve_model(model)
            self.device = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
            if cfg.dtype is None:
                self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
            else:
                self.dtype = _DTYPES[cfg.dtype] if isinstance(cfg.dtype, str) else cfg.dtype
            self.model_config = ModelConfig.from_folder(self.folder)
            shard = Shard(0, cfg.tensor_parallel_size)
            if shard.size > 1:
                from .tensor_parallel import RankGroup
                shard.check(self.model_config)
                weights = None if weights is None else list(weights)
                self._ranks = RankGroup(shard.size, self.folder, self.model_config, weights, self.dtype,
                                        self.device, cfg.distributed_timeout_s)
                shard = self._ranks.shard
            try:
                self.model = load_model(self.folder, self.dtype, self.device, self.model_config, weights, shard)
            except BaseException:
                self.close()
                raise
        if tokenizer is None:
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained(self.folder)
        self.tokenizer = tokenizer
        mcfg = self.model_config
        self.max_model_len = min(cfg.max_model_len or min(mcfg.max_position_embeddings, 8192),
                                 mcfg.max_position_embeddings)
        num_blocks = self._num_kv_blocks()
        fits = num_blocks * cfg.block_size
        if fits < self.max_model_len:     # one full-length sequence must fit, or it would fail mid-request
            if cfg.max_model_len is not None:
                raise ValueError(f"the KV cache holds {num_blocks} blocks of {cfg.block_size} tokens "
                                 f"({fits} tokens), less than max_model_len={cfg.max_model_len}: raise "
                                 "kv_cache_bytes / kv_cache_fraction / num_kv_blocks or lower max_model_len")
            warnings.warn(f"max_model_len lowered from {self.max_model_len} to {fits}: the KV cache holds "
                          f"only {num_blocks} blocks of {cfg.block_size} tokens", stacklevel=2)
            self.max_model_len = fits
        self.block_manager = BlockManager(num_blocks, cfg.block_size, cfg.enable_prefix_caching)
        self.scheduler = Scheduler(cfg, self.block_manager)
        runner_kwargs = dict(num_blocks=num_blocks, block_size=cfg.block_size, seed=cfg.seed,
                             attention=cfg.attention_backend, max_batch=min(cfg.max_num_seqs, 512),
                             max_model_len=self.max_model_len)
        if self._ranks is not None:
            self._ranks.start_runners(**runner_kwargs)
        self.runner = ModelRunner(self.model, device=self.device, dtype=self.dtype,
                                  cuda_graphs=not cfg.enforce_eager, ranks=self._ranks, **runner_kwargs)
        self.eos_token_ids = set(mcfg.eos_token_ids)
        if getattr(tokenizer, "eos_token_id", None) is not None:
            self.eos_token_ids.add(tokenizer.eos_token_id)
        self.constraints = ConstraintCompiler(tokenizer, mcfg.vocab_size)
        self.speculator = None
        if cfg.speculative_config is not None:
            self.speculator = Speculator(cfg.speculative_config, self.block_manager, cfg.max_num_batched_tokens,
                                         self.max_model_len, self.runner.mask_words, self.eos_token_ids,
                                         self._draft_model(num_blocks))
        self._seq_ids = itertools.count()
        self._request_ids = itertools.count()
        self.stats = {"prefill_tokens": 0, "decode_tokens": 0, "steps": 0, "forced_tokens": 0}
        # One generation at a time: a second caller of generate() waits for the lock
        # (the step loop's state is not shared safely); an AsyncEngine takes it per step.
        self._lock = threading.RLock()
        self._engine = None            # the AsyncEngine driving this LLM, if any
        # What is alive now (torch, transformers, the weights' Python objects) is moved
        # out of the cyclic collector's reach, as vLLM does after loading: its full
        # collections would otherwise rescan them all, inside some decoding step, while
        # constraints build their caches.
        freeze_long_lived(collect=True)

    def with_config(self, **overrides) -> LLM:
        """A new engine on the same weights and tokenizer, with some config changed.

        The two must not generate at the same time (they share the model's modules).

        >>> small = llm.with_config(num_kv_blocks=16, enable_prefix_caching=False)  # doctest: +SKIP
        """
        from dataclasses import asdict
        if self._ranks is not None:
            raise NotImplementedError("with_config() with tensor_parallel_size > 1: the other ranks hold "
                                      "their own weights; create a new LLM instead")
        cfg = {**asdict(self.config), **overrides}
        return LLM(_shared=(self.folder, self.tokenizer, self.device, self.dtype,
                            self.model_config, self.model), **cfg)

    def _draft_model(self, num_blocks: int):
        """The draft model of speculative_config.method="draft_model" (engine/draft_model.py):
        its own cache of speculative_config.num_kv_blocks blocks, or as many as the target's."""
        spec, cfg = self.config.speculative_config, self.config
        if spec.method != "draft_model":
            return None
        if spec.num_kv_blocks is not None:
            # A smaller draft cache only skips drafting when full, but one sequence of
            # max_model_len must fit, or it could never be drafted for.
            need = -(-self.max_model_len // cfg.block_size)
            if spec.num_kv_blocks < need:
                raise ValueError(f"speculative_config.num_kv_blocks={spec.num_kv_blocks} must be an integer "
                                 f">= {need}: the blocks of {cfg.block_size} tokens one sequence of "
                                 f"max_model_len={self.max_model_len} needs in the draft cache")
            num_blocks = spec.num_kv_blocks
        from .draft_model import DraftModel
        return DraftModel(spec.model, self.folder, self.model_config, self.tokenizer, num_blocks=num_blocks,
                          block_size=cfg.block_size, device=self.device, dtype=self.dtype, seed=cfg.seed,
                          attention=cfg.attention_backend, max_batch=min(cfg.max_num_seqs, 512),
                          max_model_len=self.max_model_len, max_num_batched_tokens=cfg.max_num_batched_tokens)

    def _num_kv_blocks(self) -> int:
        cfg, m = self.config, self.model_config
        # Per rank: each holds the KV of its own heads.
        per_block = (2 * m.num_layers * cfg.block_size * self.model.num_kv_heads * m.head_dim
                     * torch.empty((), dtype=self.dtype).element_size())
        # No point in more blocks than max_num_seqs full-length sequences need.
        cap = cfg.max_num_seqs * (-(-self.max_model_len // cfg.block_size)) + 1
        if cfg.num_kv_blocks is not None:
            return cfg.num_kv_blocks
        budget = cfg.kv_cache_bytes
        if budget is None:
            budget = int(available_memory_bytes(self.device) * cfg.kv_cache_fraction)
        n = min(budget // per_block, cap)
        if n < 1:
            raise ValueError(f"KV budget of {budget} bytes is under one block ({per_block} bytes)")
        return int(n)

    # -- requests --------------------------------------------------------------------------
    def _add_request(self, prompt, params: SamplingParams,
                     queue: bool = True) -> tuple[RequestOutput, list[Sequence]]:
        text = None
        if isinstance(prompt, str):
            text = prompt
            prompt_ids = list(self.tokenizer(prompt).input_ids)
        else:
            prompt_ids = [int(t) for t in prompt]
        rid = next(self._request_ids)
        out = RequestOutput(rid, text, prompt_ids)
        error = None
        compiled = None
        if not prompt_ids:
            error = "empty prompt"
        elif len(prompt_ids) >= self.max_model_len:
            error = f"prompt of {len(prompt_ids)} tokens reaches max_model_len={self.max_model_len}"
        elif (not self.config.enable_chunked_prefill
              and len(prompt_ids) > self.config.max_num_batched_tokens):
            error = (f"prompt of {len(prompt_ids)} tokens exceeds max_num_batched_tokens="
                     f"{self.config.max_num_batched_tokens} and chunked prefill is off")
        elif any(t < 0 or t >= self.model_config.vocab_size for t in prompt_ids):
            error = "prompt token id out of range"
        if error is None and params.constraint is not None:
            try:
                compiled = self.constraints.get(params.constraint)
            except ConstraintError as e:
                error = str(e)
            except Exception as e:  # noqa: BLE001 - a compiler bug fails this request, not the batch
                error = f"the constraint failed to compile: {type(e).__name__}: {e}"
        seqs = []
        for i in range(params.best_of or params.n):
            seq = Sequence(next(self._seq_ids), rid, i, list(prompt_ids), len(prompt_ids), params)
            # best_of ranks samples by their logprobs: tracked even where not asked for.
            seq.logprobs = [] if params.logprobs is not None or _ranks(params) else None
            if params.prompt_logprobs is not None and i == 0:   # one sample computes them
                seq.prompt_logprobs = [None] * len(prompt_ids)
            detokenizer.start(seq)
            if error is None and compiled is not None:
                try:
                    seq.matcher = compiled.matcher()
                except Exception as e:  # noqa: BLE001 - a broken constraint fails its request only
                    error = f"cannot create matcher: {type(e).__name__}: {e}"
            if params.seed is not None:
                seq.generator = torch.Generator(device=self.device).manual_seed(params.seed + i)
            seqs.append(seq)
        for seq in seqs:
            if error is not None:
                seq.status = SequenceStatus.FINISHED
                seq.finish_reason, seq.error = "error", error
                seq.prompt_logprobs = None       # never computed: none rather than all None
            elif queue:                 # (beam search queues its own: engine.beam_search)
                self.scheduler.add(seq)
        return out, seqs

    # -- the loop ------------------------------------------------------------------------
    def step(self) -> list[Sequence]:
        """Schedule, run one forward, sample and post-process. Returns sequences that finished."""
        batch = self.scheduler.schedule()
        self.runner.copy_blocks(self.block_manager.pop_copies())
        finished = list(self.scheduler.failed)
        self.scheduler.failed.clear()
        if not batch:
            return finished
        self.stats["steps"] += 1
        for _seq, n in batch:
            self.stats["prefill_tokens" if n > 1 else "decode_tokens"] += n
        try:
            draft_faults = self.speculator.draft(batch) if self.speculator is not None else {}
            results = self.runner.execute(batch, self.eos_token_ids)
            for r in results:
                self._settle(r, draft_faults.get(r.seq))
                if r.seq.finish_reason is not None:
                    finished.append(r.seq)
        finally:
            if self.speculator is not None:
                self.speculator.clear(batch)
        return finished

    def _settle(self, r, draft_fault: str | None) -> None:
        """Append a sequence's sampled tokens (accepted drafts first), then forced ones."""
        seq = r.seq
        if r.error is not None or draft_fault is not None:
            return self._finish(seq, "error", error=r.error or draft_fault)
        if self.speculator is not None:
            self.speculator.accept(seq, len(r.tokens) - 1)
        try:
            for t, lp in zip(r.tokens, r.logprobs or [None] * len(r.tokens)):
                self._append(seq, t, lp)
                if seq.finish_reason is not None:
                    return
            if seq.matcher is not None and self.config.enable_jump_forward:
                for t in seq.matcher.forced_tokens():
                    self.stats["forced_tokens"] += 1
                    self._append(seq, int(t), None)
                    if seq.finish_reason is not None:
                        break
        except Exception as e:  # noqa: BLE001 - a matcher, detokenizer or stop check fails its request only
            if seq.finish_reason is None:
                self._finish(seq, "error", error=f"{type(e).__name__} after token {seq.token_ids[-1]}: {e}",
                             flush=False)

    def _append(self, seq: Sequence, token: int, logprobs) -> None:
        p = seq.params
        seq.token_ids.append(token)
        if seq.logprobs is not None:
            seq.logprobs.append(logprobs)
        if seq.matcher is not None:
            if not seq.matcher.accept_token(token):
                return self._finish(seq, "error", error=f"the constraint rejected token {token}")
            if seq.matcher.is_terminated():
                return self._finish(seq, "constraint")
        if token in p.stop_token_ids:
            return self._finish(seq, "stop", stop_reason=token)
        if not p.ignore_eos and token in self.eos_token_ids:
            return self._finish(seq, "stop", stop_reason=token)
        delta = detokenizer.decode_next(self.tokenizer, seq, p.skip_special_tokens)
        hit = detokenizer.cut_at_stop(seq.text, len(delta), p.stop, p.include_stop_str_in_output) \
            if p.stop and delta else None
        if hit is not None:
            seq.text, s = hit
            return self._finish(seq, "stop", stop_reason=s, flush=False)
        if seq.num_output_tokens >= p.max_tokens or seq.num_tokens >= self.max_model_len:
            return self._finish(seq, "length")

    def _finish(self, seq: Sequence, reason: str, stop_reason=None, error=None, flush=True):
        if flush:
            detokenizer.flush(self.tokenizer, seq, seq.params.skip_special_tokens)
        seq.finish_reason, seq.stop_reason, seq.error = reason, stop_reason, error
        self.scheduler.finish(seq)
        if self.speculator is not None:
            self.speculator.release(seq)

    # -- public API ---------------------------------------------------------------------
    def generate(self, prompts, params: SamplingParams | list[SamplingParams] | None = None,
                 use_tqdm: bool | None = None) -> list[RequestOutput]:
        """Generate for a prompt or a batch: strings or lists of token ids.

        Returns one `RequestOutput` per prompt, in order. `use_tqdm=None` shows a
        progress bar (requests done, output tokens/s) for 16 prompts or more.

        >>> llm.generate(["a", "b"], SamplingParams(max_tokens=8, temperature=0.8, seed=0))  # doctest: +SKIP
        """
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        if params is None:
            params = SamplingParams()
        if isinstance(params, SamplingParams):
            params = [params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError("need one SamplingParams per prompt (or one for all)")
        engine = self._engine
        if engine is not None and threading.current_thread() is not engine._thread:
            return engine.generate(prompts, params)     # an AsyncEngine owns the loop
        with self._lock:
            return self._generate(prompts, params, use_tqdm)

    def _generate(self, prompts, params, use_tqdm) -> list[RequestOutput]:
        if self.scheduler.has_unfinished():
            raise RuntimeError("generate() called while requests added by step() are unfinished")
        requests = [self._add_request(p, sp) for p, sp in zip(prompts, params)]
        pending = {seq.seq_id for _, seqs in requests for seq in seqs if not seq.is_finished}
        show = use_tqdm if use_tqdm is not None else len(prompts) >= 16
        bar = None
        if show:
            from tqdm.auto import tqdm
            bar = tqdm(total=len(pending), desc="generate", unit="seq", dynamic_ncols=True)
        t0, out_tokens = time.perf_counter(), 0
        try:
            while self.scheduler.has_unfinished():
                for seq in self.step():
                    if seq.seq_id in pending:
                        pending.discard(seq.seq_id)
                        out_tokens += seq.num_output_tokens
                        if bar is not None:
                            bar.update(1)
                            bar.set_postfix(out_tok_s=f"{out_tokens / (time.perf_counter() - t0):.1f}")
        finally:
            if bar is not None:
                bar.close()
            if self.scheduler.has_unfinished():     # interrupted: drop what is left
                self.abort_all()
        return [self._output(out, seqs) for out, seqs in requests]

    def generate_stream(self, prompt, params: SamplingParams | None = None) -> Iterator[str]:
        """Yield text pieces of one request as they are decoded (n must be 1).

        Never yields half a UTF-8 character; with stop strings, text that could
        begin a stop string is held back until it is known not to.

        >>> for piece in llm.generate_stream("Count: 1, 2,", SamplingParams(max_tokens=8)):  # doctest: +SKIP
        ...     print(piece, end="")
        """
        params = params or SamplingParams()
        if params.n != 1 or (params.best_of or 1) != 1:
            raise ValueError("generate_stream needs n == 1 and no best_of")
        engine = self._engine
        if engine is not None:                          # an AsyncEngine owns the loop
            stream = engine.add_request(prompt, params)
            try:
                for delta in stream:
                    if delta.text:
                        yield delta.text
                    if delta.error:
                        raise RuntimeError(delta.error)
            finally:
                if not stream.finished:
                    stream.abort()
            return
        with self._lock:
            if self.scheduler.has_unfinished():
                raise RuntimeError("generate_stream() called while requests added by step() are unfinished")
            out, (seq,) = self._add_request(prompt, params)
            hold = max((len(s) for s in params.stop), default=1) - 1
            sent = 0
            try:
                while not seq.is_finished:
                    self.step()
                    end = len(seq.text) if seq.is_finished else max(sent, len(seq.text) - hold)
                    if end > sent:
                        yield seq.text[sent:end]
                        sent = end
            finally:
                if self.scheduler.has_unfinished():
                    self.abort_all()
            if seq.error:
                raise RuntimeError(seq.error)

    def beam_search(self, prompts, params: BeamSearchParams | list[BeamSearchParams]) -> list[BeamSearchOutput]:
        """Beam search for a prompt or a batch (strings or token id lists): one
        `BeamSearchOutput` per prompt, its hypotheses best first, token-identical to
        transformers' `generate(num_beams=...)` (engine/beam_search.py, docs/engine.md).
        While an AsyncEngine drives this LLM, the prompts go through it (beside its other
        requests).

        >>> out = llm.beam_search("The capital of France is", BeamSearchParams(4, max_tokens=8))  # doctest: +SKIP
        >>> [(b.text, b.score) for b in out[0].sequences]                                   # doctest: +SKIP
        """
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        if isinstance(params, BeamSearchParams):
            params = [params] * len(prompts)
        if len(params) != len(prompts) or not all(isinstance(p, BeamSearchParams) for p in params):
            raise ValueError("need one BeamSearchParams per prompt (or one for all)")
        engine = self._engine
        if engine is not None and threading.current_thread() is not engine._thread:
            return engine.run_beam_search(prompts, params)     # an AsyncEngine owns the loop
        with self._lock:
            if self.scheduler.has_unfinished():
                raise RuntimeError("beam_search() called while requests added by step() are unfinished")
            try:
                return BeamSearch(self).run(prompts, params)
            finally:
                if self.scheduler.has_unfinished():     # interrupted: drop what is left
                    self.abort_all()

    def close(self) -> None:
        """Stop the tensor-parallel ranks, if any (also done when the LLM is collected and
        at exit). An LLM on one device has nothing to release."""
        if self._ranks is not None:
            self._ranks.close()

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def abort_all(self) -> None:
        """Drop every queued or running sequence and free its blocks."""
        for seq in list(self.scheduler.running) + list(self.scheduler.waiting):
            seq.finish_reason = seq.finish_reason or "abort"
            self.scheduler.finish(seq)
        self.scheduler.waiting.clear()
        if self.speculator is not None:
            self.speculator.release_all()
        # Blocks are published when scheduled, before their KV is written: after an
        # interrupted step some may never have been, so drop the whole prefix cache.
        self.block_manager.reset_prefix_cache()

    def _output(self, out: RequestOutput, seqs: list[Sequence]) -> RequestOutput:
        out.num_cached_tokens = seqs[0].prefix_hit_tokens
        out.prompt_logprobs = seqs[0].prompt_logprobs
        params = seqs[0].params
        if _ranks(params):                # best_of: the n most likely samples, best first
            seqs = sorted(seqs, key=lambda s: -_cumulative_logprob(s))[:params.n]
        out.outputs = [CompletionOutput(i if _ranks(params) else s.sample_index, s.text, s.output_token_ids,
                                        s.finish_reason, s.stop_reason,
                                        s.logprobs if params.logprobs is not None else None, s.error,
                                        _cumulative_logprob(s) if s.logprobs is not None else None)
                       for i, s in enumerate(seqs)]
        return out

    def chat(self, messages, params: SamplingParams | None = None, **kw) -> list[RequestOutput]:
        """Apply the tokenizer's chat template to one conversation (or a list) and generate."""
        convs = [messages] if messages and isinstance(messages[0], dict) else messages
        prompts = [self.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
                   for c in convs]
        ids = [self.tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
        return self.generate(ids, params, **kw)


def _ranks(params: SamplingParams) -> bool:
    """best_of draws more samples than it returns."""
    return (params.best_of or params.n) > params.n


def _cumulative_logprob(seq: Sequence) -> float:
    """Sum of the sampled tokens' logprobs (jump-forward tokens that ended the sequence have
    none and add 0); -inf for a sequence that failed."""
    if seq.finish_reason == "error" or seq.logprobs is None:
        return float("-inf")
    return sum(next(iter(e.values())) for e in seq.logprobs if e is not None)
