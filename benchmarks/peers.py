"""Adapters that give every library the same four calls, for side-by-side benchmarks.

    peer = Ours(vocab) | XGrammar(tok) | LLGuidance(tok) | OutlinesCore(tok, vocab)
    c = peer.compile(kind, spec)          # kind: "regex" | "json" | "lark" | "structural_tag"; uncached
    m = peer.matcher(c); peer.fill(m); peer.accept(m, token_id) -> bool

A peer that is not installed raises ImportError at construction; a kind it does not
support raises NotImplementedError from compile. Peers are optional benchmark extras:
    .venv/bin/pip install -e ".[bench]"
"""
from __future__ import annotations

import json

import numpy as np

from structgen import fsm


class Ours:
    name = "ours"

    def __init__(self, vocab: fsm.Vocabulary):
        self.vocab = vocab
        self.row = np.zeros(vocab.num_words, dtype=np.int32)

    def compile(self, kind, spec):
        self.vocab._cache.pop("compiled", None)  # time a cache miss, as a user with a new spec feels it
        if kind == "regex":
            return fsm.compile_regex(spec, self.vocab)
        if kind == "json":
            return fsm.compile_json_schema(spec, self.vocab)
        if kind == "lark":
            return fsm.compile_grammar(spec, self.vocab)
        if kind == "structural_tag":
            return fsm.compile_structural_tag(spec, self.vocab)
        raise NotImplementedError(kind)

    def matcher(self, c):
        return c.matcher()

    def fill(self, m):
        m.fill_next_token_bitmask(self.row)

    def accept(self, m, t):
        return m.accept_token(t)


class XGrammar:
    name = "xgrammar"

    def __init__(self, tokenizer, vocab_size: int | None = None, max_threads: int = 8):
        import xgrammar as xgr
        self.xgr, self.max_threads = xgr, max_threads  # (its compiler's threads; 8 its default)
        self.info = tokenizer if isinstance(tokenizer, xgr.TokenizerInfo) else \
            xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.bitmask = xgr.allocate_token_bitmask(1, self.info.vocab_size)

    def compile(self, kind, spec):
        compiler = self.xgr.GrammarCompiler(self.info, max_threads=self.max_threads, cache_enabled=False)
        if kind == "regex":
            return compiler.compile_regex(spec)
        if kind == "json":
            return compiler.compile_json_schema(json.dumps(spec) if not isinstance(spec, str) else spec)
        if kind == "ebnf":
            return compiler.compile_grammar(spec)
        if kind == "structural_tag":
            return compiler.compile_structural_tag(json.dumps(spec))
        raise NotImplementedError(kind)

    def matcher(self, c):
        return self.xgr.GrammarMatcher(c)

    def fill(self, m):
        m.fill_next_token_bitmask(self.bitmask)

    def accept(self, m, t):
        return m.accept_token(t)


class LLGuidance:
    name = "llguidance"

    def __init__(self, tokenizer, vocab_size: int | None = None):
        import llguidance
        import llguidance.hf
        import llguidance.numpy
        self.ll = llguidance
        self.tok = tokenizer if isinstance(tokenizer, llguidance.LLTokenizer) else \
            llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
        self.bitmask = llguidance.numpy.allocate_token_bitmask(1, self.tok.vocab_size)

    def compile(self, kind, spec):
        M = self.ll.LLMatcher
        if kind == "regex":
            return M.grammar_from_regex(spec)
        if kind == "json":
            return M.grammar_from_json_schema(json.dumps(spec) if not isinstance(spec, str) else spec)
        if kind == "lark":
            return M.grammar_from_lark(spec)
        raise NotImplementedError(kind)

    def matcher(self, c):  # llguidance compiles lazily inside the matcher
        m = self.ll.LLMatcher(self.tok, c)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def fill(self, m):
        self.ll.numpy.fill_next_token_bitmask(m, self.bitmask, 0)

    def accept(self, m, t):
        return m.consume_token(t)


class OutlinesCore:
    name = "outlines-core"

    def __init__(self, tokenizer, vocab: fsm.Vocabulary):
        import outlines_core
        self.oc = outlines_core
        by_bytes: dict[bytes, list[int]] = {}  # exact token bytes (it takes str keys literally)
        for i, b in enumerate(vocab.token_bytes):
            if b and i not in vocab.eos_ids:
                by_bytes.setdefault(b, []).append(i)
        self.eos = vocab.eos_ids[0]
        self.vocabulary = outlines_core.Vocabulary(self.eos, by_bytes)
        self.mask = np.zeros(vocab.num_words, dtype=np.int32)

    def compile(self, kind, spec):
        if kind == "regex":
            return self.oc.Index(spec, self.vocabulary)
        if kind == "json":
            from outlines_core.json_schema import build_regex_from_schema
            return self.oc.Index(build_regex_from_schema(json.dumps(spec)), self.vocabulary)
        raise NotImplementedError(kind)

    def matcher(self, c):
        return self.oc.Guide(c)

    def fill(self, m):
        m.write_mask_into(self.mask.ctypes.data, self.mask.size, 4)

    def accept(self, m, t):
        if t == self.eos:  # its Guide lists EOS in final states but refuses to advance on it
            return m.is_finished()
        m.advance(t)
        return True


def make_peers(tokenizer, vocab: fsm.Vocabulary, names=("ours", "xgrammar", "llguidance",
                                                        "outlines-core")):
    """The peers that are installed, in order; prints a note for the missing ones."""
    makers = {"ours": lambda: Ours(vocab), "xgrammar": lambda: XGrammar(tokenizer, vocab.size),
              "llguidance": lambda: LLGuidance(tokenizer, vocab.size),
              "outlines-core": lambda: OutlinesCore(tokenizer, vocab)}
    out = []
    for n in names:
        try:
            out.append(makers[n]())
        except ImportError as e:
            print(f"(skipping {n}: {e})")
    return out
