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
from ..fsm.core.options import describe
from .model import Model, load


@dataclass
class GuidedOutput:
    """One result. `complete` is False when max_tokens cut the output short: then
    `text` is a prefix of a valid output and `value` is None."""

    text: str
    token_ids: list
    complete: bool
    finish_reason: str
    value: Any = None


class IncompleteOutputError(RuntimeError):
    """Raised by a generator call when some output hit max_tokens before completing.
    `.outputs` holds every GuidedOutput of the call (complete ones included)."""

    def __init__(self, outputs: list[GuidedOutput]):
        self.outputs = outputs
        bad = [i for i, o in enumerate(outputs) if not o.complete]
        super().__init__(f"output(s) {bad} stopped at max_tokens before the constraint was "
                         "complete; raise max_tokens, or call .generate() to get partial text")


class Generator:
    """Calls the model under one compiled constraint.

    `gen(prompt)` returns the value (str, or the parsed object for json); a list of
    prompts gives a list. `gen.generate(...)` returns GuidedOutput records instead
    and never raises for truncation. Options: max_tokens (default 256),
    temperature (0 = greedy, the default), top_k, top_p, seed, repetition_penalty
    (1 = off; small models loop less with ~1.2); `chat=True` (default) wraps each
    prompt in the model's chat template.
    """

    def __init__(self, model: Model, constraint: fsm.Constraint,
                 parse: Callable[[str], Any] = lambda s: s, chat: bool = True):
        self.model, self.constraint, self.parse, self.chat = model, constraint.require_output(), parse, chat

    def __call__(self, prompts, **options):
        outputs = self.generate(prompts, **options)
        if not all(o.complete for o in outputs):
            raise IncompleteOutputError(outputs)
        values = [o.value for o in outputs]
        return values[0] if isinstance(prompts, str) else values

    def generate(self, prompts, *, max_tokens: int = 256, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int | None = None,
                 repetition_penalty: float = 1.0) -> list[GuidedOutput]:
        single = isinstance(prompts, str)
        prompts = [prompts] if single else list(prompts)
        ids = [self.model.encode_prompt(p, self.chat) for p in prompts]
        sampling = dict(max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                        seed=seed, repetition_penalty=repetition_penalty)
        if self.model.backend == "transformers":
            token_lists = _generate_transformers(self.model, self.constraint, ids, **sampling)
        else:
            token_lists = _generate_engine(self.model, self.constraint, ids, **sampling)
        return [self._finish(tokens) for tokens in token_lists]

    def _finish(self, tokens: list[int]) -> GuidedOutput:
        """Replay the tokens through a fresh matcher: the record of truth on completeness."""
        m, vocab, kept = self.constraint.matcher(), self.constraint.vocab, []
        for t in tokens:
            if not m.accept_token(t):
                raise RuntimeError(f"backend produced token {t}, which the constraint forbids")
            if m.is_terminated():
                break
            kept.append(t)
        text = b"".join(vocab.token_bytes[t] for t in kept).decode("utf-8", "replace")
        if m.is_terminated():
            return GuidedOutput(text, kept, True, "constraint", self.parse(text))
        return GuidedOutput(text, kept, False, "length")


def _generate_engine(model: Model, constraint, ids, *, max_tokens, temperature, top_k, top_p, seed,
                     repetition_penalty):
    from ..engine import SamplingParams
    params = SamplingParams(max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                            top_p=top_p, seed=seed, constraint=constraint,
                            repetition_penalty=repetition_penalty)
    outs = model.engine.generate(ids, params, use_tqdm=False)
    for o in outs:
        if o.error:
            raise RuntimeError(o.error)
    eos = model.vocab.eos_ids
    # The engine strips the final EOS from token_ids; the finish reason tells us it was there.
    return [list(o.token_ids) + ([eos[0]] if o.finish_reason == "constraint" and eos and
                                 (not o.token_ids or o.token_ids[-1] not in eos) else [])
            for o in outs]


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


def json(model, schema, options: fsm.JsonOptions | None = None, *, chat: bool = True, **keywords) -> Generator:
    """JSON valid under `schema`: a Pydantic model class (returns instances), a JSON
    Schema dict or JSON text (returns the parsed JSON value). Compile options: an
    fsm.JsonOptions or its fields as keywords (whitespace=, strict=, ...: help(fsm.JsonOptions)).
    """
    m = _resolve(model)
    parse = schema.model_validate_json if hasattr(schema, "model_validate_json") else _json.loads
    return Generator(m, fsm.compile_json_schema(schema, m.vocab, options, **keywords), parse, chat=chat)


def grammar(model, lark_text: str, options: fsm.GrammarOptions | None = None, *, chat: bool = True,
            **keywords) -> Generator:
    """Sentences of a Lark grammar. Compile options: an fsm.GrammarOptions or its fields
    as keywords (start=, max_states=)."""
    m = _resolve(model)
    return Generator(m, fsm.compile_grammar(lark_text, m.vocab, options, **keywords), chat=chat)


for _gen, _options in ((regex, fsm.RegexOptions), (json, fsm.JsonOptions), (grammar, fsm.GrammarOptions)):
    _gen.__doc__ = f"{_gen.__doc__.rstrip()}\n\n{describe(_options)}\n"
