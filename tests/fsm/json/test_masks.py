"""Automaton internals on JSON schemas (fsm/core/automaton.py, fsm/json/source.py): token
steps equal byte walks, dropped automata leave no cyclic garbage, deferred terms keep
masks exact, shortest completions, shared heads and bounded searches of tails."""
from __future__ import annotations

import itertools
import json
import random
import re
import warnings

import pytest
from oracles import live_tokens_brute_force, small_vocab
from oracles import stepped_along as _stepped_along

from structgen.fsm.core.errors import TooLargeError
from structgen.fsm.core.terms import CONCAT
from structgen.fsm.json.schema import schema_to_term
from structgen.fsm.json.source import JsonTermBuilder
from structgen.fsm.regex.syntax import regex_to_term


def test_token_steps_equal_byte_walks(smol_vocab):
    """Walks derive a token's bytes past the DFA's known cells and register only the
    state it ends in (LazyDFA.walk): the state equals the byte-by-byte steps' (run after
    it on the same automaton: a state is its term), dead and alive, through
    intersections (a date-time's leap second, an email, `not`) and literals."""
    from structgen.fsm.json.schema import build_automaton
    rng = random.Random(3)
    data = smol_vocab.token_bytes
    for schema in [{"type": "string", "format": "date-time"}, {"type": "string", "format": "email"},
                   {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array"},
                    "name": {"not": {"const": "x"}}}, "required": ["id"]}]:
        auto = build_automaton(schema, smol_vocab)
        alive = dead = 0
        for _ in range(300):
            m = auto.matcher()
            for _ in range(rng.randrange(12)):  # a random reachable state
                ids = auto.allowed_tokens(m.state)
                ids = ids[ids < len(data)]
                if not len(ids) or not m.accept_token(int(rng.choice(ids))):
                    break
            s = m.state
            t = rng.randrange(len(data)) if rng.random() < 0.5 else int(rng.choice(auto.allowed_tokens(s)))
            if t >= len(data) or not data[t]:
                continue
            got, step = auto.dfa.walk(s, data[t]), s
            for b in data[t]:
                step = step and auto.dfa.step(step, b)
            assert got == step, (schema, s, data[t])
            alive, dead = alive + (got != 0), dead + (got == 0)
        assert alive > 50 and dead > 20, (alive, dead)


def test_dropped_automata_leave_no_cyclic_garbage(smol_vocab):
    """A compiled constraint dropped by its last user is freed by reference counting
    (TokenAutomaton.owns_source): nothing of it waits for the cyclic collector, whose
    full collection would traverse it inside some later decoding step (SchemaStore's
    azure-pipelines: ~470k objects, 0.3-0.9 s). A JSON Schema with deferred pieces (an
    enum, formats), optional keys and walked states; a regex; a choice; a Lark grammar
    (parser stacks)."""
    import gc

    from structgen import fsm
    from structgen.fsm.json.schema import build_automaton
    schema = {"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"}, "mail": {"type": "string", "format": "email"},
        "kind": {"enum": [f"k{i}" for i in range(40)]}, "n": {"type": "integer", "minimum": 3},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}}, "x": {"not": {"const": 1}},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "pattern": "^[0-9]+(m|Mi)?$"}}},
        "required": ["when", "kind"]}
    text = b'{"when":"2024-02-29T23:59:60-00:00","kind":"k17","n":12,"tags":["ab"]}'
    makers = [lambda: build_automaton(schema, smol_vocab),
              lambda: fsm.compile_regex(r"[a-z]+(-[0-9]{2,4})*", smol_vocab),
              lambda: fsm.compile_choice(["yes", "no", "maybe"], smol_vocab),
              lambda: fsm.compile_grammar('start: "[" (start ("," start)*)? "]" | /[a-z]+/', smol_vocab)]
    for i, make in enumerate(makers):
        before = set(smol_vocab._cache.get("compiled", ()))
        auto = make()
        cache = smol_vocab._cache.get("compiled", {})
        for k in set(cache) - before:  # (the cache's reference: not the last one)
            del cache[k]
        m = auto.matcher()
        m = getattr(m, "inner", m)  # (stepped by bytes: the automaton's own matcher, not the keys' tracker)
        for b in (text if i == 0 else b"ab-12" if i == 1 else b"maybe" if i == 2 else b"[ab,[c]]"):
            auto.mask(m.state)
            m.state = auto.dfa.walk(m.state, bytes([b]))
            assert m.state, (i, b)
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            del auto, m
            gc.collect()
            kinds = {type(o).__name__ for o in gc.garbage}
        finally:
            gc.garbage.clear()
            gc.set_debug(0)
        assert not kinds, (i, kinds)
    # what is left of a released builder says why it cannot build a deferred piece
    from structgen.fsm.core.terms import LAZY
    auto = build_automaton({"enum": [f"v{i}" for i in range(30)]}, smol_vocab)
    tb = auto.dfa.source.tb
    deferred = [tb._interned[(LAZY, (name,))] for name in tb._deferred]
    assert deferred
    del auto
    with pytest.raises(RuntimeError, match="released"):
        tb.body(deferred[0])


def test_deferred_enums_and_ranges_keep_masks_exact(smol_vocab):
    """Scalar enums and digit ranges are built when the output reaches them (deferred
    terms; masks read an enum's words through it): masks at and inside them equal a
    token-by-token walk, and the compile leaves them unbuilt."""
    from structgen.fsm.json.schema import build_automaton
    words = [f"country-{i}" for i in range(30)] + ["c", "", "é"]
    schema = {"type": "object", "properties": {
        "c": {"enum": words + [1, 2.5, True, None]}, "n": {"type": "integer", "enum": list(range(100, 120))},
        "x": {"type": "number", "minimum": -2.5, "exclusiveMaximum": 1000}, "i": {"type": "integer", "maximum": 42}},
        "required": ["c", "n", "x", "i"], "additionalProperties": False}
    # tokens that run past a whole enum value (SmolLM2 has few): the value's tail too
    crafted = small_vocab([bytes([b]) for b in range(256)] + [
        b'"c","', b'"country-1"', b'"country-12","n', b'null,"n":1', b'1,', b'2.5,"', b'true,"n":10',
        b'"",', b'"\xc3\xa9",', b'101,"x":-', b'119,', b'-2.5', b'1000', b'42}', b'-0,', b'0.0,"i":4'])
    for vocab in (smol_vocab, crafted):
        auto = build_automaton(schema, vocab)
        tb = auto.dfa.source.tb
        assert not [k for k in tb._loaded if isinstance(k, tuple) and k[0] in ("json:enum", "json:range")]
        eos = set(vocab.eos_ids)
        for prefix in [b'{"c":', b'{"c":"', b'{"c":"country-', b'{"c":"country-1', b'{"c":tr', b'{"c":2',
                       b'{"c":null,"n":', b'{"c":null,"n":1', b'{"c":null,"n":11', b'{"c":1,"n":100,"x":',
                       b'{"c":1,"n":100,"x":-', b'{"c":1,"n":100,"x":-2.', b'{"c":1,"n":100,"x":999.9,"i":',
                       b'{"c":1,"n":100,"x":0,"i":-']:
            s = auto.dfa.walk(auto.start, prefix)
            assert s != 0, prefix
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), prefix


def test_min_chars_equal_shortest_completions():
    """TermSource.min_chars (the fewest JSON characters that complete a term, from a
    character boundary or part way through one: an escape's backslash, a UTF-8 lead
    byte) equals a search for the shortest completion with `re`, over texts of a, b, é,
    a newline, a quote and U+0001 (encodings of one, two and six bytes)."""
    import itertools

    from structgen.fsm.core.dfa import CHAR_START, TermSource, char_step
    from structgen.fsm.json.source import JsonTermBuilder
    from structgen.fsm.json.strings import StringTerms, encode_string
    alphabet = ["a", "b", "é", "\n", '"', "\x01"]
    patterns = ["(ab|é\n)*b", "a*\"\"b|é{3}", "(é|\n){2,4}a?", "[ab]*é[^b]\n", "a{0,3}b\"{2}|\n*é",
                "\x01{2}a|b\x01*é"]
    rng = random.Random(3)
    for pattern in patterns:
        tb = JsonTermBuilder()
        st, src = StringTerms(tb), TermSource(tb)
        t = st.fullmatch(pattern)
        completions = [""] + ["".join(w) for k in range(1, 6) for w in itertools.product(alphabet, repeat=k)]
        for _ in range(25):
            prefix = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
            nxt = rng.choice(alphabet)
            cut = rng.randint(0, len(encode_string(nxt)) - 1)  # bytes of the next character
            data = encode_string(prefix) + encode_string(nxt)[:cut]
            x, lex = t, CHAR_START
            for b in data:
                x, lex = tb.derive(x, b), char_step(lex, b)
            heads = [prefix] if cut == 0 else [prefix + c for c in alphabet
                                                if encode_string(c).startswith(encode_string(nxt)[:cut])]
            want = min((len(w) for h in heads for w in completions if re.fullmatch(pattern, h + w)), default=None)
            got = src.min_chars(x, lex)
            if want is None:
                assert got >= 6, (pattern, data)  # (dead, or longer than the search)
            else:
                assert got == want, (pattern, data, got, want)


def test_shared_heads_leave_intersections_as_they_were():
    """JsonTermBuilder._shared_head writes `V R1 & ~(V R2)` (and `V R1 & V R2`) as one
    term `V (...)` only where no string splits two ways, by `extenders`. Over random
    regexes on a 3-byte alphabet, every string up to 6 bytes is a member exactly where
    Python's re says it is in both concatenations (or in the first and not the second);
    and some of the pairs are taken out."""
    pieces = ["a", "b", ",", "a*", "b?", "(ab)*", "(a|ab)", "(b|a,)", "a+b", "(,a|,)", "[ab]{1,2}", "a?,", "a+b?",
              "(a|a*b)", "(,|b*,a)"]
    rng, factored = random.Random(5), 0
    words = [bytes(w) for n in range(7) for w in itertools.product(b"ab,", repeat=n)]
    # a head (not a concatenation: those nest to the right) that goes on where its tail
    # starts (a* a; a+ then b, or not), or whose alternatives start alike (a | a*b)
    chosen = [("(a*a|,)", "a", "aa"), ("(a+b?|,)", "a", "aa"), ("(a+b?|,)", "b", "bb"), ("(a|a*b)", "b", "bb"),
              ("(a*b?a|,)", "a", "aa"), ("(b|ab?){2}", "a", "aa")]
    for i in range(300):
        v, r1, r2 = chosen[i] if i < len(chosen) else \
            ("".join(rng.choice(pieces) for _ in range(rng.randint(1, 3))) for _ in range(3))
        tb = JsonTermBuilder()
        head, t1, t2 = (regex_to_term(tb, x) for x in (v, r1, r2))
        for neg in (True, False):
            second = tb.concat(head, t2)
            t = tb.intersect([tb.concat(head, t1), tb.complement(second) if neg else second])
            factored += t.kind == CONCAT
            for w in words:
                in1 = re.fullmatch(f"(?:{v})(?:{r1})", w.decode()) is not None
                in2 = re.fullmatch(f"(?:{v})(?:{r2})", w.decode()) is not None
                assert tb.matches(t, w) == (in1 and in2 != neg), (v, r1, r2, neg, w)
    assert factored >= 150, factored


def test_searches_of_tails_are_bounded():
    """An emptiness search decides a state 'plain head, then tail' by searching the tail
    (JsonTermSource._tail_empty), and that search may meet such a state of its own: at
    most TAIL_SEARCHES_MAX are under way, then the tail is searched in place. Unbounded,
    an allOf of two objects (schema_fuzz seed 11) nested searches past Python's
    recursion limit: RecursionError. Bounded, the check ends as before shared heads:
    TooLargeError, a clear error, at the max_states given (0.5 s at the 20k here)."""
    half = {"type": "object", "properties": {
        "a": {"not": {"type": "integer"}}, "dd": {"type": "string", "pattern": "[0-9]{2}"},
        "c": {"type": "array", "items": {}, "maxItems": 1, "contains": {"enum": [[1], {"k": 1}, "b"]},
              "uniqueItems": True},
        "b": {"type": "number", "exclusiveMinimum": 0.25, "maximum": 100}}, "minProperties": 2}
    other = {"type": "object", "properties": {
        "c": {"type": "array", "items": {"type": "number", "multipleOf": 0.5},
              "contains": {"type": "string", "pattern": "^x.y$"}, "minContains": 1},
        "b": {"type": "array", "items": {"type": "string", "pattern": "^(ab|cd)*$"}, "minItems": 1}},
        "required": ["b"], "patternProperties": {"^x": {"const": "z"}}, "minProperties": 1}
    schema = {"type": "object", "properties": {"e": {"allOf": [half, other]}}, "required": ["e"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (lenient: uniqueItems beside contains is dropped)
        cs = schema_to_term(schema, strict=False)
    try:
        _stepped_along(cs.dfa(max_states=20_000), b'{"e":{')
    except TooLargeError:
        pass


def test_joined_member_guesses_are_members():
    """Emptiness guesses (JsonTermSource: an intersection's parts' object members
    joined, checked by `matches`) are members: along a valid document of objects that
    each require other keys, every state's guess completes the prefix to a document
    jsonschema accepts; where two parts conflict (a const each way) nothing is guessed
    and the state is empty. (These allOfs are merged at compile time: the joining
    itself is reached by intersections that stay, e.g. dependabot's if/else.)"""
    import jsonschema

    def part(key, value, extra=None):
        props = {key: {"const": value}, **(extra or {})}
        return {"type": "object", "properties": props, "required": [key]}
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {
        "allOf": [part("a", 1), part("bb", "q"), part("c", [2])]}}}, "required": ["xs"]}
    doc = b'{"xs":[{"a":1,"bb":"q","c":[2]}]}'
    cs = schema_to_term(schema)
    src, t = cs.source()
    joined = 0
    for i, b in enumerate(doc):
        assert not src.is_empty(t), doc[:i]
        w = src.guess(t)
        if w is not None:
            jsonschema.validate(json.loads(doc[:i] + w), schema)
            joined += b'"c":[2]' in w and b'"bb":"q"' in w and doc[:i].endswith((b"{", b'{"', b'"a":1,'))
        t = cs.tb.derive(t, b)
    assert t.nullable and joined == 3, joined
    bad = {"type": "object", "properties": {"o": {"allOf": [part("a", 1), part("b", 2, {"a": {"const": 3}})]}}}
    cs = schema_to_term(bad)
    src, t = cs.source()
    for b in b'{"o":{':
        t = cs.tb.derive(t, b)
    assert src.guess(t) is None and src.is_empty(t)


def test_joined_member_guesses_keep_emptiness_exact():
    """JsonTermSource guesses an intersection whose parts each guess an object with
    other members by joining their members, counted only where `matches` says so. Over
    intersections of regexes for object tails, is_empty agrees with the core TermSource
    (no joining), and the joined guesses are members by Python's re; `"a":1}` and
    `"b":2}` meet nowhere, though their join `"a":1,"b":2}` is offered."""
    from structgen.fsm.core.dfa import TermSource
    from structgen.fsm.json.source import JsonTermSource

    m = r'"[a-c]":[0-2]'
    pairs = [(r'"a":1}', r'"b":2}'), (rf'"a":1(,{m})*}}', rf'({m},)*"b":2}}'), (rf'"a":1(,{m})*}}', rf'"b":2(,{m})*}}'),
             (rf',"a":1(,{m})*}}\]', rf'(,{m})*,"b":2}}\]'), (rf'":1(,{m})*}}', rf'":1(,{m})?,"c":0}}'),
             (rf'"a":1(,{m})*}}', rf'({m},)*"b":2}}0'),
             # (from inside a key: each part's own key first)
             (rf'(a":1|[bc]":[0-2](,{m})*,"a":1)(,{m})*}}', rf'(b":2|[ac]":[0-2](,{m})*,"b":2)(,{m})*}}')]
    found = 0
    for r1, r2 in pairs:
        tb = JsonTermBuilder()
        t = tb.intersect([regex_to_term(tb, r1), regex_to_term(tb, r2)])
        src = JsonTermSource(tb)
        empty = src.is_empty(t)
        assert empty == TermSource(tb).is_empty(t), (r1, r2)
        w = src.guess(t)
        assert w is None or re.fullmatch(r1, w.decode()) and re.fullmatch(r2, w.decode()), (r1, r2, w)
        assert w is None or not empty, (r1, r2, w)
        found += w is not None
    assert found == 4, found
