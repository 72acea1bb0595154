"""Block manager and scheduler bookkeeping without a model."""
from __future__ import annotations

from structgen.engine.block_manager import BlockManager
from structgen.engine.config import EngineConfig
from structgen.engine.sampling_params import SamplingParams
from structgen.engine.scheduler import Scheduler
from structgen.engine.sequence import Sequence


def seq(i, tokens):
    return Sequence(i, i, 0, list(tokens), len(tokens), SamplingParams())


def test_prefix_blocks_are_shared_and_refcounted():
    bm = BlockManager(8, 4)
    a = seq(0, range(10))
    bm.match_prefix(a)
    assert a.num_computed_tokens == 0
    assert bm.allocate(a, 10) and len(a.block_table) == 3
    a.num_computed_tokens = 10
    bm.register_full_blocks(a, a.num_computed_tokens)           # two full blocks hashed
    b = seq(1, list(range(8)) + [99, 98, 97])
    bm.match_prefix(b)
    assert b.block_table == a.block_table[:2] and b.num_computed_tokens == 8
    assert bm.ref_counts[a.block_table[0]] == 2
    assert bm.allocate(b, 3)
    bm.free_sequence(a)
    bm.free_sequence(b)
    assert bm.num_free_blocks == 8 and all(r == 0 for r in bm.ref_counts)
    # Freed blocks keep their hash: a third sequence still hits.
    c = seq(2, list(range(8)) + [5])
    bm.match_prefix(c)
    assert c.num_computed_tokens == 8
    bm.free_sequence(c)


def test_whole_prompt_hit_leaves_one_block_to_compute():
    bm = BlockManager(8, 4)
    a = seq(0, range(8))
    bm.allocate(a, 8)
    a.num_computed_tokens = 8
    bm.register_full_blocks(a, a.num_computed_tokens)
    b = seq(1, range(8))
    bm.match_prefix(b)
    assert b.num_computed_tokens == 4       # the last block is recomputed for its logits


def test_eviction_reuses_unhashed_blocks_first():
    bm = BlockManager(4, 2)
    a = seq(0, range(4))
    bm.allocate(a, 4)
    a.num_computed_tokens = 4
    bm.register_full_blocks(a, a.num_computed_tokens)
    bm.free_sequence(a)
    b = seq(1, [7])
    bm.allocate(b, 1)
    assert b.block_table[0] not in a.block_table   # unhashed free blocks go first


def test_scheduler_preempts_latest_and_resumes_fcfs():
    cfg = EngineConfig(max_num_seqs=4, max_num_batched_tokens=64, block_size=4)
    bm = BlockManager(6, 4, enable_prefix_caching=False)
    sch = Scheduler(cfg, bm)
    seqs = [seq(i, [i] * 7) for i in range(3)]
    for s in seqs:
        sch.add(s)
    batch = sch.schedule()
    assert [s.seq_id for s, _ in batch] == [0, 1, 2] and all(n == 7 for _, n in batch)
    for s, n in batch:
        s.num_computed_tokens += n
        s.token_ids.append(1)
    # Each needs a 3rd block for token 8 only when it reaches 9 tokens; grow them:
    for s in seqs:
        s.token_ids.extend([1, 1])
    batch = sch.schedule()
    assert sch.num_preemptions >= 1
    assert [s.seq_id for s in sch.waiting] == sorted(s.seq_id for s in sch.waiting)
    assert all(s.seq_id < min(w.seq_id for w in sch.waiting) for s, _ in batch)


def simulate(sch, seqs, max_new, rng):
    """Run the scheduler as the engine does, without a model: a step computes what was
    scheduled, a sequence whose tokens are all computed samples one more, and stops
    after `max_new`. Checks after every step that waiting sequences hold no blocks."""
    for s in seqs:
        sch.add(s)
    for _ in range(100_000):
        if not sch.has_unfinished():
            return
        batch = sch.schedule()
        assert all(not w.block_table for w in sch.waiting), "a waiting sequence holds blocks"
        for s, n in batch:
            s.num_computed_tokens += n
            if s.num_computed_tokens == s.num_tokens:
                s.token_ids.append(int(rng.integers(0, 4)))
                if s.num_tokens - s.num_prompt_tokens >= max_new:
                    sch.finish(s)
    raise AssertionError("the scheduler made no progress")


def test_preemption_under_prefix_sharing_strands_no_blocks():
    """Under memory pressure with shared prefixes, a sequence that fits in the cache
    on its own always completes, and every block comes back. (Waiting sequences used
    to keep the prefix blocks they had matched when admission failed; after a
    preemption put another sequence in front of them, they were stranded until a
    sequence "did not fit" in a cache it fitted in.)"""
    import numpy as np
    rng = np.random.default_rng(0)
    for trial in range(200):
        bs = int(rng.integers(2, 5))
        num_blocks = int(rng.integers(6, 14))
        cfg = EngineConfig(max_num_seqs=int(rng.integers(2, 6)), block_size=bs,
                           max_num_batched_tokens=int(rng.integers(8, 40)))
        bm = BlockManager(num_blocks, bs)
        sch = Scheduler(cfg, bm)
        shared = [7] * int(rng.integers(0, 3 * bs))
        max_new = int(rng.integers(1, 2 * bs))
        seqs = []
        for i in range(int(rng.integers(2, 8))):
            room = num_blocks * bs - len(shared) - max_new
            tail = rng.integers(0, 4, size=int(rng.integers(1, max(2, room)))).tolist()
            seqs.append(seq(i, shared + tail))
        simulate(sch, seqs, max_new, rng)
        assert not sch.failed, (trial, [s.error for s in sch.failed])
        assert bm.num_free_blocks == num_blocks and not any(bm.ref_counts), trial


def test_fork_shares_blocks_and_copies_the_partial_block_on_write():
    bm = BlockManager(8, 4)
    a = seq(0, range(6))
    assert bm.allocate(a, 6)
    a.num_computed_tokens = 6
    bm.register_full_blocks(a, 6)
    b = a.fork(1)
    bm.fork(a, b)
    assert b.block_table == a.block_table and b.num_computed_tokens == 6
    assert [bm.ref_counts[x] for x in a.block_table] == [2, 2] and bm.num_free_blocks == 6
    # b writes into the shared, half-full second block: it gets its own copy of it.
    b.token_ids.append(6)
    assert bm.blocks_needed(b, 1) == 1 and bm.allocate(b, 1)
    assert b.block_table[0] == a.block_table[0] and b.block_table[1] != a.block_table[1]
    assert bm.pop_copies() == [(a.block_table[1], b.block_table[1])] and bm.pop_copies() == []
    assert bm.ref_counts[a.block_table[1]] == 1 and bm.ref_counts[a.block_table[0]] == 2
    # a, now the only holder of its block, writes in place; a full block is never copied.
    a.token_ids.append(7)
    assert bm.allocate(a, 1) and bm.pop_copies() == []
    a.num_computed_tokens = b.num_computed_tokens = 8
    c = a.fork(2)
    bm.fork(a, c)
    c.token_ids.append(9)
    assert bm.allocate(c, 1) and bm.pop_copies() == [] and len(c.block_table) == 3
    for s in (a, b, c):
        bm.free_sequence(s)
    assert bm.num_free_blocks == 8 and all(r == 0 for r in bm.ref_counts)


def test_copy_on_write_counts_against_free_blocks():
    bm = BlockManager(3, 4)
    a = seq(0, range(3))
    bm.allocate(a, 3)
    a.num_computed_tokens = 3
    forks = [a.fork(i) for i in (1, 2, 3)]
    for f in forks:
        bm.fork(a, f)
        f.token_ids.append(3)
    assert bm.allocate(forks[0], 1) and bm.allocate(forks[1], 1)
    assert bm.num_free_blocks == 0 and not bm.allocate(forks[2], 1)   # no block left to copy into
    assert forks[2].block_table == a.block_table


def test_a_sequence_waits_while_another_scheduler_holds_blocks():
    """Two schedulers on one block manager (an AsyncEngine's plain and beam requests): a
    sequence that fits in the cache but not beside the other's blocks waits for them; it
    fails as too large only where the cache is empty."""
    cfg = EngineConfig(max_num_seqs=4, block_size=4, max_num_batched_tokens=64)
    bm = BlockManager(4, 4)
    mine, other = Scheduler(cfg, bm), Scheduler(cfg, bm)
    holder, fits, big = seq(0, range(8)), seq(1, range(100, 112)), seq(2, range(20))   # 2, 3 and 5 blocks
    other.add(holder)
    assert other.schedule() == [(holder, 8)]
    mine.add(fits)
    assert mine.schedule() == [] and not mine.failed and list(mine.waiting) == [fits]
    other.finish(holder)
    assert mine.schedule() == [(fits, 12)]
    mine.finish(fits)
    mine.add(big)
    assert mine.schedule() == [] and mine.failed == [big] and "does not fit" in big.error
    assert bm.num_free_blocks == 4
