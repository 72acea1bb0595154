"""uniqueItems masks while decoding (fsm/json/unique_matcher.py): the automaton's mask less
exactly the tokens that finish a repeated item, or leave it no way to end as a new one.
Oracle: a recursive partial-JSON reader written here, which finds the finished items of
each unique array in a text cut anywhere."""
from __future__ import annotations

import itertools
import json
import random
import re
from decimal import Decimal
from json.decoder import scanstring

import numpy as np
import pytest
from oracles import (
    ANY,
    CAPS,
    COUNTED,
    FLAGS_FIRST,
    FORMS,
    INTS,
    INTS_BUT,
    LETTERS,
    LISTED,
    MIXED,
    NARROWED_LITERALS,
    NATURALS,
    NOTIFY,
    NUM_TREE,
    NUMS,
    OPEN_THEN_SHORT,
    PAIRED,
    PAIRS,
    PORTS,
    POSITIVE,
    SHORT,
    SHORT_TREE,
    SPEC,
    STAGES,
    STRINGS,
    TAGGED,
    TREE,
    TUPLE_NUMS,
    VARIANTS,
    VOLUMES,
    XCODE,
    XCODES,
    small_vocab,
)
from oracles import valid_no_formats as valid

from structgen.fsm.core.matcher import TokenMatcher
from structgen.fsm.json.keys import KeyMatcher
from structgen.fsm.json.schema import compile_json_schema
from structgen.fsm.json.unique_matcher import UniqueMatcher


def _frozen(v):
    """A JSON value (numbers as Decimals) as a hashable one that equals exactly the equal
    values: objects in any key order, numbers by value, true never 1."""
    if isinstance(v, dict):
        return frozenset((k, _frozen(x)) for k, x in v.items())
    if isinstance(v, list):
        return tuple(_frozen(x) for x in v)
    return ("n", v) if isinstance(v, Decimal) else ("c", repr(v))


_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*"', re.S)  # (a string's characters and escapes, then its quote)


def _items(text: str, unique_at, unfinished=None):
    """The finished string, number and list items of the arrays at paths where
    `unique_at(path)`, in a JSON text cut anywhere (recursive descent: independent of
    the tracker's machine), as ("s", the string), ("n", the Decimal) or ("v", a list,
    an object or a literal, which its first character finishes: _frozen); `unfinished` (a
    list) gets (the items before, the raw text, "s" or "n") of an item cut short, or
    (the items before, "", ",") where the text ends after a comma."""
    out, i = [], 0

    def ws():
        nonlocal i
        while i < len(text) and text[i] in " \t\n\r":
            i += 1

    def string():  # -> the decoded string, or None where the text ends inside it
        nonlocal i
        body = _STRING_BODY.match(text, i + 1)  # (to its closing quote: escapes read past)
        if body is None:
            i = len(text)
            return None
        s = scanstring(text, i + 1)[0]  # (json.loads' own reader of a string, strict)
        i = body.end()
        return s

    def value(path):
        nonlocal i
        ws()
        if i >= len(text):
            return
        c = text[i]
        if c == '"':
            string()
        elif c == "{":
            i += 1
            while True:
                ws()
                if i >= len(text) or text[i] == "}":
                    i += 1
                    return
                if text[i] == ",":
                    i += 1
                    ws()
                if i >= len(text):
                    return
                key = string()
                if key is None:
                    return
                ws()
                i += 1  # :
                value(path + (key,))
                if i >= len(text):
                    return
        elif c == "[":
            i += 1
            seen = [] if unique_at(path) else None
            if seen is not None:
                out.append(seen)
            k = 0
            while True:
                ws()
                if i >= len(text) or text[i] == "]":
                    i += 1
                    return
                comma = text[i] == ","
                if comma:
                    i += 1
                    k += 1
                    ws()
                if i >= len(text):
                    if comma and seen is not None and unfinished is not None:
                        unfinished.append((list(seen), "", ","))  # (an item must begin)
                    return
                if seen is not None and text[i] == '"':
                    at = i
                    s = string()
                    if s is not None:
                        seen.append(("s", s))
                    elif unfinished is not None:
                        unfinished.append((list(seen), text[at + 1:], "s"))
                elif seen is not None and text[i] in "[{":  # (a list or an object, read whole: STAGES, SPEC)
                    at, depth = i, 0
                    while i < len(text):
                        if text[i] == '"':
                            if string() is None:
                                break
                            continue
                        depth += 1 if text[i] in "[{" else -1 if text[i] in "]}" else 0
                        i += 1
                        if not depth:
                            seen.append(("v", _frozen(json.loads(text[at:i], parse_int=Decimal, parse_float=Decimal))))
                            break
                    else:
                        depth = -1
                    if depth and unfinished is not None:  # (cut short)
                        unfinished.append((list(seen), text[at:], "o"))
                    # (the unique arrays inside it: compose's volume labels)
                    out.extend(_items(text[at:i], lambda p, k=k: unique_at(path + (k,) + p), unfinished))
                elif seen is not None and text[i] in "tfn":  # (a literal: its first character says which)
                    seen.append(("v", _frozen({"t": True, "f": False, "n": None}[text[i]])))
                    while i < len(text) and text[i].isalpha():
                        i += 1
                elif seen is not None and text[i] in "-0123456789":
                    j = re.compile(r"[0-9.eE+-]*").match(text, i).end()
                    if j < len(text):
                        seen.append(("n", Decimal(text[i:j])))
                    elif unfinished is not None:
                        unfinished.append((list(seen), text[i:], "n"))
                    i = j
                else:
                    value(path + (k,))
                if i >= len(text):
                    return
        else:
            while i < len(text) and text[i] not in ",]}":
                i += 1

    value(())
    return out


_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _repeats(text: str, unique_at, max_length=None, integers=False, listed=None, cornered=None) -> bool:
    """Whether a unique array repeats a finished item, or its unfinished item can only
    end as an earlier one: a string of at most max_length code points as long as that
    and an earlier item; one of the `listed` strings whose every listed ending came
    before (after a comma: every listed value did); an integer (`integers`) whose every
    ending in JSON (up to two more characters) is an earlier item; an object item
    whose every ending is one, as `cornered(before, raw)` tells (_pairs_cornered,
    _caps_cornered)."""
    cut: list = []  # (one read: the items found do not depend on whether cuts are collected)
    if any(len(set(s)) < len(s) for s in _items(text, unique_at, cut)):
        return True
    if not cut:
        return False
    before, raw, kind = cut[0]
    if kind == "o":
        return cornered is not None and cornered(before, raw)
    if listed is not None:
        if kind == ",":
            return all(("s", v) in before for v in listed)
        partial = json.loads('"' + raw + '"')  # (the listed values need no escapes)
        return all(("s", v) in before for v in listed if v.startswith(partial))
    if kind == ",":
        return False
    if kind == "n":
        if not integers:
            return False
        ends = [raw + "".join(x) for k in range(3) for x in itertools.product("0123456789.", repeat=k)]
        values = {Decimal(e) for e in ends if _JSON_NUMBER.fullmatch(e) and Decimal(e) == Decimal(e).to_integral_value()}
        return bool(values) and all(("n", v) in before for v in values)
    if max_length is None or "\ufffd" in raw or re.search(r'(^|[^\\])(\\\\)*\\$', raw):
        return False  # (a character or an escape cut short: many ways on)
    try:
        partial = json.loads('"' + raw + '"')
    except ValueError:  # (a \u escape cut short)
        return False
    return len(partial) == max_length and ("s", partial) in before


def _pairs_cornered(before: list, raw: str) -> bool:
    """Whether a PAIRS item cut short (`raw`: compact, from its `{`; keys s then n, both
    required) can only end as an earlier item: its s is known (closed, or one whole
    character: maxLength 1) and every n in 0..2 with a text (1, 1.0, 1.00...) that
    begins what came of it is an earlier item's with that s. Whitespace outside strings
    is read past."""
    raw = _compact(raw)
    head = '{"s":"'
    if not raw.startswith(head):
        return False
    body, end = raw[len(head):], None
    k = 0
    while k < len(body):
        if body[k] == "\\":
            k += 2
        elif body[k] == '"':
            end = k
            break
        else:
            k += 1
    try:
        s = json.loads('"' + body[:end] + '"')
    except ValueError:  # (an escape cut short)
        return False
    if end is None and len(s) != 1:  # (s may still be any string)
        return False
    after = body[end + 1:] if end is not None else ""
    t = after[len(',"n":'):]
    ns = [n for n in range(3) if any(x.startswith(t) for x in [str(n)] + [f"{n}." + "0" * z for z in range(1, len(t) + 2)])]
    return all(("v", _frozen({"s": s, "n": Decimal(n)})) in before for n in ns)


def _caps_cornered(before: list, raw: str) -> bool:
    """Whether a CAPS item cut short (`raw`, from its `{`) can only end as an earlier
    item, or not at all: every completion of it (n: absent, or the character begun, or
    any other; t: absent, or a list of distinct values of a and b) whose compact text
    begins what came of it (whitespace outside strings read past; more than the flexible
    mode's 20 after a bracket are those before its closing one too: it comes next) is
    an earlier item."""
    run = re.search(r"([\[{])[ \t\n\r]{21,}$", raw)
    raw = _compact(raw) + ("" if run is None else "}" if run.group(1) == "{" else "]")
    names = [None, "", "\u2603"]  # (absent, empty, one no earlier item has)
    begun = re.match(r'\{"n":"((?:[^"\\]|\\.)*)', raw)
    if begun:
        if raw[begun.end():begun.end() + 1] == "\\":  # (an escape cut short: many characters on)
            return False
        names.append(json.loads('"' + begun.group(1) + '"'))
    lists = [None, [], ["a"], ["b"], ["a", "b"], ["b", "a"]]
    ends = [{k: v for k, v in (("n", n), ("t", t)) if v is not None} for n in names for t in lists
            if n is None or len(n) <= 1]
    fits = [e for e in ends if json.dumps(e, separators=(",", ":"), ensure_ascii=False).startswith(raw)]
    return all(("v", _frozen(e)) in before for e in fits)


def _compact(raw: str) -> str:
    """A JSON text cut anywhere, without whitespace outside its strings."""
    return "".join(part if part.startswith('"') else re.sub(r"[ \t\n\r]", "", part)
                   for part in re.findall(r'"(?:[^"\\]|\\.)*(?:"|\\?$)|[^"]+', raw))


_FLAGS: dict = {}


def _token_flags(vocab) -> tuple:
    """Per token id below vocab.size: (has "[", has a quote, is led by a comma, is more than
    whitespace), boolean arrays kept per vocabulary (held: its id is not reused)."""
    hit = _FLAGS.get(id(vocab))
    if hit is None or hit[0] is not vocab:
        data = vocab.token_bytes[:vocab.size]
        hit = _FLAGS[id(vocab)] = (vocab, *(np.array([bool(f(b)) for b in data], dtype=bool) for f in (
            lambda b: b and b"[" in b, lambda b: b and b'"' in b, lambda b: (b or b"")[:1] == b",",
            lambda b: (b or b"x").strip())))
    return hit[1:]


def _walk_masks(auto, vocab, unique_at, rng, start=(), steps=40, quote_bias=0.6, max_length=None, numbers=None,
                listed=None, cornered=None):
    """A random token walk; at each step the unique mask must be the automaton's mask less
    exactly the tokens that finish a repeated item (checked on every token the mask
    allows where it allows few, else on every token with a quote and a sample of the
    others). The walk often starts an item by copying an earlier one (`numbers`
    "number" or "integer": a number too, in another of its texts), token by token, so
    that it meets repeats. Returns (the text, whether it ended, how many tokens were
    dropped)."""
    m = auto.matcher()
    m = m.inner if isinstance(m, KeyMatcher) else m  # (the keys' tracker: test_keys.py)
    assert isinstance(m, UniqueMatcher) and m.accept_tokens(start)
    plain = TokenMatcher(auto)
    row, base = np.zeros(vocab.num_words, dtype=np.int32), np.zeros(vocab.num_words, dtype=np.int32)
    data = vocab.token_bytes
    quoted = np.flatnonzero(_token_flags(vocab)[1]).tolist()  # (the tokens with a quote, in order)
    text, dropped, echo = b"".join(data[t] for t in start), 0, None
    for _ in range(steps):
        m.fill_next_token_bitmask(row)
        plain.state = m.state
        plain.fill_next_token_bitmask(base)
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab.size]
        base_bits = np.unpackbits(base.view(np.uint8), bitorder="little")[:vocab.size]
        assert not (bits & ~base_bits).any()
        assert bits.any(), text  # never a dead end
        allowed = np.flatnonzero(base_bits).tolist()
        sample = allowed if len(allowed) <= 400 else quoted + rng.sample(range(len(data)), 200)
        for t in sample:
            if base_bits[t] and data[t]:
                after = (text + data[t]).decode("utf-8", "replace")
                assert bool(bits[t]) == (not _repeats(after, unique_at, max_length, numbers == "integer", listed,
                                                      cornered)), \
                    (text, data[t])
                dropped += not bits[t]
        ids = np.flatnonzero(bits)
        if echo is None and rng.random() < 0.7 and text.endswith((b'["', b',"')):
            earlier = re.findall(rb'[\[,]"([^"\\]*")', text[:-1])  # (repeat an earlier item)
            echo = rng.choice(earlier) if earlier else None
        elif echo is None and rng.random() < 0.7 and text.endswith((b"[[", b",[")):
            earlier = re.findall(rb'[\[,]\[((?:"[^"\\]*"(?:,"[^"\\]*")*)?\])', text[:-1])  # (an earlier list)
            echo = rng.choice(earlier) if earlier else None
        elif echo is None and rng.random() < 0.7 and text.endswith((b"[{", b",{")):
            earlier = re.findall(rb'[\[,]\{([^{}]*\})', text[:-1])  # (an earlier flat object)
            echo = rng.choice(earlier) if earlier else None
        elif numbers and echo is None and rng.random() < 0.7 and text.rstrip().endswith((b"[", b",")):
            earlier = re.findall(rb"[\[,]\s*(-?[0-9][0-9.]*)(?=\s*[,\]])", text)
            if earlier:
                echo = rng.choice(earlier)
                echo += rng.choice([b"", b"0"] if b"." in echo else [b"", b".", b".0"])  # (the same value)
        fits = [t for t in ids.tolist() if data[t] and echo.startswith(data[t])] if echo else []
        if fits:
            t = max(fits, key=lambda t: len(data[t]))
            echo = echo[len(data[t]):] or None
        else:
            echo = None
            # (the allowed tokens with "[", with a quote or led by a comma, of more than
            # whitespace: in order, by per-token flags, not by scans of every allowed token)
            has_open, has_quote, comma_led, solid_bytes = _token_flags(vocab)
            opening = ids[has_open[ids]].tolist() if rng.random() < 0.3 else []
            closing = ids[has_quote[ids] | (comma_led[ids] & bool(numbers))].tolist() \
                if rng.random() < quote_bias else []
            solid = ids[solid_bytes[ids]].tolist() if rng.random() < 0.9 else []
            t = rng.choice(opening or closing or solid) if opening or closing or solid else int(rng.choice(ids))
        assert m.accept_token(t)
        if m.is_terminated():
            return text, True, dropped
        text += data[t]
    return text, False, dropped


@pytest.mark.parametrize("schema, unique_at, start, max_length", [
    (STRINGS, lambda p: p == (), "", None),
    (TAGGED, lambda p: p == ("tags",), '{"tags":[', None),
    (VARIANTS, lambda p: len(p) == 1 and (p[0] == "labels" or p[0].startswith("x-")), '{"kind":"b","x-a":[', None),
    (TREE, lambda p: p and p[-1] == "tags", '{"tags":["a"],"kids":[{"tags":[', None),
    (SHORT, lambda p: p == (), "", 2),
    (SHORT_TREE, lambda p: p and p[-1] == "tags", '{"tags":["a"],"kids":[{"tags":[', 2),  # (the grammar path)
    (OPEN_THEN_SHORT, lambda p: p == (), "", 2),  # (a bounded slot after an open one: still bounded)
])
def test_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab, schema, unique_at, start, max_length):
    _check_walks(smol_tokenizer, smol_vocab, schema, unique_at, start, max_length=max_length)


@pytest.mark.parametrize("schema, unique_at, start, numbers, whitespace", [
    (INTS, lambda p: p == (), "[", "integer", "compact"),
    (INTS, lambda p: p == (), "[", "integer", "flexible"),
    (INTS_BUT, lambda p: p == (), "[", "integer", "compact"),
    (NATURALS, lambda p: p == (), "[", "integer", "compact"),
    (POSITIVE, lambda p: p == (), "[", "number", "flexible"),
    (NUMS, lambda p: p == (), "[", "number", "compact"),
    (PORTS, lambda p: p == ("expose",), '{"expose":[', "integer", "compact"),
    (TUPLE_NUMS, lambda p: p == (), '["a",', "integer", "flexible"),
    (NUM_TREE, lambda p: p and p[-1] == "tags", '{"tags":[1],"kids":[{"tags":[', "integer", "compact"),  # (grammar)
])
def test_number_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab, schema, unique_at, start, numbers,
                                                whitespace):
    """As above, for number items: the tokens that close a repeat of a value (in any of
    its texts), and for integers those after which the item can only end as an earlier
    value ("0" once 0 came, "5." once 5 did)."""
    _check_walks(smol_tokenizer, smol_vocab, schema, unique_at, start, numbers=numbers, whitespace=whitespace)


@pytest.mark.parametrize("schema, unique_at, start, listed, whitespace", [
    (LISTED, lambda p: p == (), "", LETTERS, "compact"),
    (LISTED, lambda p: p == (), "", LETTERS, "flexible"),
    (XCODE, lambda p: p == ("osx",), '{"osx":[', XCODES, "compact"),
    (COUNTED, lambda p: p == (), "", PAIRED, "compact"),
    (COUNTED, lambda p: p == (), "", PAIRED, "flexible"),
])
def test_listed_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab, schema, unique_at, start, listed,
                                               whitespace):
    """As above, for listed strings: the tokens that close a repeat, those after which
    the item can only end as an earlier value, and once every value came, those with
    the comma that would begin another item."""
    _check_walks(smol_tokenizer, smol_vocab, schema, unique_at, start, whitespace=whitespace, listed=listed)


def test_list_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Lists of strings as items (gitlab-ci's stages): the tokens that close a list equal
    to an earlier one are dropped, and only those."""
    _check_walks(smol_tokenizer, smol_vocab, STAGES, lambda p: p == ("stages",), '{"stages":[["a"],')


def test_object_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Open objects as items (compose's ports): the tokens that close an object equal to
    an earlier one (as values: keys in any order, numbers by value) are dropped, and only
    those."""
    _check_walks(smol_tokenizer, smol_vocab, SPEC, lambda p: p == ("ports",), '{"ports":[{"name":"a"},')


@pytest.mark.parametrize("schema, start, whitespace", [
    (ANY, "[true,", "compact"),
    (ANY, "[null, [1], ", "flexible"),
    (FLAGS_FIRST, "[false,", "compact"),
    (MIXED, "[", "compact"),
    (NARROWED_LITERALS, "[true,", "compact"),
])
def test_literal_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab, schema, start, whitespace):
    """Any values as items: the tokens that begin a literal that came before (true,
    false, null), or close a list, an object, a string or a number equal to an earlier
    one, are dropped, and only those; literals narrowed beside an endless kind too."""
    _check_walks(smol_tokenizer, smol_vocab, schema, lambda p: p == (), start, whitespace=whitespace, numbers="number")


def test_literal_repeat_beginning(smol_tokenizer, smol_vocab):
    """A literal that came is refused at its first byte, from between items and with a
    comma; the others stay; the second of two booleans can only be the other one."""
    data = smol_vocab.token_bytes
    auto = compile_json_schema(ANY, smol_vocab)
    _check_closings(auto, data, [("[true,", b"t", False), ("[true,", b"true", False), ("[true,", b"f", True),
                                 ('[null,"a"', b",", True), ("[null,1", b"0", True), ("[null,[null", b"]", True),
                                 ("[null,[null],[null", b"]", False), ("[null,false,true,", b"n", False),
                                 ("[null,false,true,", b"[", True)])
    _check_closings(compile_json_schema(FLAGS_FIRST, smol_vocab), data, [("[true,", b"t", False),
                                                                          ("[true,", b"f", True)])


def _allowed_after(auto, data, before: str, token: bytes) -> tuple[bool, bool]:
    """(Whether the mask allows `token` after the text `before`, spelt one byte a
    token; whether accept_token takes it)."""
    m = auto.matcher()
    assert m.accept_tokens([data.index(bytes([c])) for c in before.encode()]), before
    t = data.index(token)
    bits = np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")
    return bool(bits[t]), m.accept_token(t)


def _check_closings(auto, data, cases) -> None:
    """For each (text before, token, ok): the mask allows the token after the text, and
    accept_token takes it, exactly where ok (_allowed_after)."""
    for before, token, ok in cases:
        assert _allowed_after(auto, data, before, token) == (ok, ok), (before, token)


def test_closed_object_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Closed objects as items: the tokens that close an object equal to an earlier one
    are dropped, and those after which it can only end as one (its s known and every n
    it may still take came with that s), and only those."""
    for whitespace in ("compact", "flexible"):
        _check_walks(smol_tokenizer, smol_vocab, PAIRS, lambda p: p == (), '[{"s":"a","n":1},{"s":"a","n":0},',
                     whitespace, cornered=_pairs_cornered, quote_bias=0.3)


def test_captured_closed_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Closed objects with a unique list below as items: the tokens that close an object
    or a list item equal to an earlier one are dropped, and those after which the object
    can only end as an earlier one or not at all (its list's comma once
    {"n":"x","t":["a","b"]} came: "b" alone is left, which ends it as that one), and only
    those."""
    for whitespace in ("compact", "flexible"):
        _check_walks(smol_tokenizer, smol_vocab, CAPS, lambda p: p == () or p[1:] == ("t",),
                     '[{"n":"x","t":["a","b"]},{"n":"x","t":["b"]},', whitespace, cornered=_caps_cornered,
                     quote_bias=0.3)
    _check_closings(compile_json_schema(CAPS, smol_vocab), smol_vocab.token_bytes, [
        ('[{"n":"x","t":["a","b"]},{"n":"x","t":["a"', b",", False), ('[{"n":"x","t":["a","b"]},{"n":"x","t":["a"', b"]", True),
        ('[{"n":"x","t":["a","b"]},{"n":"y","t":["a"', b",", True), ('[{"n":"x","t":["a"]},{"n":"x","t":["a"', b"]", False),
        ('[{"n":"x","t":["a"]},{"n":"x","t":["a"', b",", True), ('[{"n":"x"},{"n":"x"', b"}", False),
        ('[{"n":"x","t":["a"]},{"n":"x","t":["a","', b"a", False)])
    _check_closings(compile_json_schema(NOTIFY, smol_vocab), smol_vocab.token_bytes, [
        ('{"slack":[{"rooms":["a:b"]},{"rooms":["a:b"]', b"}", False),
        ('{"slack":[{"rooms":["a:b"]},{"rooms":["a:b"]', b",", True),
        ('{"slack":[{"rooms":[{"secure":"x"}]},{"rooms":[{"secure":"x"}]', b"}", False),
        ('{"slack":[{"rooms":[{"secure":"x"}]},{"rooms":[{"secure":"x"}]', b",", True),
        ('{"slack":[{"rooms":[{"secure":"x"}]},{"rooms":[{"secure":"x"}', b"]", True),  # (then "on")
        ('{"slack":[{"rooms":[{"secure":"x"},"a:b"]},{"rooms":[{"secure":"x"},"a:b"', b"]}", False),
        ('{"slack":[{"rooms":[{"secure":"x"},"a:b"]},{"rooms":[{"secure":"x"},{"secure":"x', b'"}', False)])


def test_discriminated_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Where an item's `type` decides that its options are unique (if/then), the mask drops
    their repeats, and only where it does: a textarea's may repeat."""
    _check_walks(smol_tokenizer, smol_vocab, FORMS["items"], lambda p: p == ("options",),
                 '{"type":"dropdown","options":["a",')
    _check_closings(compile_json_schema(FORMS, smol_vocab), smol_vocab.token_bytes, [
        ('[{"type":"dropdown","options":["a","a', b'"', False), ('[{"type":"textarea","options":["a","a', b'"', True),
        ('[{"tag":["x"],"type":"dropdown","id":"q","options":["a","a', b'"', False),
        ('[{"type":"checks","options":[1,1', b"]", False)])


@pytest.mark.slow   # (about 30 s of CPU: the other unique-mask walks stay on the default path)
def test_nested_unique_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Open objects as items with a unique list below (compose's volumes): the tokens
    that close an object equal to an earlier one, or a label equal to an earlier one of
    its list, are dropped, and only those."""
    _check_walks(smol_tokenizer, smol_vocab, VOLUMES, lambda p: p == ("volumes",) or p[-1:] == ("labels",),
                 '{"volumes":[{"type":"volume","volume":{"labels":["a"]}},{"type":"volume","volume":{"labels":["a",')
    _check_closings(compile_json_schema(VOLUMES, smol_vocab), smol_vocab.token_bytes, [
        ('{"volumes":[{"type":"bind"},{"type":"bind"', b"}", False),
        ('{"volumes":[{"type":"bind"},{"type":"bind","x-a":[1', b"]}", True),
        ('{"volumes":[{"type":"bind","x-a":[1]},{"type":"bind","x-a":[1', b"]}", False),
        ('{"volumes":[{"type":"bind","x-a":"]"},{"type":"bind","x-a":"]', b'"}', False),
        ('{"volumes":[{"type":"volume","volume":{}},{"type":"volume","volume":{', b"}}", False),
        ('{"volumes":[{"type":"volume","volume":{}},{"type":"volume","volume":{', b"}", True)])


def test_object_repeat_closing(smol_tokenizer, smol_vocab):
    """The `}` that would close a repeated object is refused (another key goes on), and
    a nested object's `}` is not."""
    auto = compile_json_schema(SPEC, smol_vocab)
    cases = [('{"ports":[{"target":8},{"target":8', b"}", False),
             ('{"ports":[{"target":8},{"target":9', b"}", True), ('{"ports":[{"bind":{}},{"bind":{}', b"}", False),
             ('{"ports":[{"bind":{}},{"bind":{', b"}", True)]
    _check_closings(auto, smol_vocab.token_bytes, cases)
    for before, _, ok in cases:
        if not ok:  # (another key goes on)
            m = auto.matcher()
            assert m.accept_tokens(smol_tokenizer.encode(before + ',"x-1":0}', add_special_tokens=False)), before


def test_closed_object_number_endings(smol_tokenizer, smol_vocab):
    """In a closed object item, a number's dot or trailing zeros may leave it no way on
    but an earlier value (`{"n":1,"m":0` after {"n":1,"m":0}), and the tokens that make
    them are dropped; a digit that makes a new value is not. (Integers are written
    without a fraction: `{"n":1.` is refused whatever came before.)"""
    items = {"type": "object", "required": ["n"], "additionalProperties": False,
             "properties": {"n": {"type": "integer"}, "m": {"type": "number", "maximum": 1}}}
    only_n = {"type": "array", "uniqueItems": True, "items": items | {"properties": {"n": {"type": "integer"}}}}
    n_and_m = {"type": "array", "uniqueItems": True, "items": items}
    data = smol_vocab.token_bytes
    _check_closings(compile_json_schema(only_n, smol_vocab), data, [
        ('[{"n":1},{"n":1', b".", False), ('[{"n":1},{"n":1', b"0", True), ('[{"n":1},{"n":1', b"}", False)])
    _check_closings(compile_json_schema(n_and_m, smol_vocab), data, [
        ('[{"n":1},{"n":1', b".", False), ('[{"n":1},{"n":1', b",", True),
        ('[{"n":1,"m":1},{"n":1,"m":', b"1", False), ('[{"n":1,"m":1},{"n":1,"m":', b"0", True),
        ('[{"n":1,"m":0},{"n":1,"m":0', b".", True), ('[{"n":1,"m":0.5},{"n":1,"m":0.5', b"0", True),
        ('[{"n":1,"m":0.5},{"n":1,"m":0.5', b"1", True), ('[{"n":1,"m":0.5},{"n":1,"m":0.5', b"}", False)])


def test_list_repeat_closing(smol_tokenizer, smol_vocab):
    """The `]` that would close a repeated list is refused, from outside a string and
    from inside one; another item goes on."""
    auto = compile_json_schema(STAGES, smol_vocab)
    data = smol_vocab.token_bytes
    for before, closing in [('{"stages":[["a","b"],["a","b"', b"]"), ('{"stages":[["a","b"],["a","b', b'"]')]:
        m = auto.matcher()
        assert m.accept_tokens([data.index(bytes([c])) for c in before.encode()])
        t = data.index(closing)
        bits = np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")
        assert not bits[t] and not m.accept_token(t), before
        assert m.accept_tokens(smol_tokenizer.encode('c"]' if before.endswith("b") else ',"c"]',
                                                     add_special_tokens=False)), before


def test_listed_values_used_up(smol_tokenizer, smol_vocab):
    """Every listed value came: the mask allows `]` and no token with a comma (the
    array ends, it cannot dead-end); before that, a comma is allowed."""
    auto = compile_json_schema(LISTED, smol_vocab)
    data = smol_vocab.token_bytes
    commas = [t for t, b in enumerate(data) if b and b"," in b]
    close, comma = data.index(b"]"), data.index(b",")
    m = auto.matcher()
    assert m.accept_tokens(smol_tokenizer.encode('["a","ab","b","ba"', add_special_tokens=False))
    bits = np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")
    assert bits[comma] and bits[close]
    assert m.accept_tokens(smol_tokenizer.encode(',"c"', add_special_tokens=False))
    bits = np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")
    assert bits[close] and not bits[commas].any()
    assert not m.accept_token(comma)
    assert m.accept_token(close) and m.is_accepting()


def _check_walks(tokenizer, vocab, schema, unique_at, start, whitespace="compact", **walk):
    auto = compile_json_schema(schema, vocab, whitespace=whitespace)
    rng = random.Random(3)
    ended = dropped = 0
    start = tokenizer.encode(start, add_special_tokens=False)
    for _ in range(12):
        text, done, d = _walk_masks(auto, vocab, unique_at, rng, start, **walk)
        dropped += d
        if done:
            ended += 1
            assert valid(schema, json.loads(text)), text
    assert dropped > 0  # (the walks met repeats to drop)


@pytest.mark.parametrize("max_length", [None, 2])
def test_tokens_of_several_items(max_length):
    """A vocabulary whose tokens close one item and make more (`1,1`, `,"a"`, `",0`):
    the mask still drops exactly the repeats (every token the mask allows is checked)."""
    many = [b"1,1", b',"a"', b',"1"', b'"1",1', b'",1,', b'",0', b'",0]', b"1.", b"0]", b",-1,", b"5,", b",5",
            b", 5,", b'"a","a"', b'1,"1"', b',"1",', b",0", b"2,2]", b'a","a', b"0.0,0", b"7,7.0", b"-1]", b'1,",5,']
    vocab = small_vocab([bytes([b]) for b in range(32, 127)] + many)
    items = {"type": ["string", "integer"]} | ({"maxLength": max_length} if max_length else {})
    schema = {"type": "array", "items": items, "uniqueItems": True}
    auto = compile_json_schema(schema, vocab)
    index = {b: t for t, b in enumerate(vocab.token_bytes)}
    for before, token, ok in [
            ('["a",5', b',"a"', False), ('["a",5', b',"1"', True), ('[1,"b"', b",-1,", True),
            ('[1,"1",-1', b",-1,", False), ('[0,"x"', b",0", False), ('[1,"x"', b",0", True),
            ('[7,"x"', b"7,7.0", False), ('[0,"x",', b"0.0,0", False), ('["1"', b',"1"', False),
            ('[1,"a"', b',"1",', True), ('[5,"', b'1,",5,', False), ('[6,"', b'1,",5,', True)]:
        m = auto.matcher()
        assert m.accept_tokens([index[bytes([c])] for c in before.encode()])
        t = index[token]
        assert bool(m.next_token_mask().view(np.uint32)[t >> 5] >> (t & 31) & 1) == ok, (before, token)
        assert m.accept_token(t) == ok
    rng, dropped, ended = random.Random(5), 0, 0
    for _ in range(30):
        text, done, d = _walk_masks(auto, vocab, lambda p: p == (), rng, steps=30, max_length=max_length,
                                    numbers="integer")
        dropped += d
        if done:
            ended += 1
            assert valid(schema, json.loads(text)), text
    assert dropped > 0 and ended > 0


def test_bounded_after_open_slot(smol_tokenizer, smol_vocab):
    """Items of at most 2 characters after an open first one: once an item is "ab" and
    "ab" came before, it can only end as a repeat, so the token that makes it is dropped."""
    auto = compile_json_schema(OPEN_THEN_SHORT, smol_vocab)
    ids = smol_tokenizer.encode('["x","ab","ab', add_special_tokens=False)
    assert smol_vocab.token_bytes[ids[-1]] == b"ab"
    m = auto.matcher()
    assert m.accept_tokens(ids[:-1])
    mask = m.next_token_mask().view(np.uint32)
    assert not mask[ids[-1] >> 5] >> (ids[-1] & 31) & 1 and mask.any()
    assert not m.accept_token(ids[-1])


def test_mask_after_a_backslash(smol_vocab):
    """Right after a backslash in an item, a token may escape a quote and close the item
    with the next one: the mask drops it where that item came before."""
    auto = compile_json_schema(STRINGS, smol_vocab)
    data = smol_vocab.token_bytes
    ids = {b: data.index(b) for b in (b'["', b'\\"', b'",', b'"', b'\\', b'""')}
    m = auto.matcher()
    assert m.accept_tokens([ids[b'["'], ids[b'\\"'], ids[b'",'], ids[b'"'], ids[b'\\']])  # ["\"","\\
    t = ids[b'""']
    assert not m.next_token_mask().view(np.uint32)[t >> 5] >> (t & 31) & 1
    assert not m.accept_token(t) and m.accept_token(ids[b'",'])
