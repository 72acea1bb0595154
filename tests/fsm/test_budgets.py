"""Compile time budgets: every compiler honours `time_budget_s` and `fsm.compile_budget`,
refusing with TimeBudgetError (a TooLargeError) that names the budget, what it compiled
and where; the budget is not part of the cache key; a refused compile is not cached; the
compile pool runs its compiles under its budget. No timing is asserted here: the refusal
times are measured by benchmarks/compile_budgets.py."""
from __future__ import annotations

import pickle

import pytest
from oracles import small_vocab

from structgen import fsm
from structgen.engine.compile_pool import CompilePool, budgeted
from structgen.engine.constraints import compile_spec

TINY = 1e-9  # (past at the first clock read)
VOCAB = small_vocab([b"a", b"b", b"w", b"k", b"0", b"1", b"{", b"}", b"[", b"]", b'"', b":", b","])


def wide_object(n: int, tag: str) -> dict:
    """An object of n integer properties: enough term constructions to read the clock."""
    return {"type": "object", "properties": {"a": {"type": "object", "properties": {
        f"{tag}{i}": {"type": "integer", "maximum": i} for i in range(n)}}}}


def accepts(a, text: bytes) -> bool:
    s = a.dfa.walk(a.start, text)
    return s != 0 and a.is_accepting(s)


def many_words(n: int, tag: str) -> list[str]:
    return [f"{tag}{i}" for i in range(n)]


def big_grammar(tag: str) -> str:
    return ("start: " + " | ".join(f'"{tag}{i}" x{i}' for i in range(300)) + "\n"
            + "\n".join(f'x{i}: "a"* "{i}"' for i in range(300)))


@pytest.mark.parametrize("compile_", [
    lambda b: fsm.compile_json_schema(wide_object(3000, "p"), VOCAB, time_budget_s=b),
    lambda b: fsm.compile_regex("|".join(many_words(3000, "r")), VOCAB, time_budget_s=b),
    lambda b: fsm.compile_grammar(big_grammar("g"), VOCAB, time_budget_s=b),
    lambda b: fsm.compile_structural_tag({"type": "structural_tag", "format": {
        "type": "json_schema", "json_schema": wide_object(3000, "s")}}, VOCAB, time_budget_s=b),
], ids=["json", "regex", "grammar", "structural_tag"])
def test_every_compiler_honours_its_time_budget(compile_):
    with pytest.raises(fsm.TimeBudgetError) as got:
        compile_(TINY)
    e = got.value
    assert isinstance(e, fsm.TooLargeError) and isinstance(e, fsm.ConstraintError)
    assert e.budget_s == TINY and e.elapsed_s > TINY
    assert "time budget of 1e-09 s" in str(e) and e.what in str(e)


def test_the_error_names_the_subschema_and_survives_pickling(monkeypatch):
    """The innermost subschema being built when the deadline passes is named. (Where the
    clock is first read past a tiny budget depends on what earlier compiles left in the
    process's caches, so the deadline is made to pass inside one subschema.)"""
    from structgen.fsm.core import budget
    from structgen.fsm.json import schema as compiler
    number = compiler._Compiler._number

    def expiring(self, node, integer):
        if node.get("maximum") == 7:
            budget.current().end = 0.0
            budget.check()
        return number(self, node, integer)
    monkeypatch.setattr(compiler._Compiler, "_number", expiring)
    with pytest.raises(fsm.TimeBudgetError) as got:
        fsm.compile_json_schema(wide_object(30, "q"), VOCAB, time_budget_s=30)  # (its own scope)
    e = got.value
    assert e.what == "json schema" and e.pointer == "#/properties/a/properties/q7"
    assert "at #/properties/a/properties/q7" in str(e) and e.stage == "compiling the schema to terms"
    back = pickle.loads(pickle.dumps(e))  # (a compile worker sends it to the server)
    assert type(back) is fsm.TimeBudgetError and str(back) == str(e) and back.pointer == e.pointer


def test_a_refused_compile_is_not_cached_and_the_budget_is_not_in_the_key():
    schema = wide_object(3000, "c")
    with pytest.raises(fsm.TimeBudgetError):
        fsm.compile_json_schema(schema, VOCAB, time_budget_s=TINY)
    done = fsm.compile_json_schema(schema, VOCAB, time_budget_s=60)
    assert accepts(done, b'{"a":{"c0":0}}') and not accepts(done, b'{"a":{"c0":1}}')
    # the same compile under another budget is the cached one (a budget decides whether
    # a compile finishes, not what it makes)
    assert fsm.compile_json_schema(schema, VOCAB, time_budget_s=TINY) is done
    assert fsm.JsonOptions(time_budget_s=1) == fsm.JsonOptions(time_budget_s=2)


def test_compile_budget_encloses_compiles_and_a_tighter_option_wins():
    words = many_words(3000, "e")
    with fsm.compile_budget(TINY):
        with pytest.raises(fsm.TimeBudgetError, match="compiling the constraint"):
            fsm.compile_choice(words, VOCAB)
    with fsm.compile_budget(3600):  # (an option tighter than the enclosing budget ends first)
        with pytest.raises(fsm.TimeBudgetError, match="1e-09 s"):
            fsm.compile_regex("|".join(many_words(3000, "f")), VOCAB, time_budget_s=TINY)
    with fsm.compile_budget(None):  # no deadline: the compile takes its own option, here none
        assert accepts(fsm.compile_regex("|".join(many_words(3000, "h")), VOCAB), b"h2999")


def test_a_bad_budget_is_refused():
    for bad in (0, -1, "2", True):
        with pytest.raises(ValueError, match="time budget"):
            fsm.compile_regex("a", VOCAB, time_budget_s=bad)
        with pytest.raises(ValueError, match="time budget"):
            with fsm.compile_budget(bad):
                pass


def test_budgeted_spec_compiles_in_threads():
    spec = ("json", wide_object(3000, "t"))
    with pytest.raises(fsm.TimeBudgetError, match="json constraint"):
        budgeted(compile_spec, spec, VOCAB, TINY)
    assert accepts(budgeted(compile_spec, spec, VOCAB, 60), b'{"a":{"t0":0}}')


def test_compile_pool_workers_stop_at_the_budget():
    """A worker process compiles under the pool's budget: the compile stops itself with
    TimeBudgetError (pickled back), long before the hard limit would kill the worker."""
    with CompilePool(VOCAB, workers=1, hard_limit_s=600, budget_s=TINY) as pool:
        with pytest.raises(fsm.TimeBudgetError, match="json constraint"):
            pool.submit(("json", wide_object(3000, "w"))).result()
        assert pool.killed == 0
        assert accepts(pool.submit(("regex", "(ab|ba)")).result(), b"ba")  # (the worker goes on)


def test_the_default_budget_applies_outside_any_scope(monkeypatch):
    """(A fresh thread: outside the tests' enclosing budget.) A compile without
    time_budget_s takes DEFAULT_TIME_BUDGET_S."""
    import threading

    from structgen.fsm.core import budget
    monkeypatch.setattr(budget, "DEFAULT_TIME_BUDGET_S", TINY)
    got = []

    def run():
        try:
            fsm.compile_regex("|".join(many_words(3000, "d")), VOCAB)
        except fsm.TimeBudgetError as e:
            got.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert len(got) == 1 and got[0].budget_s == TINY
