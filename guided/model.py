"""Load a model once for guided generation: weights folder, tokenizer, vocabulary, backend."""
from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .. import fsm
from ..engine.loader import resolve_model

BACKENDS = ("engine", "transformers")


@dataclass
class Model:
    """A loaded model. `backend` is "engine" (our batched engine, the default) or
    "transformers" (`model.generate` with our logits processor).

    >>> model = guided.load()                      # doctest: +SKIP
    >>> model.vocab.size                            # doctest: +SKIP
    49152
    """

    folder: Path
    tokenizer: object
    vocab: fsm.Vocabulary
    backend: str = "engine"
    engine_config: dict = field(default_factory=dict)
    _engine: object = field(default=None, repr=False)
    _hf_model: object = field(default=None, repr=False)
    _async_engine: object = field(default=None, repr=False)

    @property
    def engine(self):
        """The engine.LLM over these weights (created on first use, once across threads)."""
        if self._engine is None:
            with _INIT_LOCK:
                if self._engine is None:
                    from ..engine import LLM
                    # (its own tokenizer: the engine decodes in its thread while callers
                    # encode prompts with this one)
                    self._engine = LLM(self.folder, tokenizer=copy.deepcopy(self.tokenizer), **self.engine_config)
        return self._engine

    @property
    def async_engine(self):
        """An engine.AsyncEngine driving `engine` from a background thread (started on
        first use, by `Generator.stream`). Once it runs, every generate call on this
        model goes through it, so calls from several threads are batched together."""
        if self._async_engine is None:
            llm = self.engine
            with _INIT_LOCK:
                if self._async_engine is None:
                    from ..engine.async_engine import AsyncEngine
                    self._async_engine = AsyncEngine(llm)
        return self._async_engine

    @property
    def hf_model(self):
        """The transformers model over these weights, fp32 on CPU (created on first use)."""
        if self._hf_model is None:
            import torch
            from transformers import AutoModelForCausalLM
            self._hf_model = AutoModelForCausalLM.from_pretrained(self.folder, dtype=torch.float32)
            self._hf_model.eval()
        return self._hf_model

    def encode_prompt(self, prompt: str, chat: bool) -> list[int]:
        """Token ids of a prompt, wrapped in the chat template when `chat` and one exists."""
        with _TOKENIZER_LOCK:      # a fast tokenizer is not safe to call from several threads
            return self._encode(prompt, chat)

    def _encode(self, prompt: str, chat: bool) -> list[int]:
        tok = self.tokenizer
        if chat and getattr(tok, "chat_template", None):
            text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                           add_generation_prompt=True)
            return tok(text, add_special_tokens=False).input_ids
        return tok(prompt).input_ids


_LOADED: dict[tuple, Model] = {}
_INIT_LOCK = threading.RLock()
_TOKENIZER_LOCK = threading.Lock()


def load(model=None, backend: str = "engine", **engine_config) -> Model:
    """Load a model: None or "smollm2" (the embedded SmolLM2-135M-Instruct), a Hugging
    Face folder, or a .gguf file. Loads are cached per (model, backend, config).

    >>> model = guided.load(backend="transformers")   # doctest: +SKIP
    """
    if isinstance(model, Model):
        return model
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    key = (str(model), backend, json.dumps(engine_config, sort_keys=True, default=str))
    with _INIT_LOCK:
        return _LOADED[key] if key in _LOADED else _load(key, model, backend, engine_config)


def _load(key, model, backend, engine_config) -> Model:
    from transformers import AutoConfig, AutoTokenizer
    folder = resolve_model(model)
    tok = AutoTokenizer.from_pretrained(folder)
    width = AutoConfig.from_pretrained(folder).vocab_size
    vocab = fsm.Vocabulary.from_tokenizer(tok, vocab_size=max(width, len(tok)))
    _LOADED[key] = Model(folder, tok, vocab, backend, dict(engine_config))
    return _LOADED[key]
