"""compile_structural_tag: the document's language against an independent backtracking
reference (structural_reference.py: Python `re`, json + jsonschema) and, where the test
extra is installed, against XGrammar's own structural tags on the same documents; masks
brute-forced token by token on SmolLM2's vocabulary, across the boundaries where one
token ends free text and begins a trigger, or ends a JSON value and begins an end tag."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
from oracles import live_tokens_brute_force

from structgen import fsm

sys.path.insert(0, str(Path(__file__).parent))
import structural_reference as ref  # noqa: E402

AT = {"type": "any_text"}


def tag(begin, content, end):
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def st(fmt):
    return {"type": "structural_tag", "format": fmt}


# (no maxLength: XGrammar's strings with one take raw control characters and refuse escapes)
CALL = {"type": "object", "properties": {"city": {"type": "string"},
                                         "days": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["city"], "additionalProperties": False}
# (max_whitespace_cnt: XGrammar's default is unbounded, ours StructuralTagOptions.max_whitespace)
NUM = {"type": "json_schema", "max_whitespace_cnt": 20,
       "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
                       "additionalProperties": False}}
TOOLS = {"type": "triggered_tags", "triggers": ["<f"],
         "tags": [tag("<f=get>", {"type": "json_schema", "json_schema": CALL, "max_whitespace_cnt": 20}, "</f>"),
                  tag("<f=note>", {"type": "regex", "pattern": "[a-z ]{1,12}"}, "</f>")]}

# (format, valid texts the mutations start from)
SPECS = {
    "triggered": (TOOLS, ['I will look. <f=get>{"city":"Oslo","days":3}</f> done', "no call at all",
                          '<f=note>buy milk</f><f=get>{"city":"Rome"}</f>', "a < b and <g>"]),
    "triggered_one": (dict(TOOLS, stop_after_first=True), ['text <f=note>hi</f>', "just text"]),
    "triggered_required": (dict(TOOLS, at_least_one=True), ['<f=note>hi</f> then text <f=note>x</f>']),
    "triggered_exactly_one": (dict(TOOLS, at_least_one=True, stop_after_first=True), ['<f=get>{"city":"Oslo"}</f>']),
    "triggered_excludes": (dict(TOOLS, excludes=["zz"]), ["ok <f=note>a</f> fine"]),
    "reasoning": ({"type": "sequence", "elements": [tag("<think>", AT, "</think>"), NUM]},
                  ['<think>let me think: 2 < 3</think>{"a":12}', '<think></think>{ "a" : -1 }']),
    "separated": ({"type": "tags_with_separator", "separator": ",", "tags": TOOLS["tags"]},
                  ['<f=note>a</f>,<f=get>{"city":"x"}</f>', ""]),
    "separated_first": ({"type": "tags_with_separator", "separator": ";", "tags": TOOLS["tags"],
                         "stop_after_first": True, "at_least_one": True}, ["<f=note>abc</f>"]),
    "or_const_regex": ({"type": "or", "elements": [{"type": "const_string", "value": "yes"},
                                                    {"type": "regex", "pattern": r"n[o0]+"}]}, ["yes", "nooo"]),
    "tag_ends": (tag("<a>", {"type": "sequence", "elements": [{"type": "const_string", "value": "X"}, AT]},
                     ["</a>", "</b>"]), ["<a>Xhello</b>", "<a>X</a>"]),
    # stops whose end begins another: free text stops at the first trigger, even one that
    # begins inside the text before it; a tag's text only holds no end string
    "overlapping_end": (tag("<a>", AT, "aba"), ["<a>xy aba", "<a>aba", "<a>b a ab aba", "<a>xababa"]),
    "overlapping_trigger": ({"type": "triggered_tags", "triggers": ["::"],
                             "tags": [tag("::call(", {"type": "regex", "pattern": "[a-z]+"}, ")")]},
                            ["say ::call(go) ok", "a:b: c", ""]),
    "json_values": ({"type": "json_schema", "max_whitespace_cnt": 20, "json_schema": {
        "type": "object", "properties": {
            "ok": {"type": "boolean"}, "n": {"type": ["integer", "null"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
            "at": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0}}, "required": ["x"]}},
        "required": ["ok"]}},
        ['{"ok":true,"n":null,"tags":["a","b"],"at":{"x":3}}', '{"ok": false, "tags": []}', '{"ok":true,"n":-7}']),
    "repeats": ({"type": "sequence", "elements": [
        {"type": "optional", "content": {"type": "const_string", "value": "A"}},
        {"type": "plus", "content": {"type": "regex", "pattern": "[0-9]"}},
        {"type": "star", "content": {"type": "const_string", "value": "ab"}},
        {"type": "repeat", "min": 1, "max": 2, "content": {"type": "or", "elements": [
            {"type": "const_string", "value": "x"}, {"type": "const_string", "value": "yz"}]}}]},
        ["A12ababx", "0yzx", "9yz"]),
    "grammar": ({"type": "grammar", "syntax": "lark",
                 "grammar": 'start: greet " " NAME ("," NAME)*\ngreet: "hi" | "hello"\nNAME: /[a-z]+/'},
                ["hi bob", "hello a,bb,c"]),
    "prefix_begins": ({"type": "triggered_tags", "triggers": ["<"],  # (one begin is the start of another)
                       "tags": [tag("<a>", {"type": "regex", "pattern": "[a-z]+"}, "</>"),
                                tag("<a>x", {"type": "regex", "pattern": "[0-9]+"}, "</>"),
                                tag("<ab", {"type": "const_string", "value": "!"}, "</>")]},
                      ["t <a>x12</> u <a>xy</> <ab!</>", "no tag"]),
    "tags_in_a_tag": (tag("<r>", TOOLS, "</r>"), ["<r>hi <f=note>x</f> bye</r>", "<r></r>"]),
    "nested_free": ({"type": "sequence", "elements": [AT, {"type": "const_string", "value": "END"}]},
                    ["abcEND", "ENDxEND"]),
}
# texts each document refuses (XGrammar refuses them too), beside the random mutations
REFUSED = {
    "reasoning": ['<think>a</think>b</think>{"a":1}', '<think>a</think> {"a":1}', '<think>a</think>{"a":1} ',
                  '<think>a</think>{"a":1,"b":2}', '<think>a</think>{"a":"1"}'],
    "tag_ends": ["<a>Xhi</a>x</a>", "<a>X</b></a>", "<a>hi</a>", "<a>X"],
    "triggered": ["a <fx", '<f=get>{"city":"a"}</f', '<f=get> {"city":"a"}</f>', "<f=note></f>", "<f=nope>"],
    "triggered_required": ["text first <f=note>a</f>", ""],
    "triggered_one": ["<f=note>a</f>x", "<f=note>a</f><f=note>b</f>"],
    "separated_first": ["", "<f=note>a</f>;<f=note>b</f>"],
    "overlapping_end": ["<a>abaaba", "<a>x aba aba"],
    "prefix_begins": ["<a>x1y</>", "<ab?</>", "a < b"],
    "tags_in_a_tag": ["<r>a</r>b</r>", "<r>a"],
    "overlapping_trigger": ["say :::call(go)", "x::call(go):::call(a)"],
}
ALPHABET = list("<>/=fa{}\":,1 zgetnoxb()[]9-yA") + ["<f", "</f>", "<f=note>", "</think>", "::", "aba", "null",
                                                         "true", "hi"]


def mutations(text: str, rng: random.Random, n: int) -> list:
    """Random edits of `text`: delete, insert or replace a piece (an alphabet of the
    documents' own characters and markers; no exponent or '\\u', where JSON's texts
    differ from the reference's reading by design, docs/structural-tags.md)."""
    out = []
    for _ in range(n):
        t, k = text, rng.randint(0, 2)
        for _ in range(k + 1):
            i = rng.randint(0, len(t))
            op = rng.choice("dir")
            piece = rng.choice(ALPHABET)
            t = t[:i] + t[i + 1:] if op == "d" else t[:i] + piece + t[i + (op == "r"):]
        out.append(t)
    return out


def accepts(auto, text: str) -> bool:
    return auto.is_accepting(auto.dfa.walk(auto.start, text.encode()))


@pytest.fixture(scope="module")
def compiled(smol_vocab):
    return {name: fsm.compile_structural_tag(st(f), smol_vocab) for name, (f, _) in SPECS.items()}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_same_texts_as_the_reference(name, compiled):
    fmt, texts = SPECS[name]
    auto, rng = compiled[name], random.Random(name)
    for text in texts:
        assert ref.accepts(fmt, text), text  # (the examples are valid)
        for t in [text, *mutations(text, rng, 60)]:
            assert accepts(auto, t) == ref.accepts(fmt, t), (name, t)
    for t in REFUSED.get(name, ()):
        assert not accepts(auto, t) and not ref.accepts(fmt, t), (name, t)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_same_texts_and_masks_as_xgrammar(name, compiled, smol_tokenizer, smol_vocab):
    xgr = pytest.importorskip("xgrammar")
    import json
    fmt, texts = SPECS[name]
    info = xgr.TokenizerInfo.from_huggingface(smol_tokenizer, vocab_size=smol_vocab.size)
    grammar = xgr.GrammarCompiler(info).compile_structural_tag(json.dumps(st(fmt)))
    auto, rng = compiled[name], random.Random(name)

    def xg_accepts(t):
        m = xgr.GrammarMatcher(grammar, terminate_without_stop_token=True)
        return m.accept_string(t) and m.is_terminated()
    for text in texts:
        for t in [text, *mutations(text, rng, 40)]:
            assert accepts(auto, t) == xg_accepts(t), (name, t)
    for t in REFUSED.get(name, ()):
        assert not xg_accepts(t), (name, t)
    # masks along the tokens of each valid text: XGrammar's, bit for bit, but for special
    # and added tokens (ours never allows them inside text; XGrammar's free text does) and
    # for bytes that are not UTF-8 (XGrammar's free text takes a stray continuation byte);
    # after an integer's digits ours also takes a fraction of zeros (3.0 is an integer in
    # JSON Schema; XGrammar refuses it)
    width = smol_vocab.size
    keep = np.zeros(width, bool)
    keep[:len(smol_vocab.token_bytes)] = [b is not None for b in smol_vocab.token_bytes]
    for text in texts:
        ours, theirs = auto.matcher(), xgr.GrammarMatcher(grammar)
        xrow = xgr.allocate_token_bitmask(1, width)
        done = b""
        for tok in smol_tokenizer.encode(text):
            theirs.fill_next_token_bitmask(xrow)
            a, b = _bits(ours.next_token_mask(), width), _bits(xrow[0].numpy(), width)
            ours_only = [smol_vocab.token_bytes[i] for i in np.flatnonzero(a & ~b & keep)]
            assert all(done[-1:].isdigit() and t.startswith(b".") for t in ours_only), (name, text, ours_only[:5])
            xg_only = [smol_vocab.token_bytes[i] for i in np.flatnonzero(b & ~a & keep)]
            assert all(not _utf8(t) for t in xg_only), (name, text, [t for t in xg_only if _utf8(t)][:5])
            assert ours.accept_token(tok) and theirs.accept_token(tok)
            done += smol_vocab.token_bytes[tok]
        assert ours.is_accepting() and theirs.accept_token(smol_tokenizer.eos_token_id)


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _bits(words: np.ndarray, size: int) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")[:size].astype(bool)


BOUNDARY_TEXTS = [
    ("triggered", 'Sure!<f=get>{"city":"Oslo","days":3}</f>ok'),   # free text into a trigger; JSON into the end
    ("reasoning", '<think>a</think>{"a":7}'),
    ("tag_ends", "<a>Xhi</a>"),
]


@pytest.mark.parametrize("name,text", BOUNDARY_TEXTS)
def test_masks_are_exact_token_by_token(name, text, compiled, smol_tokenizer):
    """At every step, the mask holds exactly the tokens whose bytes keep the automaton
    alive (each token walked alone), EOS exactly where the text so far is complete, and
    the tokens the reference says can still complete (checked on the tokens that start
    the rest of the text and on those the mask refuses next to them)."""
    auto, fmt = compiled[name], SPECS[name][0]
    m, done = auto.matcher(), ""
    vocab = auto.vocab
    for tok in smol_tokenizer.encode(text):
        allowed = set(np.flatnonzero(_bits(m.next_token_mask(), vocab.size)).tolist())
        live = live_tokens_brute_force(auto, m.state)
        eos = set(vocab.eos_ids)
        assert allowed - eos == live
        assert (eos <= allowed) == ref.accepts(fmt, done)
        assert tok in allowed
        assert m.accept_token(tok)
        done += smol_tokenizer.decode([tok])
    assert m.is_accepting() and ref.accepts(fmt, done)


def test_straddling_tokens_are_allowed_where_they_fit(smol_vocab):
    """One token that ends free text and begins the trigger (`.<f`), and one that ends
    the JSON value and begins the end tag (`}</`), are allowed exactly where they fit."""
    v = fsm.Vocabulary((b"Hi", b".<", b"<f", b".<f", b"=get>", b'{"city":"x"', b"}</", b"f>", b"}", b"</f>", None),
                       (10,), 12)
    auto = fsm.compile_structural_tag(st(TOOLS), v)
    m = auto.matcher()
    for piece in (b"Hi", b".<f", b"=get>", b'{"city":"x"', b"}</", b"f>"):
        assert m.accept_token(v.token_bytes.index(piece)), piece
    assert m.is_accepting()
    m = auto.matcher()
    assert m.accept_tokens([0, 1]) and m.accept_token(8)  # "Hi.<}": free text, "<" not a trigger
    m = auto.matcher()
    assert m.accept_tokens([0, 3])  # "Hi.<f": the trigger, so its tags' begins only
    assert not m.accept_token(8) and not m.accept_token(0) and m.accept_token(4)
    m = auto.matcher()
    assert m.accept_tokens([3, 4, 5]) and not m.accept_token(9)  # '{"city":"x"' + "</f>": no "}"


def test_free_text_steps_stay_in_one_cached_state(smol_vocab, smol_tokenizer):
    """Inside free text with no trigger under way, every step lands in the same DFA
    state, whose mask (all text tokens) was computed once and is only copied."""
    auto = fsm.compile_structural_tag(st(TOOLS), smol_vocab)
    m = auto.matcher()
    m.accept_token(smol_tokenizer.encode("Hello")[0])
    s = m.state
    row = np.zeros(smol_vocab.num_words, np.int32)
    for tok in smol_tokenizer.encode(" there, how are you today? Fine."):
        m.fill_next_token_bitmask(row)
        assert m.accept_token(tok) and m.state == s
    assert np.array_equal(row, auto.mask(s))
    text_tokens = sum(1 for b in smol_vocab.token_bytes if b)
    assert int(np.bitwise_count(row.view(np.uint32)).sum()) >= text_tokens - 200  # (all but trigger-ish, UTF-8 halves)


def test_reasoning_end_tag_and_answer_keys_are_forced(smol_vocab, smol_tokenizer):
    """Jump-forward: after `</think>` the answer's fixed
    part (`{"a":` without whitespace) are forced."""
    fmt = {"type": "sequence", "elements": [tag("<think>", AT, "</think>"), dict(NUM, max_whitespace_cnt=0)]}
    m = fsm.compile_structural_tag(st(fmt), smol_vocab).matcher()
    assert m.forced_bytes() == b"<think>"
    assert m.accept_tokens(smol_tokenizer.encode("<think>ok</think>"))
    assert m.forced_bytes() == b'{"a":'


@pytest.mark.parametrize("spec,where", [
    (st({"type": "foo"}), "format: unknown format type 'foo'"),
    (st({"type": "const_string", "value": "a", "extra": 1}), "format: unknown field(s) 'extra'"),
    (st({"type": "sequence", "elements": [AT, {"type": "token", "token": 3}]}), "format.elements[1]: format type 'token'"),
    (st(dict(TOOLS, triggers=["<g"])), "format.tags[0]: its begin '<f=get>' starts with no trigger"),
    (st(dict(TOOLS, triggers=["<f", "<f="])), "starts with several triggers"),
    (st(tag("<a>", AT, "")), "format.end: free text (any_text) inside a tag needs a non-empty end"),
    (st({"type": "grammar", "grammar": "start: \"a\" start \"b\" | \"c\""}), "rule 'start' is recursive"),
    (st({"type": "grammar", "grammar": "root ::= \"a\"", "syntax": "ebnf"}), "format.syntax: 'ebnf'"),
    (st({"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "object"}}}}),
     "distinct keys of open objects"),
    (st({"type": "json_schema", "json_schema": {"type": "array", "uniqueItems": True}}), "uniqueItems"),
    (st({"type": "json_schema", "json_schema": {"type": "string", "pattern": "a("}}), "format.json_schema"),
    (st({"type": "any_text", "max_tokens": 5}), "format.max_tokens: not supported"),
    (st({"type": "regex", "pattern": "(a"}), "format.pattern"),
    ({"type": "structural_tag"}, "needs 'format'"),
    ({"type": "json_schema"}, "'type' must be \"structural_tag\""),
])
def test_errors_name_the_node(spec, where, smol_vocab):
    with pytest.raises(fsm.StructuralTagError, match=None) as e:
        fsm.compile_structural_tag(spec, smol_vocab)
    assert where in str(e.value), str(e.value)


def test_json_checks_skip_leaves_them_out_and_says_so(smol_vocab):
    spec = st({"type": "json_schema", "json_schema": {"type": "object"}})
    auto = fsm.compile_structural_tag(spec, smol_vocab, json_checks="skip")
    assert accepts(auto, '{"x":[1,{"y":null}]}')
    assert auto.info.relaxed and "format" in auto.info.relaxed[0]


def test_regular_grammar_and_legacy_document(smol_vocab):
    g = st({"type": "grammar", "grammar": 'start: greet NAME\ngreet: "hi" | "hello"\nNAME: /[a-z]+/\n%ignore " "'})
    auto = fsm.compile_structural_tag(g, smol_vocab)
    assert [accepts(auto, t) for t in ("hi bob", "hellobob", " hi  x ", "hey bob", "hi")] == [True] * 3 + [False] * 2
    legacy = {"type": "structural_tag", "triggers": ["<f"],
              "structures": [{"begin": "<f=get>", "schema": CALL, "end": "</f>"}]}
    auto = fsm.compile_structural_tag(legacy, smol_vocab)
    assert accepts(auto, 'x<f=get>{"city":"a"}</f>y') and not accepts(auto, 'x<f=got>')


def test_cached_per_document_and_options(smol_vocab):
    a = fsm.compile_structural_tag(st(TOOLS), smol_vocab)
    assert fsm.compile_structural_tag(st(TOOLS), smol_vocab) is a
    assert fsm.compile_structural_tag(st(TOOLS), smol_vocab, max_whitespace=0) is not a


def test_recursive_schema_inside_a_tag(smol_vocab):
    """A recursive schema that the JSON compiler makes lazy terms joins the automaton
    (jsonschema is the oracle of the values)."""
    import json

    import jsonschema
    node = {"type": "object", "properties": {"v": {"type": "integer"},
                                             "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
            "required": ["v", "next"], "additionalProperties": False}
    schema = {"$defs": {"node": node}, "$ref": "#/$defs/node"}
    auto = fsm.compile_structural_tag(st(tag("<j>", {"type": "json_schema", "json_schema": schema}, "</j>")),
                                      smol_vocab)
    for value in ('{"v":1,"next":{"v":2,"next":null}}', '{"v":1,"next":{"v":2}}', '{"v":1,"next":{"v":"2","next":null}}',
                  '{"v":1,"next":{"v":2,"next":{"v":3,"next":null}}}'):
        valid = jsonschema.Draft202012Validator(schema).is_valid(json.loads(value))
        assert accepts(auto, f"<j>{value}</j>") == valid, value


def test_shipped_to_another_process_and_other_vocabularies(smol_vocab, sp_vocab, sp_tokenizer):
    """The compiled tag travels as other constraints do (fsm/core/transport.py: the
    engine's compile workers); on SentencePiece's vocabulary (byte fallback) the masks
    stay exact, token by token."""
    from structgen.fsm.core.transport import dumps, loads
    text = 'Sure!<f=get>{"city":"Oslo","days":3}</f>ok'
    back = loads(dumps(fsm.compile_structural_tag(st(TOOLS), smol_vocab)), smol_vocab)
    assert accepts(back, text) and not accepts(back, text.replace("Oslo", "Oslo\x01"))
    auto = fsm.compile_structural_tag(st(TOOLS), sp_vocab)
    m = auto.matcher()
    for tok in sp_tokenizer.encode(text, add_special_tokens=False):
        allowed = set(np.flatnonzero(_bits(m.next_token_mask(), sp_vocab.size)).tolist())
        assert allowed - set(sp_vocab.eos_ids) == live_tokens_brute_force(auto, m.state)
        assert m.accept_token(tok), tok
    assert m.is_accepting()
