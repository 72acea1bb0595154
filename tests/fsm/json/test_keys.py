"""An object's keys kept distinct while decoding (fsm/json_keys.py). Oracles: for masks
where the keys are endless, the automaton's own mask less the tokens after which a
partial-JSON reader written here (on decoded text, with the standard library's string
scanner) sees a key closed twice in one object; where they are bounded, every valid
document listed (few enough to write all), a token allowed exactly where some document
goes on with it; jsonschema and `json` for whole texts."""
from __future__ import annotations

import itertools
import json
import random
from json.decoder import scanstring

import jsonschema
import numpy as np
import pytest
from oracles import distinct_keys

from structgen.fsm.json.keys import KeyMatcher, KeyPlan, key_language, longest_text
from structgen.fsm.json.schema import compile_json_schema, schema_to_term

FREE = {"type": "object"}  # (any keys, any values: the universe's objects)
DICT = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"},
        "minProperties": 3}
NESTED = {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {
    "type": "object", "additionalProperties": {"type": "boolean"}}}}, "required": ["m"], "additionalProperties": False}
X_KEYS = {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
TREE = {"$ref": "#/$defs/n", "$defs": {"n": {"type": "object", "properties": {
    "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2}},
    "additionalProperties": {"type": "integer"}}}}
# bounded: few enough valid documents to list them all
NAMES = {"type": "object", "propertyNames": {"enum": ["ab", "ac", "b"]}, "additionalProperties": {"type": "boolean"}}
NAMED_STRINGS = {"type": "object", "propertyNames": {"enum": ["ab", "ac", "b"]}, "additionalProperties": {
    "enum": ["x", "y,"]}}  # (string values: tokens that close one and begin a key, `","`)
# with a unique array inside (the uniqueItems tracker's matcher within the keys')
NAMED_SETS = {"type": "object", "propertyNames": {"enum": ["a", "b"]}, "additionalProperties": {
    "type": "array", "items": {"enum": ["x", "y"]}, "uniqueItems": True}}
SHORT = {"type": "object", "patternProperties": {"^[ab]{1,2}$": {"type": "null"}}, "additionalProperties": False,
         "maxProperties": 3}
FEWER_THAN_MIN = {"type": "object", "properties": {"x": {"type": "null"}}, "propertyNames": {"enum": ["x", "a", "b"]},
                  "additionalProperties": {"type": "null"}, "minProperties": 3}


def _closes_repeat(text: str) -> bool:
    """Whether `text` (a beginning of a JSON text) closes some key that its object had."""
    stack, i, n = [], 0, len(text)
    key_next = False
    while i < n:
        c = text[i]
        if c == '"':
            try:
                s, end = scanstring(text, i + 1)
            except ValueError:  # (the string is cut short)
                return False
            if stack and stack[-1] is not None and key_next:
                if s in stack[-1]:
                    return True
                stack[-1].add(s)
                key_next = False
            i = end
            continue
        if c == "{":
            stack.append(set())
            key_next = True
        elif c == "[":
            stack.append(None)
            key_next = False
        elif c in "}]":
            stack.pop()
            key_next = False
        elif c == ",":
            key_next = bool(stack) and stack[-1] is not None
        i += 1
    return False


def _bits(mask) -> set:
    return set(np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")).tolist())


@pytest.mark.parametrize("schema, start, whitespace", [
    (FREE, '{"b":1,"c":{"b":2,"d":[{"b":3}]},"', "compact"),
    (FREE, '{ "b": 1, "c": {"b" :2}, "', "flexible"),
    (DICT, '{"a":1,"b":2,"', "compact"),
    (NESTED, '{"m":{"p":{"q":true},"', "compact"),
    (X_KEYS, '{"x-a":1,"x-', "compact"),
    (TREE, '{"kids":[{"p":1,"', "compact"),  # (recursive: the grammar's automaton)
])
def test_endless_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab, schema, start, whitespace):
    """Random walks (biased to tokens that write an earlier key whole) of the matcher:
    each mask is the automaton's less the tokens that close a repeated key, no more;
    ended texts parse with no key twice and validate."""
    auto = compile_json_schema(schema, smol_vocab, whitespace=whitespace)
    keys = auto.matcher()
    assert isinstance(keys, KeyMatcher) and not keys.plan.walks
    data, eos = smol_vocab.token_bytes, set(smol_vocab.eos_ids)
    with_quote = {t for t, b in enumerate(data) if b is not None and b'"' in b}  # (once, not per step)
    no_bytes = {t for t, b in enumerate(data) if b is None}
    rng, dropped, ended = random.Random(5), 0, 0
    for walk in range(10):
        m = auto.matcher()
        assert isinstance(m, KeyMatcher) and m.accept_tokens(smol_tokenizer.encode(start, add_special_tokens=False))
        text = start.encode()
        for _ in range(30):
            got = _bits(m.next_token_mask())
            plain = _bits(m.inner.next_token_mask())
            assert not (plain & no_bytes) - eos and max(plain, default=0) < len(data)  # (tokens with bytes)
            quoted = (plain & with_quote) - eos
            repeats = {t for t in quoted if _closes_repeat((text + data[t]).decode("utf-8", "replace"))}
            assert got == plain - repeats, (text, sorted(data[t] for t in got ^ (plain - repeats))[:5])
            dropped += len(repeats)
            if not got:
                raise AssertionError(f"cornered at {text!r}")
            keyed = [t for t in got if data[t] in _KEYISH]  # (toward writing an earlier key again)
            t = rng.choice(keyed) if keyed and rng.random() < 0.5 else rng.choice(sorted(got))
            assert m.accept_token(t)
            if t in eos:
                ended += 1
                doc = json.loads(text, object_pairs_hook=distinct_keys)
                jsonschema.validate(doc, schema)
                break
            text += data[t]
    assert dropped > 0


_KEYISH = {b"a", b"b", b"p", b"q", b"x", b"-", b"x-", b'":', b',"', b'"'}


def _documents(declared: list, others: list, values: list, lo: int = 0, hi: int | None = None) -> set:
    """Every compact document with the `declared` keys first (in that order, each
    optional) then distinct `others` in any order, values from `values`, lo..hi keys."""
    out = set()
    for r in range(len(declared) + 1):
        for head in itertools.combinations(declared, r):
            for k in range(len(others) + 1):
                for tail in itertools.permutations(others, k):
                    keys = [*head, *tail]
                    if len(keys) < lo or (hi is not None and len(keys) > hi):
                        continue
                    for vals in itertools.product(values, repeat=len(keys)):
                        out.add(json.dumps(dict(zip(keys, vals)), separators=(",", ":")).encode())
    return out


@pytest.mark.parametrize("schema, docs", [
    (NAMES, _documents([], ["ab", "ac", "b"], [True, False])),
    (NAMED_STRINGS, _documents([], ["ab", "ac", "b"], ["x", "y,"])),
    (NAMED_SETS, _documents([], ["a", "b"], [[], ["x"], ["y"], ["x", "y"], ["y", "x"]])),
    (SHORT, _documents([], ["a", "b", "aa", "ab", "ba", "bb"], [None], hi=3)),
    (FEWER_THAN_MIN, _documents(["x"], ["a", "b"], [None], lo=3)),
])
def test_bounded_masks_are_the_listed_documents(smol_vocab, schema, docs):
    """Bounded keys: walks over every branch of the masks (depth first, to the end) meet
    exactly the listed documents, and each mask allows a token exactly where some
    document goes on with its bytes (a key that can only end as an earlier one, a comma
    after every key came, are refused: nothing corners)."""
    for d in docs:
        jsonschema.validate(json.loads(d), schema)
    auto = compile_json_schema(schema, smol_vocab)
    keys = auto.matcher()
    assert isinstance(keys, KeyMatcher) and keys.plan.walks
    data, eos = smol_vocab.token_bytes, set(smol_vocab.eos_ids)
    ids: dict = {}
    for t, b in enumerate(data):
        if b and t not in eos:
            ids.setdefault(b, []).append(t)
    met, seen, todo = set(), {b""}, [(auto.matcher(), b"")]
    while todo:  # (one matcher per text: its state does not depend on how the text was cut)
        m, text = todo.pop()
        got = _bits(m.next_token_mask())
        rests = {d[len(text):] for d in docs if d.startswith(text)}
        want = {t for r in rests for k in range(1, len(r) + 1) for t in ids.get(r[:k], ())}
        if text in docs:
            want |= eos
            met.add(text)
        assert got == want, (text, sorted(data[t] for t in got ^ want)[:8])
        for t in got - eos:
            if text + data[t] not in seen:
                seen.add(text + data[t])
                c = m.copy()
                assert c.accept_token(t)
                todo.append((c, text + data[t]))
    assert met == docs


def test_texts():
    """Whole texts: a key twice in one object (written alike or escaped) is refused; the
    same key in two objects is not; fewer other keys than minProperties needs: no text."""
    cs = schema_to_term({"type": "object", "minProperties": 2})
    assert not cs.accepts('{"b":1,"b":2}') and not cs.accepts('{"b":1,"\\u0062":2}')
    assert cs.accepts('{"b":{"b":1},"c":[{"b":2},{"b":3}]}')
    assert not schema_to_term(DICT).accepts('{"a":1,"b":2,"b":3}')
    assert schema_to_term(DICT).accepts('{"a":1,"b":2,"c":3}')
    assert not schema_to_term(FEWER_THAN_MIN).accepts('{"x":null,"a":null,"a":null}')
    never = {"type": "object", "propertyNames": {"enum": ["a", "b"]}, "minProperties": 3}
    assert not any(schema_to_term(never).accepts(t) for t in ('{"a":1,"b":2,"a":3}', '{"a":1,"b":2,"b":3}'))


def test_only_where_keys_are_free():
    """No tracker where every object's keys are declared (a Pydantic model's, say)."""
    closed = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}},
                                                      "additionalProperties": False}}, "additionalProperties": False}
    assert schema_to_term(closed).keys is None
    assert schema_to_term({"type": "object", "properties": {"a": {}}, "additionalProperties": False}).keys is not None


@pytest.mark.parametrize("pattern, endless, finite", [
    ("^x-", True, False), ("^[a-z]+$", True, False), ("^[ab]{1,2}$", False, True), ("^(a|b+)$", False, False)])
def test_key_language(pattern, endless, finite):
    from structgen.fsm.core.dfa import LazyDFA
    from structgen.fsm.json.source import JsonTermBuilder, JsonTermSource
    from structgen.fsm.json.strings import StringTerms
    tb = JsonTermBuilder()
    st = StringTerms(tb)
    assert key_language(LazyDFA(JsonTermSource(tb), st.quoted(st.search(pattern)), 4096)) == (endless, finite)


@pytest.mark.parametrize("pattern", ["^[ab]{1,2}$", "^.{1,3}$", "^(ab|c)$", "^(a|b+)$", "^x-", "^[a-z]+$", "^é?.$"])
def test_longest_text_bounds_the_key_language(pattern):
    """longest_text, where it gives a bound, gives one no accepted text exceeds (the
    longest path of the key's DFA, acyclic then), and only for a finite language:
    key_language's verdict, which _free_keys then skips, is (not endless, finite)."""
    from structgen.fsm.core.dfa import LazyDFA
    from structgen.fsm.json.source import JsonTermBuilder, JsonTermSource
    from structgen.fsm.json.strings import StringTerms
    tb = JsonTermBuilder()
    st = StringTerms(tb)
    t = tb.intersect([st.quoted(st.search(pattern)), st.quoted(st.not_in(["b"]))])
    dfa = LazyDFA(JsonTermSource(tb), t, 4096)
    endless, finite = key_language(dfa)
    bound = longest_text(t)
    assert (bound is not None) == finite
    if finite:
        assert not endless
        longest = {}
        def depth(q):  # (acyclic: every state of a finite language's DFA)
            if q not in longest:
                longest[q] = max((1 + depth(dfa.step(q, b)) for b in dfa.live_bytes(q)),
                                 default=0 if dfa.accepting[q] else -1)
            return longest[q]
        assert 0 < depth(dfa.start) <= bound


def test_matcher_contract(smol_tokenizer, smol_vocab):
    """accept_token refuses a repeated key and changes nothing; rollback, copy, forced
    tokens keep the keys in step."""
    auto = compile_json_schema(FREE, smol_vocab)
    enc = lambda s: smol_tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    m = auto.matcher()
    assert not m.accept_tokens(enc('{"ab":1,"c":2,"ab":3}')) and m.state == auto.start
    assert m.accept_tokens(enc('{"ab":1,"c":2'))
    c = m.copy()
    assert not m.accept_tokens(enc(',"ab":3}'))
    assert m.accept_tokens(enc(',"abc":3}')) and m.is_accepting()
    m.rollback(len(enc(',"abc":3}')))
    assert not m.accept_tokens(enc(',"\\u0061b":3}'))
    assert c.accept_tokens(enc(',"d":{"ab":1}}')) and c.accept_token(smol_vocab.eos_ids[0]) and c.is_terminated()
    c.rollback(1)
    assert c.is_accepting()


def test_plan_reads_escapes():
    plan = KeyPlan(walks=False)
    assert not plan.accepts(b'{"\\"":1,"\\u0022":2}')
    assert plan.accepts(b'{"a\\"":1,"a":2,"\\\\":[1,{"\\\\":2}]}')
    assert not plan.accepts('{"é":1,"\\u00e9":2}'.encode())


def test_inner_tracker_does_not_narrow_the_candidates(smol_tokenizer, smol_vocab):
    """Inside a unique array's item, the uniqueItems tracker drops `"],` where it would
    close a repeat ("x" after "x"); in the same automaton state of another array it is
    allowed by that tracker, and the keys' one must still check it: after `"],` both
    keys `a`, `b` came, so no key can follow (the candidates the keys' matcher remembers
    per state are the automaton's, not a row the inner matcher narrowed first)."""
    schema = {"type": "object", "propertyNames": {"enum": ["a", "b"]}, "additionalProperties": {
        "type": "array", "items": {"type": "string"}, "uniqueItems": True}}
    auto = compile_json_schema(schema, smol_vocab)
    t = smol_vocab.token_bytes.index(b'"],')

    def at(text):
        m = auto.matcher()
        assert m.accept_tokens(smol_tokenizer.encode(text, add_special_tokens=False)), text
        return m
    first, second = at('{"a":["x","x'), at('{"a":[],"b":["x')
    assert first.state == second.state  # (the automaton cannot tell them apart)
    assert t not in _bits(first.next_token_mask())
    assert t not in _bits(second.next_token_mask()) and not second.accept_token(t)
    assert second.accept_tokens(smol_tokenizer.encode('"]}', add_special_tokens=False))


def test_memos_of_outputs_keys_stay_bounded(smol_tokenizer, smol_vocab, monkeypatch):
    """The memos keyed by the outputs' own keys (a server's requests keep adding them)
    start afresh at MAX_MEMO entries."""
    import structgen.fsm.json.unique_matcher as um
    monkeypatch.setattr(um, "MAX_MEMO", 8)
    auto = compile_json_schema(FREE, smol_vocab)
    for i in range(30):
        m = auto.matcher()
        assert m.accept_tokens(smol_tokenizer.encode('{"k%d":1,"j%d":{"a":2,"' % (i, i), add_special_tokens=False))
        m.next_token_mask()
        assert len(auto.matcher_memo["keys_held"]) <= 8
