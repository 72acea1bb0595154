"""Token automata (fsm/core/automaton.py, matcher.py, constraint.py): masks by their fast
paths (literal tries, class runs, chains, clipped repeats and bounds) equal brute-force
token walks; caches stay bounded; the matcher's contract; threads; the collector's pauses."""
from __future__ import annotations

import numpy as np
import pytest
from oracles import live_tokens_brute_force, small_vocab

from structgen import fsm
from structgen.fsm.core.terms import TermBuilder
from structgen.fsm.regex.syntax import regex_to_term


def test_constraints_without_outputs_are_refused():
    """require_output refuses a constraint whose first mask is empty (no token begins
    an output: an empty language, or one the vocabulary cannot spell) with
    ConstraintError naming it, for every kind; one that only the empty output
    satisfies passes. The automata themselves compile (acceptors of token sequences)."""
    vocab = small_vocab([b"a", b"b", b"ab", b"1", b"{", b"}", b'"'])
    empty = [lambda: fsm.compile_regex(r"[^\s\S]", vocab), lambda: fsm.compile_regex("c", vocab),
             lambda: fsm.compile_choice(["zz"], vocab), lambda: fsm.compile_json_schema(False, vocab),
             lambda: fsm.compile_json_schema({"type": "integer", "minimum": 5, "maximum": 3}, vocab),
             lambda: fsm.compile_grammar('start: "c" | "c" "a"', vocab)]
    for compile_ in empty:
        a = compile_()
        with pytest.raises(fsm.ConstraintError, match="accepts no output at all"):
            a.require_output()
    for a in (fsm.compile_regex("", vocab), fsm.compile_json_schema({"const": 1}, vocab)):
        assert a.require_output() is a  # ("": EOS at once)


def test_state_cap_raises_clear_error():
    vocab = small_vocab([b"a", b"b"])
    a = fsm.compile_regex("(a|b)*a(a|b){14}", vocab, max_states=500)
    rng = np.random.default_rng(0)
    with pytest.raises(fsm.TooLargeError, match="max_states=500"):
        for _ in range(200):  # 2**15 states exist; random walks meet 500 soon
            m = a.matcher()
            for _ in range(20):
                m.fill_next_token_bitmask(np.zeros(vocab.num_words, np.int32))
                assert m.accept_token(int(rng.integers(0, 2)))


def test_literal_words_stop_where_no_token_reaches(smol_vocab):
    """Nested objects' key paths multiply (`{"p1":{"q2":{"k3":"x"`...): literal_heads
    spells an alternation out only after a literal that some token starts with; the
    masks stay exact, token by token, also for tokens that run into the nested keys."""
    from structgen.fsm.core.automaton import literal_heads
    from structgen.fsm.json.schema import build_automaton
    inner = {"type": "object", "properties": {f"k{i}": {"enum": ["x", "y"]} for i in range(8)}}
    schema = {"type": "object", "properties": {
        f"p{i}": {"type": "object", "properties": {f"q{j}": inner for j in range(6)}} for i in range(6)}}
    toy = small_vocab([b'{"', b'{"p1":{"', b'{"p1":{"q2', b'{"p', b'":{"', b'{"p2":{"q3":{"k4":"x"', b'x"}', b'}}'])
    for vocab in (smol_vocab, toy):
        a = build_automaton(schema, vocab)
        tb, trie = a.dfa.source.tb, vocab.trie
        key = a.dfa.keys[a.start]
        spelled, _ = literal_heads(key, tb)
        heads, _ = literal_heads(key, tb, lambda w: len(trie.path(w)) == len(w))
        assert len(spelled) > 500 and len(heads) < 40, (len(spelled), len(heads))
        for prefix in ['', '{"', '{"p1":{"', '{"p2":{"q3":{"']:
            s = a.dfa.walk(a.start, prefix.encode())
            assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == \
                live_tokens_brute_force(a, s), prefix


def test_fast_paths_equal_brute_force(smol_vocab):
    """Branches that start with literal bytes descend the vocabulary trie directly
    (TokenAutomaton._walk_literals), states that loop on a wide class test byte sets
    (TokenAutomaton._chain_words); the mask must equal a token-by-token walk."""
    words = [b[1:].decode() for b in smol_vocab.token_bytes[1000:3000:20]
             if b and b[:1] == b" " and b[1:].isalpha() and b[1:].isascii()]
    cases = {
        "(" + "|".join(words) + ")": ["", words[3][:2]],
        "(the|then|there|other|)( [a-z]+)*": ["", "the", "there "],
        '"(red|green|blue)", ?[0-9]+': ['"', '"gre', '"blue"'],
        "(abc|ab|a)x*(yz|y)?": ["", "a", "abx"],
        "(<|<=|==|!=)[a-z]+|[0-9]+": ["", "<"],
        r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}": ["", "jo", "jo@x", "jo@x.org"],
        r'"([^"\\]|\\["\\/bfnrt])*"': ['"', '"héllo wörld', '"a\\'],
        r"[^\n]*\n|(?s:.{3,})": ["", "ab", "x\ny"],
        r"[a-z ]{0,5}x|[a-z ]{3,40}[0-9]{2}": ["", "ab", "abcd"],   # chains that end, split
        r'"([^"\\]|é){0,12}"': ['"', '"abcdefghij', '"ééé'],
        r"[a-z]{2}(a[a-z]*|b[0-9]*)": ["", "q"],   # the class splits two bytes in
        '[^"\n\t]*"!': ["", "ab", "é"],  # loops on every character but a few ASCII ones
        '[^"é]*"': ["", "ab"],  # loops on all characters but one: walked
        "[ -~]*(\u00e9|\u4e2d)*z": ["", "ab"],
        "[ -~]*([^\\x00-\\x7f][ -~]*)?\t": ["", "ab"],  # a character leaves the loop
        "([a-z ]|[^\\x00-\\x7f]!)*\t": ["", "ab"],  # characters that do not end the item
        "[À-ÿ a-z]{0,6}!": ["", "é", "ab"],  # some non-ASCII characters: checked one by one
        '"[a-zé中]*"': ['"', '"é'],
        '[^"' + "".join(chr(0x30 + 64 * i) for i in range(2, 32)) + ']*"': ["", "a"],  # no (C2-DF) B0: °
        "[0-9a-f]{2}-[0-9a-f]-[a-zé]!": ["a", "ab-", "ab-c-"],  # one character of a class left (x R)
    }
    runs = 0
    for pattern, prefixes in cases.items():
        a = fsm.compile_regex(pattern, smol_vocab)
        for prefix in prefixes:
            s = a.dfa.walk(a.start, prefix.encode())
            assert s != 0
            runs += pattern.startswith("[0-9a-f]{2}") and a._run_words(s, a.dfa.keys[s]) is not None
            assert set(a.allowed_tokens(s).tolist()) - set(smol_vocab.eos_ids) == \
                live_tokens_brute_force(a, s), (pattern, prefix)
    assert runs == 3


def test_enum_tries_keep_masks_exact(smol_vocab):
    """JSON enums (and regex word lists) are tries (TermBuilder.words); masks read them
    as whole words (literal_heads), followed by the rest of the document."""
    from structgen.fsm.json.schema import build_automaton
    schema = {"type": "object", "properties": {
        "c": {"enum": [f"country-{i}" for i in range(30)] + ["count", "co", "the", "then", 12, 123]},
        "n": {"type": "integer"}}, "required": ["c", "n"], "additionalProperties": False}
    toy = small_vocab([b'"co",', b'"country-1"', b'"country-12",', b'12,"', b'123,"n', b'"the', b'n",'])
    for vocab in (smol_vocab, toy):  # toy: tokens that run past a whole word
        a = build_automaton(schema, vocab)
        for prefix in ['{"c":', '{"c":"', '{"c":"co', '{"c":"country-1', '{"c":1', '{"c":"the']:
            s = a.dfa.walk(a.start, prefix.encode())
            assert s != 0
            assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == \
                live_tokens_brute_force(a, s), prefix


def test_run_lists_are_bounded(monkeypatch):
    """The per-vocabulary token lists of character-class runs keep at most
    WALK_CACHE_BYTES of arrays (here none: one entry at a time); masks stay exact when
    one is dropped and rebuilt."""
    import structgen.fsm.core.vocabulary as vocabulary
    monkeypatch.setattr(vocabulary, "WALK_CACHE_BYTES", 0)
    vocab = small_vocab([b"a", b"ab", b"abc", b"1", b"12", b"x", b"a1", b"b!", b"!", b"\xc3\xa9", b"\xc3"])
    for i, pattern in enumerate(["[ab]{0,5}x", "[0-9]*!", "[a-c]+!", "[ab]{0,5}x", "[^x]*x", "[0-9]*!"]):
        a = fsm.compile_regex(pattern, vocab, max_states=10**5 + 10 + i)  # fresh automata
        for s in [a.start, a.dfa.walk(a.start, b"a"), a.dfa.walk(a.start, b"1")]:
            if s:
                assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == \
                    live_tokens_brute_force(a, s), (pattern, s)
        assert len(vocab.columns.walks) <= 1
        assert vocab.columns.walk_bytes[0] == sum(b for _, b in vocab.columns.walks.values())


def test_walk_cache_drops_the_least_recently_used(monkeypatch):
    """TokenColumns.memo, over its byte bound, drops the entry used longest ago (a
    server's schemas reuse a few classes all the time), counting arrays as stored."""
    import numpy as np

    import structgen.fsm.core.vocabulary as vocabulary
    monkeypatch.setattr(vocabulary, "WALK_CACHE_BYTES", 3 * 1001)  # (an entry: its array, 1 for the rest)
    cols = small_vocab([b"a", b"b"]).columns
    made = []

    def make(k):
        return lambda: made.append(k) or (np.zeros(1000, dtype=np.uint8), {})
    for k in "abc":
        cols.memo(k, make(k))
    cols.memo("a", make("a"))  # a hit: a is the most recent now
    cols.memo("d", make("d"))  # over the bound: b goes
    assert set(cols.walks) == {"a", "c", "d"} and made == list("abcd")
    assert cols.walk_bytes[0] == 3 * 1001


def test_long_chain_masks_stay_exact(smol_vocab):
    """A bounded repeat longer than any token: the chain shortcut must not remember a
    partial exploration as the end of the chain (masks ~80 bytes in stay exact)."""
    a = fsm.compile_regex("[a-z ]{0,300}", smol_vocab, max_states=10**5 + 2)  # own cache slot
    s = a.start
    for i in range(120):
        a.mask(s)  # every state's first mask in turn, as a document would
        if i in (0, 40, 79, 80, 81, 119):
            assert set(a.allowed_tokens(s).tolist()) - set(smol_vocab.eos_ids) == \
                live_tokens_brute_force(a, s), i
        s = a.dfa.step(s, ord("a"))


def test_clipped_repeats_keep_masks_exact(smol_vocab):
    """Bounded repeats no token can exhaust share one mask (automaton.clip_repeats):
    heads and repeats behind a part, upper and lower bounds, around the clip edge."""
    # SmolLM2's longest tokens: 80 '#', and a newline with 80 spaces (81 bytes)
    cases = [  # pattern, prefix, the unit repeated, how many units in (ascending)
        ("#{0,100}x", b"", b"#", [0, 15, 19, 20, 21, 22, 60, 100]),  # hi crosses 80-81
        ("(##){90,100}x", b"", b"##", [0, 5, 30, 49, 50, 70, 89, 90, 100]),  # lo clips too
        ("(##){90,100}x", b"#", b"##", [0, 45]),
        ("[ \n]{100,}x", b"", b" ", [0, 10, 19, 20, 21, 100]),
        ('"(é|#){0,200}"', b'"\xc3', b"", [0]),  # the repeat behind a part (mid-character)
        ('"(é|#){0,200}"', b'"', b"#", [0, 60, 119, 120, 121, 130, 200]),
        ("(#,){0,1000}z", b"", b"#,", [0, 300]),
        ("\n {0,79}x", b"", b"", [0]), ("\n {0,81}x", b"", b"", [0]),  # behind a part
    ]
    eos = set(smol_vocab.eos_ids)
    for pattern, prefix, unit, steps in cases:
        a = fsm.compile_regex(pattern, smol_vocab)
        s, done = a.dfa.walk(a.start, prefix), 0
        for i in steps:
            s, done = a.dfa.walk(s, unit * (i - done)), i
            assert s != 0, (pattern, prefix, i)
            assert set(a.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(a, s), \
                (pattern, prefix, i)


def test_clipped_length_bounds_keep_masks_exact(smol_vocab):
    """`A AND .{0,hi}` shares A's mask once no token can reach the bound, judged by A's
    radius (TermSource.radius, clip_repeats): a hostname-like A (radius 2) and one whose
    prefixes may be 31 bytes from the end (`[a-z.]*x{30}`), around the clip edge, with
    SmolLM2's vocabulary (longest token: 81 bytes) and one whose longest token (12
    bytes) is made of A's bytes, so a bound clipped too early shows."""
    from structgen.fsm.core.automaton import TokenAutomaton
    tight = small_vocab([b"a", b".", b"x", b"aaaa", b"x" * 8, b"a." * 6, b"x" * 12, b'"', b'"1', b'x"1'])
    cases = [  # vocabulary, A, its radius, hi, the unit walked, how many units in (ascending)
        (smol_vocab, r"[a-z]{1,5}(\.[a-z]{1,5})*", 2, 130, b"abc.", [0, 1, 10, 11, 12, 13, 20, 30]),
        (smol_vocab, r"[a-z.]*x{30}", 31, 160, b"a.", [0, 10, 20, 22, 23, 24, 25, 30, 40, 60]),
        (tight, r"[a-z.]*x{30}", 31, 80, b"a", [0, 10, 20, 30, 35, 36, 37, 38, 40, 45, 49]),
        (tight, r"[a-z.]*x{30}", 31, 80, b"x", [0, 10, 29, 30, 40, 60]),
    ]
    for vocab, pattern, radius, hi, unit, steps in cases:
        tb = TermBuilder()
        shape = regex_to_term(tb, pattern)
        root = tb.concat(tb.intersect([shape, tb.repeat(tb.any_byte, 1, hi)]), regex_to_term(tb, '"[0-9]'))
        a = TokenAutomaton.from_term(tb, root, vocab)
        assert a.dfa.source.radius(shape) == radius
        assert set(a.allowed_tokens(a.start).tolist()) - set(vocab.eos_ids) == \
            live_tokens_brute_force(a, a.start), pattern  # .{1,hi}: lo 1, A without ""
        s, done = a.dfa.walk(a.start, unit[:1]), 0  # past the first byte: lo is 0
        for i in steps:
            s, done = a.dfa.walk(s, unit * (i - done)), i
            assert s != 0, (pattern, unit, i)
            assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == \
                live_tokens_brute_force(a, s), (pattern, unit, i)


def test_matcher_contract():
    vocab = small_vocab([b"a", b"b", b"ab", b"c", b"\xc3", b"\xa9"])
    eos = vocab.eos_ids[0]
    a = fsm.compile_regex("ab(c|é)", vocab)
    m = a.matcher()
    assert m.forced_bytes() == b"ab" and m.forced_tokens() == []  # "a"+"b" or "ab"
    assert not m.accept_token(3) and m.state == a.start  # refused: no change
    assert m.accept_token(2) and m.forced_bytes() == b""
    assert m.accept_token(4) and m.forced_bytes() == b"\xa9" and m.forced_tokens() == [5]
    assert not m.accept_token(eos) and m.accept_token(5) and m.is_accepting()
    assert m.accept_token(eos) and m.is_terminated() and not m.accept_token(0)
    row = np.zeros(vocab.num_words, np.int32)
    m.fill_next_token_bitmask(row)  # after the end only EOS
    assert np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist() == [eos]
    m.rollback(2)
    assert m.state == a.next_state(a.next_state(a.start, 2), 4) and not m.is_terminated()
    with pytest.raises(ValueError):
        m.rollback(5)
    assert fsm.compile_regex("ab(c|é)", vocab) is a  # cached per vocabulary


def test_shared_automaton_across_threads(smol_vocab):
    from concurrent.futures import ThreadPoolExecutor
    pattern = r"[a-z]{1,8}(-[a-z]{1,8}){0,3}@[a-z]+\.(com|org)"
    fresh = fsm.compile_regex(pattern, smol_vocab, max_states=10**5 + 1)  # a separate cache slot
    texts = ["abc-de@xy.com", "zz@q.org", "hello-world-foo@bar.com"]

    def run(text):
        m, masks = fresh.matcher(), []
        for t in [smol_vocab.token_bytes.index(bytes([c])) for c in text.encode()]:
            masks.append(m.next_token_mask().copy())
            assert m.accept_token(t)
        return masks
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(run, texts * 4))
    serial = fsm.compile_regex(pattern, smol_vocab)
    for text, masks in zip(texts * 4, parallel):
        m = serial.matcher()
        for t, mask in zip([smol_vocab.token_bytes.index(bytes([c])) for c in text.encode()], masks):
            assert np.array_equal(mask, m.next_token_mask())
            m.accept_token(t)


def test_paused_gc_nests_and_keeps_the_users_choice():
    import gc

    from structgen.fsm.core.terms import paused_gc
    was = gc.isenabled()
    try:
        gc.enable()
        with paused_gc():
            with paused_gc():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer pause still holds
        assert gc.isenabled()
        gc.disable()  # a collector the user turned off stays off
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_paused_gc_collect_young():
    """At the end of a compilation that left more than YOUNG_COLLECT objects young,
    collect_young collects them (one generation-1 run); with fewer, or where the
    collector was off before the pause, it does not; a pause alone never collects."""
    import gc

    from structgen.fsm.core.terms import YOUNG_COLLECT, paused_gc
    was = gc.isenabled()
    try:
        gc.enable()
        gc.collect()
        with paused_gc():
            kept = [[i] for i in range(YOUNG_COLLECT + 1000)]
            assert gc.get_count()[0] > YOUNG_COLLECT  # (no collection while paused)
            paused_gc().collect_young()
            assert gc.get_count() == (0, 0, 1)
            few = [[i] for i in range(100)]
            paused_gc().collect_young()
            assert gc.get_count()[0] >= 100
        gc.disable()
        with paused_gc():
            more = [[i] for i in range(YOUNG_COLLECT + 1000)]
            paused_gc().collect_young()
            assert gc.get_count()[0] > YOUNG_COLLECT
        assert not gc.isenabled()
        assert len(kept) + len(few) + len(more) > 2 * YOUNG_COLLECT
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("vocab_name", ["smol_vocab", "tekken_vocab"])
def test_class_runs_equal_brute_force_on_large_vocabularies(vocab_name, request):
    """Runs of a class whose non-ASCII members are checked (Unicode \\d and \\w, some
    accented letters) walk item* over the tokens once per vocabulary and class
    (TokenAutomaton._class_tokens), and made_of reads narrow classes (digits) and
    wide ones (a string's characters) off the lists of tokens by byte: masks equal
    token-by-token walks, on SmolLM2's vocabulary and tekken's 131k."""
    from structgen.fsm.core.automaton import made_of
    vocab = request.getfixturevalue(vocab_name)
    cases = {r"\(\d{3}\) \d{2}": ["(", "(5"], r"\w{1,4}!": ["é"], "[À-ÿa-z]{0,6}!": [""], '"[^"\\\\]*"': ['"']}
    for i, (pattern, prefixes) in enumerate(cases.items()):
        a = fsm.compile_regex(pattern, vocab, max_states=10**5 + 20 + i)  # (a fresh automaton)
        for prefix in prefixes:
            s = a.dfa.walk(a.start, prefix.encode())
            assert a._run_words(s, a.dfa.keys[s]) is not None, pattern  # (the path under test)
            assert set(a.allowed_tokens(s).tolist()) - set(vocab.eos_ids) == \
                live_tokens_brute_force(a, s), (pattern, prefix)
    cols = vocab.columns
    # (the tokens that start with one of the first tested; those with a byte outside the
    # second read off the lists; the third's, every token's byte set)
    for chars in (b"0123456789<>/", bytes(b for b in range(0x20, 0x100) if b not in b'"\\'), b"abcdefghij-_"):
        cls = np.zeros(256, dtype=bool)
        cls[list(chars)] = True
        got = cols.order[made_of(cols, cls)]
        assert set(got.tolist()) == {t for t, b in enumerate(vocab.token_bytes) if b and set(b) <= set(chars)}


@pytest.mark.parametrize("vocab_name", ["smol_vocab", "tekken_vocab"])
def test_made_of_near_a_kept_class_equals_brute_force(vocab_name, request):
    """made_of derives a class's tokens from a kept class that differs by bytes few
    tokens have (_near_made_of: bytes added, removed, both; a high byte), testing only
    those tokens: equal to a token-by-token check of every token's bytes."""
    from structgen.fsm.core import automaton
    vocab = request.getfixturevalue(vocab_name)
    cols = vocab.columns
    kept = dict(cols.walks), cols.walk_bytes[0]  # (the session's vocabulary: put back after)
    cols.walks.clear()  # (a fresh vocabulary memo: which classes are kept decides the path)
    cols.walk_bytes[0] = 0
    near = []
    real = automaton._near_made_of
    automaton_near = lambda *a: near.append(real(*a)) or near[-1]  # noqa: E731

    def classes():
        alnum = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        yield alnum + b"._%+-"  # (an email's local part: every token's byte set, once)
        yield alnum + b".-"  # its domain: 3 bytes fewer
        yield alnum + b"-"  # a label: one fewer
        yield alnum + b"-_!\xc3"  # added and removed, one of them a UTF-8 lead byte
    try:
        automaton._near_made_of = automaton_near
        for chars in classes():
            cls = np.zeros(256, dtype=bool)
            cls[list(chars)] = True
            got = cols.order[automaton.made_of(cols, cls)]
            assert set(got.tolist()) == {t for t, b in enumerate(vocab.token_bytes) if b and set(b) <= set(chars)}
    finally:
        automaton._near_made_of = real
        cols.walks.clear()
        cols.walks.update(kept[0])
        cols.walk_bytes[0] = kept[1]
    assert near[0] is None and near[1] is not None and near[2] is not None, "the path under test"


@pytest.mark.parametrize("vocab_name", ["smol_vocab", "tekken_vocab"])
def test_classes_with_the_same_non_ascii_members_share_their_verdicts(vocab_name, request):
    """Classes with the same non-ASCII members (\\w, [\\w.], [\\w.-]) keep one verdict per
    token with a byte past ASCII (_high_members): a later class walks only the tokens no
    earlier one did, and every run's mask equals token-by-token walks."""
    from structgen.fsm.core import automaton
    vocab = request.getfixturevalue(vocab_name)
    cols = vocab.columns
    kept = dict(cols.walks), cols.walk_bytes[0]  # (the session's vocabulary: put back after)
    cols.walks.clear()
    cols.walk_bytes[0] = 0
    asked, walked = [], []
    real_high, real_walk = automaton.TokenAutomaton._high_members, automaton.walk_from

    def high(self, item, some, pos):
        asked.append(len(pos))
        walked.append(0)
        automaton.walk_from = walk  # (the walks of this call only: not those of the run's other tokens)
        try:
            return real_high(self, item, some, pos)
        finally:
            automaton.walk_from = real_walk

    def walk(dfa, s, c, data, pos):
        walked[-1] += len(pos)
        return real_walk(dfa, s, c, data, pos)
    try:
        automaton.TokenAutomaton._high_members = high
        for i, pattern in enumerate([r"\w+!", r"[\w.]+!", r"[\w.-]+!"]):
            a = fsm.compile_regex(pattern, vocab, max_states=10**5 + 30 + i)  # (a fresh automaton)
            asked_before = len(asked)
            assert a._run_words(a.start, a.dfa.keys[a.start]) is not None, pattern  # (the path under test)
            assert len(asked) == asked_before + 1, pattern
            assert set(a.allowed_tokens(a.start).tolist()) == live_tokens_brute_force(a, a.start), pattern
    finally:
        automaton.TokenAutomaton._high_members, automaton.walk_from = real_high, real_walk
        cols.walks.clear()
        cols.walks.update(kept[0])
        cols.walk_bytes[0] = kept[1]
    assert asked[0] == walked[0] > 0  # \w walks all of its tokens with a byte past ASCII
    assert asked[1] > walked[1] and asked[2] > walked[2]  # the others only those with . or -


def test_char_classes_are_read_once_per_process_by_their_code_points():
    """A class charset.to_term built (`\\d`, `\\w`, a Latin-1 range) is read once per process,
    by its code points (TermBuilder.char_ranges): a second builder's term of the same class
    gets the first reading, which equals a reading of its own."""
    from structgen.fsm.core import automaton
    from structgen.fsm.regex import charset
    for cls in [r"\d", r"\w", "[à-ÿa-c]", "[a-z]", r"[^\s]"]:
        terms = []
        for _ in range(2):
            tb = TermBuilder()
            t = regex_to_term(tb, cls)
            assert t.id in tb.char_ranges, cls  # (the path under test)
            terms.append((tb, t))
        (tb1, t1), (tb2, t2) = terms
        first = automaton.char_class(tb1, t1)
        assert automaton.char_class(tb2, t2) is first, cls
        own = automaton._read_char_class(tb2, t2)
        assert (first is None) == (own is None), cls
        if own is not None:
            assert np.array_equal(first[0], own[0]) and np.array_equal(first[1], own[1]), cls
            assert first[2] == own[2], cls
        assert charset.to_term(tb2, tb2.char_ranges[t2.id]) is t2, cls


def test_json_string_classes_are_read_once_per_process_by_their_code_points():
    """So too a JSON string's class (StringTerms.char: escapes beside the raw characters),
    under a key of its own (a raw class of the same code points is another term)."""
    from structgen.fsm.core import automaton
    from structgen.fsm.json.strings import StringTerms
    from structgen.fsm.regex import charset
    for ranges in [((0x20, 0x21), (0x23, 0x10FFFF)), ((0x30, 0x39), (0xE0, 0xFF)), ((0x0A, 0x0A), (0x41, 0x5A))]:
        tb = TermBuilder()  # (the raw class of these code points, read first)
        automaton.char_class(tb, charset.to_term(tb, charset.normalize(ranges)))
        got = []
        for _ in range(2):
            tb = TermBuilder()
            t = StringTerms(tb).char(ranges)
            assert tb.char_ranges.get(t.id) == ("json", charset.normalize(ranges)), ranges  # (the path under test)
            got.append((tb, t, automaton.char_class(tb, t)))
        (_, _, first), (tb2, t2, second) = got
        assert second is first, ranges
        own = automaton._read_char_class(tb2, t2)
        assert (first is None) == (own is None), ranges
        if own is not None:
            assert np.array_equal(first[0], own[0]) and np.array_equal(first[1], own[1]), ranges
            assert first[2] == own[2], ranges


def test_prefix_words_equal_packing_from_scratch():
    """A run's packed bitmask per bound (prefix_words) is made from the nearest bound kept,
    setting or clearing the bits of the ids between: equal to packing ids[:k] afresh, along
    bounds going down (a string's counts from maxLength), up, and far apart."""
    from structgen.fsm.core.automaton import pack_ids, prefix_words
    rng = np.random.default_rng(0)
    ids = rng.permutation(5000)[:4000].astype(np.int32)
    packed: dict = {}
    for k in [3000, 2990, 2989, 2995, 4000, 100, 0, 3998, 2500, 2600]:
        got = prefix_words(ids, k, packed, 157)
        assert np.array_equal(got, pack_ids(ids[:k], 157)), k
        assert not got.flags.writeable
