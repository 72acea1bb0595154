"""A loaded vocabulary freezes what the collector tracks (terms.freeze_long_lived): the
objects alive at load leave the old generation that full collections scan, unless
STRUCTGEN_GC_FREEZE=0."""
from __future__ import annotations

import gc

from structgen import fsm


def _vocab() -> fsm.Vocabulary:
    tokens = (None, b"a", b"ab", b"{", b"}", b'"', b"1")
    return fsm.Vocabulary(tokens, (0,), len(tokens))


def _in_old_generation(x) -> bool:
    return any(o is x for o in gc.get_objects(generation=2))


def test_objects_alive_at_load_are_frozen(monkeypatch):
    monkeypatch.delenv("STRUCTGEN_GC_FREEZE", raising=False)
    before = [[] for _ in range(3)]  # (tracked objects of the user's, alive as the vocabulary loads)
    gc.collect()  # (into the old generation)
    assert _in_old_generation(before)
    frozen = gc.get_freeze_count()
    _vocab().prepare()
    assert gc.get_freeze_count() > frozen and not _in_old_generation(before)
    gc.unfreeze()  # (back to the collector: other tests' objects stay collectable)


def test_opt_out(monkeypatch):
    monkeypatch.setenv("STRUCTGEN_GC_FREEZE", "0")
    gc.unfreeze()
    _vocab().prepare()
    assert gc.get_freeze_count() == 0
