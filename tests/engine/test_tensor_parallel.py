"""Tensor parallel on CPU: 2 gloo ranks against tensor_parallel_size=1 on the same tiny
random-weight model (conftest's tiny_llama; the in-memory weights travel to rank 1)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from oracles import PROMPTS

from structgen.engine import LLM, BeamSearchParams, SamplingParams
from structgen.engine.parallel import Shard
from structgen.engine.tensor_parallel import RankFailure

MAX_NEW = 12
CONSTRAINTS = [None, ("regex", r"[a-z]{2,6}( [a-z]{2,6}){1,3}\."), ("choice", ["yes", "no", "maybe"]),
               ("json", {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
               None]


def engine(tiny_llama, **config):
    folder, weights = tiny_llama
    return LLM(folder, weights=weights.items(), max_num_seqs=8, block_size=8, **config)


def run(llm, constraints=None):
    # Logprobs on the JSON request: its forced tokens' rows join the LM head's.
    params = [SamplingParams(max_tokens=MAX_NEW, constraint=c, logprobs=2 if c and c[0] == "json" else None)
              for c in constraints or [None] * len(PROMPTS)]
    return llm.generate(PROMPTS, params, use_tqdm=False)


@pytest.fixture(scope="module")
def tp2(tiny_llama):
    # Few blocks: the five prompts cannot all be resident, so the scheduler preempts.
    llm = engine(tiny_llama, tensor_parallel_size=2, num_kv_blocks=12, max_model_len=96,
                 distributed_timeout_s=60)
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def tp1(tiny_llama):
    return engine(tiny_llama, num_kv_blocks=12, max_model_len=96)


def test_shard_rows_pad_the_vocabulary():
    w = torch.arange(10.0).reshape(5, 2)
    a, b = Shard(0, 2).rows(w), Shard(1, 2).rows(w)
    assert a.shape == b.shape == (3, 2)
    assert torch.equal(torch.cat([a, b])[:5], w) and not b[2].any()
    with pytest.raises(ValueError, match="tensor_parallel_size=4 must divide the model's KV heads"):
        Shard(0, 4).part(2, "KV heads")


def test_greedy_matches_one_rank_with_constraints_prefix_cache_and_preemption(tp1, tp2):
    want = run(tp1, CONSTRAINTS)
    got = run(tp2, CONSTRAINTS)
    assert [o.token_ids for o in got] == [o.token_ids for o in want]
    assert [o.finish_reason for o in got] == [o.finish_reason for o in want]
    assert all(o.error is None for o in got)
    assert len(got[3].logprobs) == len(want[3].logprobs) > 0
    for g, w in zip(got[3].logprobs, want[3].logprobs):
        assert (g is None) == (w is None)
        assert g is None or (g.keys() == w.keys() and all(abs(g[k] - w[k]) < 1e-4 for k in g))
    assert re.fullmatch(CONSTRAINTS[1][1], got[1].text) and got[2].text in CONSTRAINTS[2][1]
    assert all(o.finish_reason == "constraint" for o in got[1:3])
    assert tp2.scheduler.num_preemptions > 0
    # The last prompt shares the one before's long prefix, served from the cache (every
    # rank's); on a second call, the prompt before too, from the first call's blocks.
    again = run(tp2)
    assert [o.token_ids for o in again] == [o.token_ids for o in run(tp1)]
    assert got[4].num_cached_tokens >= 40 and again[3].num_cached_tokens >= 8


def test_beam_search_matches_one_rank(tp1, tp2):
    """Beams fork and copy blocks on write: every rank must copy its own share of the
    cache (StepInputs.copies), or rank 1's heads read another beam's keys."""
    params = BeamSearchParams(beam_width=3, max_tokens=8, ignore_eos=True)
    want = tp1.beam_search(PROMPTS[:2], params)
    got = tp2.beam_search(PROMPTS[:2], params)
    assert [[b.token_ids for b in o.sequences] for o in got] == [[b.token_ids for b in o.sequences] for o in want]
    for g, w in zip(got, want):
        assert all(abs(a.cum_logprob - b.cum_logprob) < 1e-4 for a, b in zip(g.sequences, w.sequences))
    assert tp2.block_manager.num_free_blocks == tp2.block_manager.num_blocks


def test_rank_does_not_hold_the_whole_model(tp2):
    m = tp2.model
    assert m.lm_head.weight.shape[0] == 49152 // 2
    assert m.layers[0].self_attn.num_heads == 2 and m.num_kv_heads == 1
    assert tp2.runner.kv_cache.shape[4] == 1


def test_biases_and_an_odd_vocabulary_split(smol_folder, tmp_path):
    """Biases on every projection (a row-parallel bias is added once, not once per rank)
    and a vocabulary of 321 (the LM head padded to 2 x 161 rows): token-id prompts. The
    two ranks also verify n-gram drafts (several logits rows per sequence)."""
    from transformers import AutoModelForCausalLM, LlamaConfig
    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=321, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      initializer_range=0.2, attention_bias=True, mlp_bias=True, tie_word_embeddings=True)
    hf = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    for name, p in hf.named_parameters():        # biases are zero at init: make them count
        if name.endswith("bias"):
            torch.nn.init.normal_(p, std=0.5)
    hf.save_pretrained(tmp_path)
    for f in smol_folder.iterdir():
        if f.is_file() and f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, tmp_path / f.name)
    prompts = [[5, 17, 300, 42] * 3, [320, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 2]
    params = SamplingParams(max_tokens=10, ignore_eos=True, logprobs=3)   # over the whole vocabulary
    want = LLM(tmp_path, num_kv_blocks=16, max_model_len=64).generate(prompts, params, use_tqdm=False)
    with LLM(tmp_path, num_kv_blocks=16, max_model_len=64, tensor_parallel_size=2,
             speculative_config={"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1}) as llm:
        assert llm.model.lm_head.weight.shape[0] == 161
        got = llm.generate(prompts, params, use_tqdm=False)
        assert llm.speculator.stats["draft_tokens"] > 0
        rank1 = llm._ranks.procs[0]
    assert rank1.exitcode == 0                  # close() (leaving the `with`) stopped it
    assert [o.token_ids for o in got] == [o.token_ids for o in want]
    for g, w in zip(got, want):
        for a, b in zip(g.logprobs, w.logprobs):
            assert a.keys() == b.keys() and all(abs(a[k] - b[k]) < 1e-4 for k in a)


def test_misfit_split_is_refused(tiny_llama):
    with pytest.raises(ValueError, match="tensor_parallel_size=3 must divide the model's attention heads"):
        engine(tiny_llama, tensor_parallel_size=3)


def _kill_rank_and_step(tiny_llama, sig):
    llm = engine(tiny_llama, tensor_parallel_size=2, num_kv_blocks=40, max_model_len=128,
                 distributed_timeout_s=3)
    proc = llm._ranks.procs[0]
    try:
        assert run(llm)[0].token_ids
        os.kill(proc.pid, sig)
        t0 = time.monotonic()
        with pytest.raises(RankFailure) as err:
            run(llm)
        assert time.monotonic() - t0 < 30
        with pytest.raises(RankFailure):        # and every later call, at once
            run(llm)
        return str(err.value), proc
    finally:
        if sig == signal.SIGSTOP and proc.is_alive():
            os.kill(proc.pid, signal.SIGCONT)
        llm.close()
        proc.join(10)
        assert not proc.is_alive()


def test_dead_rank_fails_the_engine_clearly(tiny_llama):
    msg, _ = _kill_rank_and_step(tiny_llama, signal.SIGKILL)
    assert "rank 1 exited with code -9 (SIGKILL)" in msg


def test_hung_rank_times_out(tiny_llama):
    msg, _ = _kill_rank_and_step(tiny_llama, signal.SIGSTOP)
    assert "did not answer within distributed_timeout_s=3s" in msg


@pytest.mark.slow     # two engines in a fresh interpreter: ~40 s on a shared 2-core machine
def test_no_rank_outlives_the_process(tiny_llama):
    """An LLM dropped without close(): its ranks stop when it is collected; one never
    closed nor dropped: its ranks go with the interpreter."""
    folder, _ = tiny_llama
    script = textwrap.dedent(f"""
        import gc, os, time
        from structgen.engine import LLM, BeamSearchParams, SamplingParams
        make = lambda: LLM({str(folder)!r}, tensor_parallel_size=2, num_kv_blocks=16, max_model_len=64)
        llm = make()
        pid = llm._ranks.procs[0].pid
        del llm
        gc.collect()
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{{pid}}") and time.monotonic() < deadline:
            time.sleep(0.1)
        print("dropped", not os.path.exists(f"/proc/{{pid}}"))
        llm = make()
        print(llm._ranks.procs[0].pid, flush=True)
        llm.generate([[1, 2, 3]], SamplingParams(max_tokens=2), use_tqdm=False)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.split("\n")
    assert lines[0] == "dropped True", out.stdout
    pid = int(lines[1])
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}"), f"rank 1 (pid {pid}) outlived its engine"
