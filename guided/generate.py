"""Constrained generators: guided.regex / choice / json / grammar.

    >>> model = guided.load()                                        # doctest: +SKIP
    >>> date = guided.regex(model, r"\\d{4}-\\d{2}-\\d{2}")          # doctest: +SKIP
    >>> date("When did Apollo 11 land? Answer with the date.")       # doctest: +SKIP
    '1969-07-20'
"""
from __future__ import annotations

import json as _json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import fsm
from ..fsm.core.options import lists_options
from .model import Model, load


@dataclass
class GuidedOutput:
    """One result. `complete` is False when max_tokens or a stop string cut the output
    short (finish_reason "length" / "stop"): then `text` is a prefix of a valid output and
    `value` is None. `logprobs` (with `logprobs=True`): the chosen token's log-probability
    per token of `token_ids`, None for a token the constraint forced (jump-forward, no
    forward pass). `error`: why the engine failed this output (finish_reason "error")."""

    text: str
    token_ids: list
    complete: bool
    finish_reason: str
    value: Any = None
    logprobs: list | None = None
    error: str | None = None


class IncompleteOutputError(RuntimeError):
    """Raised by a generator call when some output hit max_tokens (or a stop string)
    before completing. `.outputs` holds every GuidedOutput of the call (complete ones
    included; with n > 1, one list per prompt)."""

    def __init__(self, outputs: list):
        self.outputs = outputs
        bad = [i for i, o in enumerate(outputs)
               if not (all(x.complete for x in o) if isinstance(o, list) else o.complete)]
        super().__init__(f"output(s) {bad} stopped (max_tokens or a stop string) before the "
                         "constraint was complete; raise max_tokens, or call .generate() to get partial text")


class GenerationError(RuntimeError):
    """Some prompt(s) of a batch failed in the engine (e.g. an empty or too long prompt).
    `.errors` maps each failed prompt's index to its message; `.outputs` holds every
    GuidedOutput of the call, the others' complete results included (a failed one has
    finish_reason "error" and its `error`)."""

    def __init__(self, outputs: list, errors: dict[int, str]):
        self.outputs, self.errors = outputs, errors
        detail = "; ".join(f"prompt {i}: {msg}" for i, msg in errors.items())
        super().__init__(f"{len(errors)} of {len(outputs)} prompt(s) failed: {detail}")


class Generator:
    """Calls the model under one compiled constraint.

    `gen(prompt)` returns the value (str, or the parsed object for json); a list of
    prompts gives a list. `gen.generate(...)` returns GuidedOutput records instead
    and never raises for truncation. Options: max_tokens (default 256),
    temperature (0 = greedy, the default), top_k, top_p, seed, repetition_penalty
    (1 = off; small models loop less with ~1.2), `stop` (strings that end an output
    early: it is then incomplete), `logprobs=True` (per-token log-probabilities on each
    GuidedOutput; engine backend), `n` (outputs per prompt: with n > 1 every prompt gives
    a list of n results; sample i uses seed + i); `chat=True` (default) wraps each prompt
    in the model's chat template. `gen.stream(prompt)` yields text as it is decoded.

    A generator may be called from several threads at once (the engine batches them).
    When some prompt of a batch fails in the engine, the call raises GenerationError,
    naming its index and holding every output.
    """

    def __init__(self, model: Model, constraint: fsm.Constraint,
                 parse: Callable[[str], Any] = lambda s: s, chat: bool = True):
        self.model, self.constraint, self.parse, self.chat = model, constraint.require_output(), parse, chat

    def __call__(self, prompts, **options):
        outputs = self.generate(prompts, **options)
        flat = [x for o in outputs for x in (o if isinstance(o, list) else [o])]
        if not all(o.complete for o in flat):
            raise IncompleteOutputError(outputs)
        values = [[x.value for x in o] if isinstance(o, list) else o.value for o in outputs]
        return values[0] if isinstance(prompts, str) else values

    def generate(self, prompts, *, max_tokens: int = 256, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int | None = None,
                 repetition_penalty: float = 1.0, n: int = 1, stop: list[str] | str | None = None,
                 logprobs: bool = False) -> list:
        """One GuidedOutput per prompt (a list even for one prompt); with n > 1, one list
        of n GuidedOutputs per prompt."""
        single = isinstance(prompts, str)
        prompts = [prompts] if single else list(prompts)
        if n < 1:
            raise ValueError("n must be >= 1")
        stop = [stop] if isinstance(stop, str) else list(stop or [])
        ids = [self.model.encode_prompt(p, self.chat) for p in prompts]
        sampling = dict(max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                        seed=seed, repetition_penalty=repetition_penalty)
        if self.model.backend == "transformers":
            if stop or logprobs:
                raise ValueError("stop and logprobs need the engine backend (guided.load(backend='engine'))")
            rows = _generate_transformers(self.model, self.constraint, [x for x in ids for _ in range(n)],
                                          **sampling)
            samples = [[(tokens,) for tokens in rows[i * n:(i + 1) * n]] for i in range(len(ids))]
        else:
            samples = _generate_engine(self.model, self.constraint, ids, n=n, stop=stop,
                                       logprobs=logprobs, **sampling)
        outputs, errors = [], {}
        for i, per_prompt in enumerate(samples):
            outs = [self._finish(*sample) for sample in per_prompt]
            for o in outs:
                if o.error is not None:
                    errors.setdefault(i, o.error)
            outputs.append(outs if n > 1 else outs[0])
        if errors:
            raise GenerationError(outputs, errors)
        return outputs

    def stream(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.0, top_k: int = 0,
               top_p: float = 1.0, seed: int | None = None, repetition_penalty: float = 1.0,
               stop: list[str] | str | None = None):
        """Yield the text of one output as it is decoded (engine backend only).

        The pieces concatenate to what `generate` returns for the same options (for
        greedy decoding, the same text). At the end the tokens are replayed through the
        constraint as `generate` does (a forbidden token raises RuntimeError), and the
        GuidedOutput is the generator's return value (`out = yield from gen.stream(...)`).
        Closing the iterator early aborts the request. An engine failure raises
        GenerationError. Runs through the model's AsyncEngine: other threads' calls are
        batched with it.

        >>> for piece in guided.regex(model, r"[0-9]{3}").stream("Pick a number."):  # doctest: +SKIP
        ...     print(piece, end="")
        """
        if self.model.backend != "engine":
            raise ValueError(f"stream() needs the engine backend; this model uses {self.model.backend!r} "
                             "(load it with guided.load(backend='engine'))")
        if not isinstance(prompt, str):
            raise TypeError("stream() takes one prompt (a string)")
        from ..engine import SamplingParams
        params = SamplingParams(max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                seed=seed, repetition_penalty=repetition_penalty, stop=stop,
                                constraint=self.constraint)
        handle = self.model.async_engine.add_request(self.model.encode_prompt(prompt, self.chat), params)
        tokens, pieces, reason = [], [], ""
        try:
            for delta in handle:
                if delta.text:
                    pieces.append(delta.text)
                    yield delta.text
                if delta.error:
                    failed = GuidedOutput("", [], False, "error", error=delta.error)
                    raise GenerationError([failed], {0: delta.error})
                tokens += delta.token_ids
                reason = delta.finish_reason or reason
        finally:
            if not handle.finished:
                handle.abort()
        # The record of truth, as generate() keeps it: the tokens replayed through a fresh
        # matcher (a forbidden one raises); the GuidedOutput is the generator's return value.
        eos = self.constraint.vocab.eos_ids
        if reason == "constraint" and eos and (not tokens or tokens[-1] not in eos):
            tokens.append(eos[0])    # (the engine strips the EOS that ended it)
        return self._finish(tokens, reason, stop_text="".join(pieces) if reason == "stop" else None)

    def _finish(self, tokens: list[int], reason: str = "", lps: list | None = None,
                error: str | None = None, stop_text: str | None = None) -> GuidedOutput:
        """Replay the tokens through a fresh matcher: the record of truth on completeness."""
        m, vocab, kept = self.constraint.matcher(), self.constraint.vocab, []
        if error is not None:
            text = b"".join(vocab.token_bytes[t] for t in tokens).decode("utf-8", "replace")
            return GuidedOutput(text, list(tokens), False, "error", logprobs=lps, error=error)
        for t in tokens:
            if not m.accept_token(t):
                raise RuntimeError(f"backend produced token {t}, which the constraint forbids")
            if m.is_terminated():
                break
            kept.append(t)
        if reason == "stop" and stop_text is not None and not m.is_terminated():
            # The token that held the stop string goes (its text before it stays in text):
            # token_ids spell a prefix of text, as they do for the other reasons.
            cut = stop_text.encode()
            while kept and not _spells_prefix(b"".join(vocab.token_bytes[t] for t in kept), cut):
                kept.pop()
        lps = lps[:len(kept)] if lps is not None else None
        text = b"".join(vocab.token_bytes[t] for t in kept).decode("utf-8", "replace")
        if m.is_terminated():
            return GuidedOutput(text, kept, True, "constraint", self.parse(text), lps)
        if reason == "stop" and stop_text is not None:
            return GuidedOutput(stop_text, kept, False, "stop", logprobs=lps)
        return GuidedOutput(text, kept, False, "length", logprobs=lps)


def _spells_prefix(data: bytes, text: bytes) -> bool:
    """Whether tokens of bytes `data` spell a prefix of the decoded `text` (whose first
    space a SentencePiece decode drops)."""
    return text.startswith(data) or (data[:1] == b" " and text.startswith(data[1:]))


def _generate_engine(model: Model, constraint, ids, *, n, stop, logprobs, max_tokens, temperature,
                     top_k, top_p, seed, repetition_penalty):
    """Per prompt, n samples as (token ids, finish reason, logprobs, error, stop-cut text)."""
    from ..engine import SamplingParams
    params = SamplingParams(n=n, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                            top_p=top_p, seed=seed, constraint=constraint, stop=stop,
                            logprobs=0 if logprobs else None, repetition_penalty=repetition_penalty)
    outs = model.engine.generate(ids, params, use_tqdm=False)
    eos = model.vocab.eos_ids
    result = []
    for out in outs:
        samples = []
        for o in out.outputs:
            # The engine strips the final EOS from token_ids; the finish reason tells us it was there.
            tokens = list(o.token_ids) + ([eos[0]] if o.finish_reason == "constraint" and eos and
                                          (not o.token_ids or o.token_ids[-1] not in eos) else [])
            lps = None
            if logprobs:
                lps = [(d.get(t) if d else None) for t, d in zip(o.token_ids, o.logprobs or [])]
            stop_text = o.text if o.finish_reason == "stop" and isinstance(o.stop_reason, str) else None
            error = (o.error or "generation failed") if o.finish_reason == "error" else None
            samples.append((tokens, o.finish_reason or "", lps, error, stop_text))
        result.append(samples)
    return result


def _generate_transformers(model: Model, constraint, ids, *, max_tokens, temperature, top_k,
                           top_p, seed, repetition_penalty):
    import torch

    from .logits_processor import ConstraintLogitsProcessor
    tok, hf = model.tokenizer, model.hf_model
    width = max(len(x) for x in ids)
    pad = tok.pad_token_id if tok.pad_token_id is not None else model.vocab.eos_ids[0]
    input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids])  # left padding
    attention = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
    if seed is not None:
        torch.manual_seed(seed)
    sample = temperature > 0
    kwargs = dict(do_sample=sample, max_new_tokens=max_tokens, pad_token_id=pad,
                  eos_token_id=list(model.vocab.eos_ids), repetition_penalty=repetition_penalty)
    if sample:
        kwargs.update(temperature=temperature, top_k=top_k or None, top_p=top_p)
    else:
        kwargs.update(temperature=None, top_k=None, top_p=None)
    with torch.inference_mode():
        out = hf.generate(input_ids=input_ids, attention_mask=attention,
                          logits_processor=[ConstraintLogitsProcessor(constraint)], **kwargs)
    return [row[width:].tolist() for row in out]


def _resolve(model) -> Model:
    return model if isinstance(model, Model) else load(model)


@lists_options(fsm.RegexOptions)
def regex(model, pattern: str, options: fsm.RegexOptions | None = None, *, chat: bool = True,
          **keywords) -> Generator:
    """Outputs that fully match `pattern` (Python `re` syntax). Compile options: an
    fsm.RegexOptions or its fields as keywords (flags=re.IGNORECASE...); `chat`: wrap each
    prompt in the model's chat template."""
    m = _resolve(model)
    return Generator(m, fsm.compile_regex(pattern, m.vocab, options, **keywords), chat=chat)


def choice(model, options: list[str], *, chat: bool = True) -> Generator:
    """Exactly one of `options` (strings)."""
    m = _resolve(model)
    return Generator(m, fsm.compile_choice(options, m.vocab), chat=chat)


@lists_options(fsm.JsonOptions)
def json(model, schema, options: fsm.JsonOptions | None = None, *, chat: bool = True, **keywords) -> Generator:
    """JSON valid under `schema`: a Pydantic model class (returns instances), a JSON
    Schema dict or JSON text (returns the parsed JSON value). Compile options: an
    fsm.JsonOptions or its fields as keywords (whitespace=, strict=, ...: help(fsm.JsonOptions)).
    """
    m = _resolve(model)
    parse = schema.model_validate_json if hasattr(schema, "model_validate_json") else _json.loads
    return Generator(m, fsm.compile_json_schema(schema, m.vocab, options, **keywords), parse, chat=chat)


@lists_options(fsm.GrammarOptions)
def grammar(model, lark_text: str, options: fsm.GrammarOptions | None = None, *, chat: bool = True,
            **keywords) -> Generator:
    """Sentences of a Lark grammar. Compile options: an fsm.GrammarOptions or its fields
    as keywords (start=, max_states=)."""
    m = _resolve(model)
    return Generator(m, fsm.compile_grammar(lark_text, m.vocab, options, **keywords), chat=chat)

