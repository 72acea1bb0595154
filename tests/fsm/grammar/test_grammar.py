"""Lark grammar constraints (fsm/grammar.py) against independent oracles.

Oracles: lark's Earley parser with lexer="dynamic_complete" decides sentences (any
split into lexemes); prefix-ness is decided by `Oracle` below, which lexes with the
third-party `regex` module's partial matching and parses with lark's own LALR
interactive parser, sharing no code with fsm/grammar.py.
"""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import regex
from lark import Lark, Token
from lark.exceptions import LarkError
from oracles import GRAMMARS, LALR_EXTRA, small_vocab
from oracles import JSON_GRAMMAR as JSON
from oracles import SQL_GRAMMAR as SQL

from structgen import fsm
from structgen.fsm.core.errors import GrammarError
from structgen.fsm.core.terms import TermBuilder
from structgen.fsm.core.vocabulary import TokenColumns
from structgen.fsm.grammar.automaton import compile_cfg, compile_grammar
from structgen.fsm.regex.syntax import regex_to_term

# -- documents in and out of the grammars (oracles.GRAMMARS) --------------------------------
DOCUMENTS = {
    "arith": ["1 + 2 * (3 - 4.5) / -6", "((1))", "-(-2e3)*7", "12"],
    "json": ['{"a": [1, 2.5e-3, true, null], "b": {"c": "x\\"y\\u00e9 \u00e9"}}', "[]",
             ' [ {} , "" ] ', "-0.5"],
    "sql": ["SELECT a, b AS c FROM t WHERE a = 1 AND NOT b <> 'x' ORDER BY a DESC LIMIT 5;",
            "select count(*) from users u join orders o on u.id = o.uid group by u.id",
            "Select Distinct x From y Where (x Is Not Null Or z >= 3)"],
    "toy": ["x = 1 + 2 * y; // comment\nif (x > 2) { print(x); } else { /* c */ y = f(x, 3); }",
            "while (a < 10) { a = a + 1; { b = \"s\"; } }", "", "/* a */ // b"],
}

INVALID = {
    "arith": ["1 +", "(1", "1 2", "+1", "1 * * 2", ""],
    "json": ['{"a" 1}', "[1,]", '{"a":1,}', '"abc', "tru", ""],
    "sql": ["SELECT FROM t", "SELECT a FROM", "SELECT a FROM t LIMIT x", "select a from t where x ="],
    "toy": ["x = 1", "if (x) print(x);", "{", "/* unterminated", "x = 1; */", "{ //}",
            "{ /* */ */ }"],
}


# -- the oracle ---------------------------------------------------------------------------
class Oracle:
    """Prefix and sentence decisions that share no code with fsm/grammar.py."""

    def __init__(self, text: str, start: str = "start"):
        self.earley = Lark(text, parser="earley", lexer="dynamic_complete", start=start)
        self.lalr = Lark(text, parser="lalr", start=start)
        self.terms = {}
        for t in self.lalr.terminals:
            lazy = bool(regex.search(r"(?<!\\)[*+?}]\?", t.pattern.value))
            self.terms[t.name] = (regex.compile(t.pattern.to_regexp()), lazy)
        self.ignore = list(self.lalr.ignore_tokens)
        self._parsers = {}
        self._accepts = {}
        root = self.lalr.parse_interactive("")
        self.root = self._key(root)
        self._configs = {"": {(self.root, None, "")}}  # (configs by text: see configs)

    def _key(self, ip):
        k = tuple(ip.parser_state.state_stack)
        self._parsers.setdefault(k, ip)
        return k

    def accepts(self, k):
        a = self._accepts.get(k)
        if a is None:
            a = self._accepts[k] = self._parsers[k].accepts()
        return a

    def feed(self, k, name):
        ip = self._parsers[k].copy()
        ip.feed_token(Token(name, ""))
        return self._key(ip)

    def full(self, name, s, after=None):
        """s is a lexeme: Python's preferred match of the pattern on s is all of s (what
        Earley's dynamic_complete lexer takes, from truncations of the input); `after`:
        the character after it ("" at the end), which this oracle does not read."""
        pat, _ = self.terms[name]
        m = pat.match(s)
        return m is not None and m.group() == s

    def partial(self, name, s):
        """s is a prefix of a lexeme (regex partial matching; for a lazy pattern, a
        lexeme must also be found by one of a few completions)."""
        pat, lazy = self.terms[name]
        if not pat.fullmatch(s, partial=True):
            return False
        return not lazy or any(self.full(name, s + c) for c in CLOSERS)

    def start_configs(self, k, ch):
        out = set()
        for name in sorted(self.accepts(k) - {"$END"}) + self.ignore:
            if self.partial(name, ch):
                out.add((k, name, ch))
        return out

    def step(self, configs, ch):
        out = set()
        for k, name, lex in configs:
            if name is None:
                out |= self.start_configs(k, ch)
                continue
            if self.partial(name, lex + ch):
                out.add((k, name, lex + ch))
            if self.full(name, lex, ch):
                if name in self.ignore:  # Earley takes the longest match of an ignored terminal
                    if not self.partial(name, lex + ch):
                        out |= self.start_configs(k, ch)
                else:
                    out |= self.start_configs(self.feed(k, name), ch)
        return out

    def configs(self, text: str):
        """The configurations after `text` (empty: not a prefix), stepped character by
        character from those of its longest prefix already stepped: a brute-force mask asks
        for prefix + token over the whole vocabulary, and steps are a pure function of the
        text. (The sets returned are shared: callers only read them.)"""
        memo = self._configs
        if len(memo) > 200_000:  # (a bound on memory; a cleared entry is stepped again)
            root = memo[""]
            memo.clear()
            memo[""] = root
        i = len(text)
        while text[:i] not in memo:
            i -= 1
        c = memo[text[:i]]
        for j in range(i, len(text)):
            if c:
                c = self.step(c, text[j])
            memo[text[:j + 1]] = c
        return c

    def is_prefix(self, data: bytes) -> bool:
        try:
            return bool(self.configs(data.decode("utf-8")))
        except UnicodeDecodeError as e:
            if e.end != len(data) or len(data) - e.start != 1 or not 0xC2 <= data[-1] <= 0xDF:
                return False  # invalid UTF-8, or a split we do not enumerate
            return any(self.is_prefix(data + bytes([c])) for c in range(0x80, 0xC0))

    def is_sentence(self, data: bytes) -> bool:
        try:
            self.earley.parse(data.decode("utf-8"))
            return True
        except (LarkError, UnicodeDecodeError):
            return False


CLOSERS = ["", "*/", "/", '"', 'x"', "\n", "x*/"]
_ORACLES: dict = {}


def oracle(name) -> Oracle:
    if name not in _ORACLES:
        _ORACLES[name] = Oracle(GRAMMARS[name])
    return _ORACLES[name]


ALPHABET = {
    "arith": "0123456789.e+-*/() ",
    "json": '{}[]:,"\\ 0123456789.-+eEtrufalsn\u00e9x',
    "sql": "selctfromwhSELCTFROMWH abnd*,=<>'();0123._",
    "toy": 'xyif(){}=;+-*/<>"0123 \nelswhpnt_',
}
MULTI = {
    "arith": ["12", "3.5", "+ (", ") *", "e-", "1e", " -", "((", "))"],
    "json": ['{"', '":', '",', '"}', "true", "null", "false", ', "', '": "', "},{", "[[", "]]",
             '"\u00e9\u00e9"', "\u00e9", "\\u00e9", "12.5", "e+3", "\xc3", "\xa9"],
    "sql": ["SELECT", "select", " FROM", "from", " WHERE", " AND ", "ORDER BY", " order",
            " by ", "LIMIT ", "count(*)", "'abc'", " AS ", "as", "a.b", "NOT ", "IS NULL",
            "join", " on ", "selecta", "DESC"],
    "toy": ["if", "if (", "while", "print(", "else", "{ ", "} ", "//", "/*", "*/", "\n}",
            "x = ", "==", "<=", "abc", '"s"', "f(", ", ", "/**/", "= 1;"],
}


def grammar_vocab(name, seed=0):
    rng = random.Random(seed)
    alpha = ALPHABET[name]
    toks = {c.encode() for c in alpha}
    pairs = [(a + b).encode() for a in alpha for b in alpha]
    toks |= set(rng.sample(pairs, 150))
    for m in MULTI[name]:
        toks.add(m.encode("latin-1") if m in ("\xc3", "\xa9") else m.encode())
    for _ in range(10):
        toks.add("".join(rng.choice(alpha) for _ in range(rng.randint(3, 6))).encode())
    return small_vocab(sorted(toks))


def allowed_ids(mask: np.ndarray, size: int) -> set:
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits[:size]).tolist())


# -- exact masks -----------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_masks_equal_brute_force(name):
    """At states reached by random walks, the mask is exactly the set of tokens t
    with prefix+t a prefix of a sentence, plus EOS iff the prefix is a sentence."""
    _check_masks(name, grammar_vocab(name))


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_masks_equal_brute_force_numpy_walks_and_duplicate_tokens(name, monkeypatch):
    """The same with every trie level walked by numpy (small vocabularies are otherwise
    walked node by node, as the deep levels of real ones; the tokens past a keyword by
    byte columns, as where a real vocabulary has many) and tokens whose bytes another
    token also has."""
    import structgen.fsm.core.walks as wk
    import structgen.fsm.grammar.masks as gm
    monkeypatch.setattr(wk, "native", None)  # (the numpy walks: the C ones are checked beside them)
    monkeypatch.setattr(wk, "SMALL_SUBTREE_REMEMBERED", -1)  # read when a walker is made
    monkeypatch.setattr(gm, "SUBTREE_WALK", -1)
    toks = list(grammar_vocab(name, seed=3).token_bytes[:-1])
    toks += toks[::7]
    _check_masks(name, small_vocab(toks))


@pytest.mark.parametrize("name", ["arith", "json", "toy"])
def test_masks_equal_brute_force_deep_nesting(name):
    """The same along walks that go deep (opening brackets preferred): stacks of
    different depths with the same top states share their outcomes
    (GrammarMasks._position_bits), which must stay exact."""
    openers = {"arith": [b"(", b"((", b"-"], "json": [b"[", b"[[", b'{"', b'": '],
               "toy": [b"{ ", b"if (", b"("]}[name]
    toks = sorted(set(grammar_vocab(name, seed=7).token_bytes[:-1]) | set(openers))
    _check_masks(name, small_vocab(toks), walks=2, steps=24, prefer=openers)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_masks_equal_brute_force_loop_walks(name, monkeypatch):
    """The same with every walk that can take the loop-state shortcut taking it
    (LexerWalker.loop_walk: tokens that stay in one looping lexer state are decided
    from their byte sets, the others walked column by column)."""
    import structgen.fsm.grammar.masks as gm
    monkeypatch.setattr(gm, "LOOP_SHARE", 0.0)
    _check_masks(name, grammar_vocab(name, seed=5))


@pytest.mark.parametrize("name", ["json", "toy"])
def test_masks_equal_brute_force_loop_walks_non_ascii(name, monkeypatch):
    """The same inside strings and comments with tokens of whole non-ASCII characters
    (2, 3 and 4 bytes), which loop there like ASCII ones (LexerWalker._chars_loop),
    beside tokens that cut a character short, start inside one or are not UTF-8
    (walked), alone or with a quote, a newline or a comment's end."""
    import structgen.fsm.grammar.masks as gm
    monkeypatch.setattr(gm, "LOOP_SHARE", 0.0)
    chars = ["\u00e9", "\u00e9\u00e9", "a\u00e9", " \u00e9", "\u20ac", "\u4e2d\u6587", "\U0001F600",
             "\u00e9\"", "\"\u00e9", "\u00e9\n", "\u00e9;", "*\u00e9", "\u00e9*/", "\u00e9 */"]
    raw = [b"a\xc3", b"\xc3", b"\xa9", b"\xa9x", b"x\xa9", b"\xff", b"\xc3\xa9\xc3", b"\"\xc3", b"\xc0\x80"]
    openers = {"json": [b'"', b'["', b'{"a": "'], "toy": [b'"', b"print(", b"x = ", b"//", b"/*", b"/* "]}[name]
    toks = set(grammar_vocab(name, seed=5).token_bytes[:-1]) | set(openers) | set(raw)
    toks |= {c.encode() for c in chars}
    _check_masks(name, small_vocab(sorted(toks)), walks=4, steps=14, prefer=openers + [c.encode() for c in chars])
    if name == "toy":  # the split from every token's byte set (where the per-byte lists are long)
        monkeypatch.setattr(TokenColumns, "with_bytes", lambda *a: None)
        _check_masks(name, small_vocab(sorted(toks)), walks=4, steps=14, prefer=openers + [c.encode() for c in chars])
        monkeypatch.undo()
        monkeypatch.setattr(gm, "LOOP_SHARE", 0.0)
    if name == "toy":  # a loop entered from the boundary by ASCII letters only (not by "\u00e9"),
        # and a string whose class leaves out "\u00e9"
        words = {c.encode() for c in chars} | set(raw) | {b"a", b"ab", b"b", b'"', b'x"', b"x", b"'", b"'a", b"a'"}
        _check_masks(name, small_vocab(sorted(words)), walks=6, prefer=[b"'", b"'a", b"a"],
                     text="start: (WORD | Q)+\nWORD: /[a-z][^\"]*\"/\nQ: /'[^'\u00e9]*'/\n")


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_lexer_cells_equal_rows(name):
    """The lexer DFA computes the cells its walks meet one by one (LexerSource.derive,
    LazyDFA.fill) before it builds a whole row (LexerSource.row): at every lexer state
    walks of the masks reached, each byte's cell is the row's target."""
    from structgen.fsm.core.terms import row_target
    vocab = grammar_vocab(name, seed=2)
    auto = compile_grammar(GRAMMARS[name], vocab)
    rng = random.Random(2)
    for _ in range(4):
        m = auto.matcher()
        for _ in range(16):
            ids = sorted(allowed_ids(m.next_token_mask(), vocab.size) - {vocab.eos_ids[0]})
            if not ids:
                break
            assert m.accept_token(rng.choice(ids))
    lex, dfa = auto.masks.lex, auto.masks.dfa
    sparse = [s for s in range(1, dfa.num_states)
              if not dfa.expanded[s] and (dfa.table[s] >= 0).any()]
    assert sparse  # some states were met at a few bytes only
    assert dfa.num_states >= 20
    for key in dfa.keys[1:]:
        row = lex.row(key)
        for c in range(256):
            assert lex.derive(key, c) == (row_target(row, c) or lex.dead), (key, c)


def test_loop_walk_lists_shared_across_automata(monkeypatch):
    """Loop walks' token lists are kept per vocabulary (TokenColumns.memo): a second,
    fresh automaton on the same vocabulary starts from them, and its masks stay exact."""
    import structgen.fsm.grammar.masks as gm
    monkeypatch.setattr(gm, "LOOP_SHARE", 0.0)
    vocab = grammar_vocab("toy", seed=5)
    _check_masks("toy", vocab)
    loops = {k for k in vocab.columns.walks if k[0] == "loop"}
    assert loops
    _check_masks("toy", vocab, max_states=10**5 + 7)  # a fresh automaton (own cache slot)
    assert loops <= set(vocab.columns.walks)


def _check_masks(name, vocab, walks=3, steps=14, prefer=(), max_states=None, text=None, orc=None):
    orc = orc or (Oracle(text) if text else oracle(name))
    auto = compile_grammar(text or GRAMMARS[name], vocab, max_states=max_states)
    eos = vocab.eos_ids[0]
    rng = random.Random(1)
    prefer = {vocab.token_bytes.index(t) for t in prefer}
    checked = 0
    for walk in range(walks):
        m, prefix = auto.matcher(), b""
        for _ in range(steps):
            got = allowed_ids(m.next_token_mask(), vocab.size)
            want = {i for i, t in enumerate(vocab.token_bytes) if t and orc.is_prefix(prefix + t)}
            if orc.is_sentence(prefix):
                want.add(eos)
            assert got == want, (prefix, sorted(vocab.token_bytes[i] for i in got ^ want
                                               if vocab.token_bytes[i]), eos in got, eos in want)
            checked += 1
            choices = sorted(want - {eos})
            if not choices:
                break
            deeper = sorted(want & prefer)
            t = rng.choice(deeper if deeper and rng.random() < 0.6 else choices)
            assert m.accept_token(t)
            prefix += vocab.token_bytes[t]
    assert checked >= 20


@pytest.mark.parametrize("name", ["arith", "json", "toy"])
def test_shared_masks_equal_fresh_masks(name):
    """Masks built from lexer passes shared between stacks (deep nesting, repeated
    structure) equal masks computed from scratch by a fresh automaton."""
    from structgen.fsm.grammar.automaton import GrammarAutomaton, grammar_source
    deep = {"arith": ["(", "((", "-", "1", " + ", "2", ")", "))", " * "],
            "json": ["[", "[[", '{"', '":', "1", ",", "]", "]]", "}", '"x"'],
            "toy": ["{ ", "x = ", "1", ";", "} ", "if (", ") ", "/**/", "while"]}[name]
    toks = sorted({c.encode() for c in ALPHABET[name]} | {t.encode() for t in deep})
    vocab = small_vocab(toks)
    shared = compile_grammar(GRAMMARS[name], vocab)
    ids = [toks.index(t.encode()) for t in deep]
    rng = random.Random(5)
    def restart():
        m = shared.matcher()
        assert m.accept_tokens(ids[:2])
        return m, vocab.token_bytes[ids[0]] + vocab.token_bytes[ids[1]]

    (m, prefix), reused = restart(), 0
    for _ in range(60):
        src = grammar_source(GRAMMARS[name])
        fresh = GrammarAutomaton(src, vocab)
        s = fresh.dfa.walk(fresh.start, prefix)
        before = shared.stats["walks"]
        got = m.next_token_mask()
        reused += shared.stats["walks"] == before
        assert np.array_equal(got, fresh.mask(s)), prefix
        allowed = [t for t in ids if (got[t >> 5] >> (t & 31)) & 1]
        if not allowed:
            m, prefix = restart()
            continue
        openers = [t for t in allowed if t in ids[:3]]  # go deep: reuse needs depth
        t = rng.choice(openers if openers and rng.random() < 0.5 else allowed)
        assert m.accept_token(t)
        prefix += vocab.token_bytes[t]
    assert reused > 5, reused
    assert shared.stats["walks"] <= 20, shared.stats  # a lexer pass per lexer position


@pytest.mark.parametrize("name,loops", [("toy", {"STRING", "COMMENT", "NAME", "NUMBER"}),
                                        ("json", {"ESCAPED_STRING", "SIGNED_NUMBER"})])
def test_loop_positions_walked_when_built(name, loops):
    """A GrammarAutomaton walks the positions inside strings, comments, identifiers and
    numbers when it is built (GrammarMasks.walk_loops), not at their first mask; its
    masks equal those of an automaton that walks every position lazily."""
    from structgen.fsm.grammar.automaton import GrammarAutomaton, grammar_source
    vocab = grammar_vocab(name, seed=3)
    eager = GrammarAutomaton(grammar_source(GRAMMARS[name]), vocab)
    lazy = GrammarAutomaton(grammar_source(GRAMMARS[name]), vocab, ahead=False)
    assert not lazy.masks._pos_plans
    assert {eager.source.names[t] for t, _x in eager.masks._pos_plans} == loops
    rng = random.Random(3)
    for _ in range(6):
        a, b = eager.matcher(), lazy.matcher()
        for _ in range(16):
            got = a.next_token_mask()
            assert np.array_equal(got, b.next_token_mask())
            ids = sorted(allowed_ids(got, vocab.size) - {vocab.eos_ids[0]})
            if not ids:
                break
            t = rng.choice(ids)
            assert a.accept_token(t) and b.accept_token(t)
    assert lazy.masks._pos_plans  # the lazy one met positions of its own


def test_keyword_positions_walk_on_from_the_shared_boundary(monkeypatch):
    """A position inside a keyword (`JO|IN`, `sel|ect`) is walked along the keyword's
    few words and, past a whole word, on from the boundary of all terminals with the
    keyword put in front of the requirements (GrammarMasks._literal_plan); its masks
    equal the brute force's, with tokens that run past keywords into identifiers,
    strings, operators and other keywords, duplicate tokens among them."""
    import structgen.fsm.grammar.masks as gm
    made = []
    real = gm.GrammarMasks._literal_plan
    monkeypatch.setattr(gm.GrammarMasks, "_literal_plan",
                        lambda self, t, x, words: made.append(self.g.names[t]) or real(self, t, x, words))
    past = ["in", "IN", "In", "inner", "INner", "in(", "in'", "in.a", "inx", "in ", "in o",
            "on", "ON", "onto", "ON(", "on ", "ect", "ECT", "ectx", "ect a", "ect*", "ECT'",
            "m", "M", "mer", "ROM", "rom", "romt", "ere", "ERE", "ere(", "y", "Y", "ynot", "t(",
            "unt(", "UNT(", "ax", "ax(", "ELECT", "elect", "electa", "ROUP", "roupby",
            "S", "SEL", "J", "JO", "O", "F", "FR", "W", "WH", "co", "G"]
    toks = sorted({t.encode() for t in past} | {c.encode() for c in ALPHABET["sql"]})
    toks += [b"inner", b"on"]  # the same bytes as another token
    _check_masks("sql", small_vocab(toks), walks=4, steps=14,
                 prefer=[b"S", b"SEL", b"J", b"JO", b"O", b"F", b"FR", b"W", b"WH", b"co", b"G"])
    assert {"JOIN", "ON", "SELECT", "FROM"} & set(made), made


def test_wide_loop_positions_walked_with_the_boundary_of_all_terminals(monkeypatch):
    """A loop position too wide to walk when the automaton is built (SQL's identifier,
    ~15k tokens by first byte with SmolLM2) is walked right after the boundary walk of
    all terminals, whose lexer states it mostly shares, in that step."""
    import structgen.fsm.grammar.masks as gm
    from structgen.fsm.grammar.automaton import GrammarAutomaton, grammar_source
    monkeypatch.setattr(gm, "EAGER_TOKENS", 0)
    vocab = grammar_vocab("sql", seed=2)
    auto = GrammarAutomaton(grammar_source(GRAMMARS["sql"]), vocab)
    wide = {auto.source.names[t] for t, _y in auto.masks._wide}
    assert "NAME" in wide
    assert not {auto.source.names[t] for t, _x in auto.masks._pos_plans} & wide
    m = auto.matcher()
    for t in [b"SELECT", b" ", b"a", b" ", b"FROM", b" ", b"t"]:
        assert m.accept_token(vocab.token_bytes.index(t)), t
        m.next_token_mask()
        if not auto.masks._wide:
            break
    assert not auto.masks._wide
    assert wide <= {auto.source.names[t] for t, _x in auto.masks._pos_plans}


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_token_steps_equal_byte_walks(name):
    """GrammarAutomaton.next_state steps a configuration one byte at a time without
    building rows: it must land in the state the byte DFA's rows lead to."""
    vocab = grammar_vocab(name)
    auto = compile_grammar(GRAMMARS[name], vocab)
    data, rng = vocab.token_bytes, random.Random(4)
    ids = [t for t in range(len(data)) if data[t]]
    for _ in range(5):
        s = auto.start
        for _ in range(12):
            live = [t for t in ids if auto.dfa.walk(s, data[t]) != 0]
            for t in rng.sample(ids, 20) + live[:20]:
                assert auto.next_state(s, t) == auto.dfa.walk(s, data[t]), data[t]
            if not live:
                break
            s = auto.next_state(s, rng.choice(live))


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_documents_accepted_and_prefixes_live(name):
    orc = oracle(name)
    auto = compile_grammar(GRAMMARS[name], grammar_vocab(name))
    dfa = auto.dfa
    for doc in DOCUMENTS[name]:
        data = doc.encode()
        assert orc.is_sentence(data), doc  # the oracle agrees the document is valid
        s = dfa.start
        for k, b in enumerate(data):
            s = dfa.step(s, b)
            assert s != 0, (doc, data[: k + 1])
        assert dfa.accepting[s], doc


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_invalid_documents_rejected(name):
    orc = oracle(name)
    auto = compile_grammar(GRAMMARS[name], grammar_vocab(name))
    dfa = auto.dfa
    for doc in INVALID[name]:
        data = doc.encode()
        assert not orc.is_sentence(data), doc
        s = dfa.walk(dfa.start, data)
        assert not (s and dfa.accepting[s]), doc
        assert (s != 0) == orc.is_prefix(data), doc


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_random_strings_agree_with_earley(name):
    """Short random strings over the grammar's alphabet: accepted iff Earley parses,
    alive iff the oracle says prefix."""
    orc = oracle(name)
    auto = compile_grammar(GRAMMARS[name], grammar_vocab(name))
    dfa = auto.dfa
    rng = random.Random(7)
    docs = DOCUMENTS[name]
    for _ in range(150):
        if rng.random() < 0.5:  # mutate a valid document
            d = list(rng.choice(docs))
            for _ in range(rng.randint(1, 3)):
                op, pos = rng.random(), rng.randint(0, len(d))
                if op < 0.4 and pos < len(d):
                    del d[pos]
                elif op < 0.8:
                    d.insert(pos, rng.choice(ALPHABET[name]))
                else:
                    d = d[:pos]
            text = "".join(d)
        else:
            text = "".join(rng.choice(ALPHABET[name]) for _ in range(rng.randint(0, 8)))
        data = text.encode()
        s = dfa.walk(dfa.start, data)
        assert bool(s and dfa.accepting[s]) == orc.is_sentence(data), text
        assert (s != 0) == orc.is_prefix(data), text


def test_tokens_spanning_terminals_and_lexing_ambiguity():
    vocab = small_vocab([b"SELECT", b"selecta", b" a", b" FROM", b" t", b"FROM", b"t;", b"a"])
    auto = compile_grammar(SQL, vocab)
    m = auto.matcher()
    # "selecta" lexes as SELECT + NAME(a): any split counts, as in Earley dynamic_complete
    assert m.accept_token(1) and m.accept_token(3) and m.accept_token(4)
    assert m.is_accepting()
    assert oracle("sql").is_sentence(b"selecta FROM t")


# -- terminals with lookarounds and word boundaries --------------------------------------
# The keyword-exclusion idiom: NAME is any identifier but a keyword. A lookaround inside a
# lexeme reads the lexeme alone (as Earley's dynamic lexer matches a lexeme shorter than
# the longest); here a word character follows NAME directly only where `and` does.
KEYWORDS = r"""
start: stmt+
stmt: "let" NAME "=" expr ";"
    | "print" expr ";"
    | "if" expr "{" stmt* "}" ["else" "{" stmt* "}"]
    | "while" expr "{" stmt* "}"
?expr: expr "+" atom | expr "and" atom | atom
?atom: NAME | NUMBER | "(" expr ")"
NAME: /(?!(let|if|else|while|print)\b)[a-z_][a-z0-9_]*/
NUMBER: /[0-9]+/
%ignore /[ \n]+/
"""
KEYWORD_TEXTS = {  # text: a sentence?
    "let x = 1;": True, "let iffy = lets + letter;": True, "print letter;": True,
    "let lets = 2; print lets and iffy;": True, "if iffy { print elsewhere; } else { let whiles = 1; }": True,
    "while letter { print printer; }": True, "let _let = if_;": True, "print (lets + 3);": True,
    "let le = 1;": True, "print le + t;": True, "let x = y and z;": True, "print xand y;": True,
    "let let = 1;": False, "print if;": False, "let else = 2;": False, "print while;": False,
    "let x = print;": False, "let if = 1;": False, "print lets + else;": False, "while { }": False,
    # any split into lexemes: IF + NAME(fy), LET + NAME(x) (Earley's dynamic lexer, not LALR's)
    "iffy { print x; }": True, "letx = 1;": True, "printx;": True, "whilex{}": True,
}
KEYWORD_TOKENS = ["let", "if", "else", "while", "print", "and", "iffy", "lets", "letter", "le", "t", "ter",
                  "x", " = ", ";", " ", "{", "}", "+", "1", "(", ")", "_", "i", "f", "el", "se", "wh", "p"]


class KeywordOracle(Oracle):
    def partial(self, name, s):  # (regex's partial matching finds `let` no prefix of NAME: `leta` is one)
        return super().partial(name, s) or name == "NAME" and self.full(name, s + "a")


def test_keyword_exclusion_agrees_with_lark():
    """NAME: /(?!(let|...)\\b)[a-z_][a-z0-9_]*/ compiles, and the automaton accepts
    what lark's Earley parser (dynamic_complete) does, and its LALR parser where lexing
    each keyword apart from what follows it is the only way (texts with spaces)."""
    earley = Lark(KEYWORDS, parser="earley", lexer="dynamic_complete")
    lalr = Lark(KEYWORDS, parser="lalr")
    dfa = compile_grammar(KEYWORDS, small_vocab([t.encode() for t in KEYWORD_TOKENS])).dfa

    def parses(parser, text) -> bool:
        try:
            parser.parse(text)
            return True
        except LarkError:
            return False
    for text, want in KEYWORD_TEXTS.items():
        s = dfa.walk(dfa.start, text.encode())
        assert bool(s and dfa.accepting[s]) == want == parses(earley, text), text
        if " " in text and "xand" not in text:
            assert parses(lalr, text) == want, text


def test_keyword_exclusion_masks_and_random_strings():
    """Masks along random walks equal the brute force's (tokens that are keywords, near
    keywords, their pieces); mutated sentences are accepted iff Earley parses them,
    live iff the oracle says prefix."""
    orc = KeywordOracle(KEYWORDS)
    vocab = small_vocab(sorted({t.encode() for t in KEYWORD_TOKENS} | {c.encode() for c in "abeilnprstwxy"}))
    _check_masks("keywords", vocab, walks=3, steps=12, text=KEYWORDS, orc=orc,
                 prefer=[b"let", b"le", b"if", b"else", b"print", b"t", b"el", b"i"])
    dfa = compile_grammar(KEYWORDS, vocab).dfa
    rng = random.Random(3)
    docs = [t for t, ok in KEYWORD_TEXTS.items() if ok]
    for _ in range(120):
        d = list(rng.choice(docs))
        for _ in range(rng.randint(1, 3)):
            pos = rng.randint(0, len(d))
            if rng.random() < 0.5 and pos < len(d):
                del d[pos]
            else:
                d.insert(pos, rng.choice("letifs ;"))
        data = "".join(d).encode()
        s = dfa.walk(dfa.start, data)
        assert bool(s and dfa.accepting[s]) == orc.is_sentence(data), data
        assert (s != 0) == orc.is_prefix(data), data


# Terminals whose assertions read the character after them: decided where the next
# lexeme starts (fsm/grammar/follow.py).
NEXT_CHAR = r"""
start: item+
item: IF NUM | CALL "(" [NAME] ")" | NAME | LAST | MARK
IF: /if\b/
CALL: /[a-z]+(?=\()/
NAME: /[a-z]+/
NUM: /[0-9]+/
LAST: /;\Z/
MARK: /(?m)#$/
%ignore /[ \n]+/
"""
NEXT_CHAR_TOKENS = ["if", "if ", "if(", "if1", "iff", "f(", "a(", "()", "#", "#\n", "# ", ";", " ;", "ab",
                    "(", ")", " ", "\n", "a", "f", "i", "1", "12"]


class NextCharOracle(Oracle):
    """Lexemes of NEXT_CHAR's terminals that read the character after them are matched
    with it (Python's re.match at the lexeme, which sees the text after it), sentences
    decided by the same lexing (Earley's dynamic lexer matches a lexeme shorter than
    the longest without the text after it)."""
    READS = ("IF", "CALL", "LAST", "MARK")

    def full(self, name, s, after=None):
        if name not in self.READS or after is None:
            return super().full(name, s)
        pat, _ = self.terms[name]
        return (pat.fullmatch(s) if after == "" else regex.fullmatch(f"(?:{pat.pattern})(?s:.)", s + after,
                                                                     flags=pat.flags)) is not None

    def is_sentence(self, data: bytes) -> bool:
        for k, name, lex in self.configs(data.decode()):
            if name is None or self.full(name, lex, ""):
                after = k if name is None or name in self.ignore else self.feed(k, name)
                if "$END" in self.accepts(after):
                    return True
        return False


def test_next_character_terminals():
    """`/if\\b/`, `/[a-z]+(?=\\()/`, `/;\\Z/`, `/(?m)#$/`: the lexeme holds where the next
    character (or the end) is of the class read; masks equal the brute force's, random
    strings are accepted and live as the oracle says."""
    orc = NextCharOracle(NEXT_CHAR)
    vocab = small_vocab(sorted({t.encode() for t in NEXT_CHAR_TOKENS}))
    auto = compile_grammar(NEXT_CHAR, vocab)
    assert not auto.source.fam.plain  # (variants and families: the lexer decides the next character)
    dfa = auto.dfa
    for text, want in {"if 1": True, "if1": False, "if(1": False, "if(a)": True, "iff 1": False, "if a1": False,
                       "a ;": True, "a ; b": False, "a #": True, "a #\nb": True, "a #b": False}.items():
        s = dfa.walk(dfa.start, text.encode())
        assert bool(s and dfa.accepting[s]) == want == orc.is_sentence(text.encode()), text
    _check_masks("next", vocab, walks=4, steps=10, text=NEXT_CHAR, orc=orc, prefer=[b"if", b"f(", b"#", b";"])
    rng, alpha = random.Random(5), "if1a(); #\n"
    for _ in range(300):
        data = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 7))).encode()
        s = dfa.walk(dfa.start, data)
        assert bool(s and dfa.accepting[s]) == orc.is_sentence(data), data
        assert (s != 0) == orc.is_prefix(data), data


# -- errors ----------------------------------------------------------------------------
def test_bad_grammar_text_names_line():
    with pytest.raises(GrammarError, match="line 3"):
        compile_grammar('start: "a"\n\nfoo: bar: baz\n', small_vocab([b"a"]))
    with pytest.raises(GrammarError, match="no grammar file 'nothere.lark'"):  # (lark: FileNotFoundError)
        compile_grammar('start: X\n%import nothere.X\n', small_vocab([b"a"]))


# -- grammars with conflicts: the parse forks (GLR) ----------------------------------------
# name -> (grammar, alphabet); one-character terminals, so that a brute-force oracle can
# list every sentence up to a length (8): any prefix of a sentence here up to 5
# characters long completes within 3 more (nested: up to 3 long, within 5)
AMBIGUOUS = {
    "sum": ('start: e\ne: e "+" e | "1"\n', "1+"),                       # shift/reduce
    "reduce_reduce": ('start: a "x" | b "x"\na: "y"\nb: "y"\n', "xy"),
    "priority": ('start: a "x" | b "x" "x"\na.2: "y"\nb: "y"\n', "xy"),  # lark drops b's reading
    "two_ahead": ('start: a "x" "y" | b "x" "z"\na: "w"\nb: "w"\n', "wxyz"),  # LR(2), unambiguous
    "at_end": ('start: a | b | c "q"\na: "y"\nb: "y"\nc: "y"\n', "yq"),  # reduce/reduce at $END
    "dangling_else": ('start: s\ns: "i" s | "i" s "e" s | "x"\n', "iex"),
    "nullable": ('start: a b "z"\na: "x" |\nb: "x" |\n', "xz"),
    "left_nullable_cycle": ('start: l "z"\nl: l a | a\na: "x" |\n', "xz"),
    "nested": ('start: v\nv: "[" v "]" | "[" w "]" | "1"\nw: v | "2" | "1"\n', "[]12"),
}


def _brute_force(grammar: str, alphabet: str, n: int):
    """(sentences, prefixes) over `alphabet` up to length n, by lark's Earley parser."""
    earley = Lark(grammar, parser="earley", lexer="dynamic_complete")
    sentences = set()
    for k in range(n + 1):
        for t in itertools.product(alphabet, repeat=k):
            text = "".join(t)
            try:
                earley.parse(text)
            except LarkError:
                continue
            sentences.add(text)
    prefixes = {s[:i] for s in sentences for i in range(len(s) + 1)}
    return sentences, prefixes


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_conflicts_fork_the_parse_exactly(name):
    """A grammar with LALR(1) conflicts compiles, and its language is Earley's: every
    string up to a length is accepted iff it is a sentence, live iff it is a prefix of
    one; masks along random walks are exactly the tokens that keep a prefix."""
    grammar, alpha = AMBIGUOUS[name]
    n, longest = 8, 3 if name == "nested" else 5  # (prefixes the oracle decides: see AMBIGUOUS)
    sentences, prefixes = _brute_force(grammar, alpha, n)
    assert sentences  # (the oracle sees the grammar)
    toks = sorted({c.encode() for c in alpha} | {(a + b).encode() for a in alpha for b in alpha})
    vocab = small_vocab(toks)
    auto = compile_grammar(grammar, vocab)
    assert auto.source.t.conflicts > 0
    dfa = auto.dfa
    for k in range(longest + 1):
        for t in itertools.product(alpha, repeat=k):
            text = "".join(t)
            s = dfa.walk(dfa.start, text.encode())
            assert bool(s and dfa.accepting[s]) == (text in sentences), text
            assert (s != 0) == (text in prefixes), text
    rng = random.Random(5)
    for _ in range(30):
        m, text = auto.matcher(), ""
        while len(text) + 2 <= longest:  # (text and a token: prefixes the oracle decides)
            ids = allowed_ids(m.next_token_mask(), vocab.size)
            want = {i for i, tok in enumerate(toks) if text + tok.decode() in prefixes}
            assert ids - set(vocab.eos_ids) == want, text
            assert bool(ids & set(vocab.eos_ids)) == (text in sentences), text
            if not want:
                break
            tid = rng.choice(sorted(want))
            assert m.accept_token(tid)
            text += toks[tid].decode()


def test_unbounded_forks_are_refused():
    """A right-recursive rule over a nullable one reads the empty string in ever more
    ways: the parse stops at MAX_FORKS stacks with GrammarError, never hangs."""
    g = 'start: r "z"\nr: a r |\na: "x" |\n'
    vocab = small_vocab([b"x", b"z"])
    with pytest.raises(GrammarError, match=r"forks into more than \d+ LR stacks"):
        compile_grammar(g, vocab).matcher().next_token_mask()


@pytest.mark.parametrize("name", [*GRAMMARS, *LALR_EXTRA])
def test_lalr_tables_match_lark(name):
    """fsm.grammar's own LALR(1) analysis builds lark's tables, state for state."""
    from lark.common import ParserConf
    from lark.parsers.lalr_analysis import LALR_Analyzer, Shift

    from structgen.fsm.grammar.automaton import _lalr_tables, _rule_pairs, load_lark
    rules, terminals, _ = load_lark({**GRAMMARS, **LALR_EXTRA}[name])
    index = {t.name: i for i, t in enumerate(terminals)}
    ours = _lalr_tables(_rule_pairs(rules), "start", index)
    analyzer = LALR_Analyzer(ParserConf(rules, None, ["start"]), strict=True)
    analyzer.compute_lalr()
    table = analyzer.parse_table

    def acts(st):  # symbol -> ("shift", state) | ("reduce", lhs, length)
        return {str(sym): ("shift", arg) if kind is Shift else
                ("reduce", arg.origin.name, len(arg.expansion))
                for sym, (kind, arg) in table.states[st].items()}
    pairs = {ours.start_state: table.start_states["start"]}  # our state -> lark's
    todo = [ours.start_state]
    while todo:
        s = todo.pop()
        theirs = acts(pairs[s])
        mine = {terminals[j].name: ("shift", v[1]) if v[0] else ("reduce", *v[1])
                for j, v in ours.action[s].items()}
        mine.update((lhs, ("shift", q)) for lhs, q in ours.goto[s].items())
        if s in ours.end_action:
            mine["$END"] = ("reduce", *ours.end_action[s][1])
        assert mine.keys() == theirs.keys()
        for sym, a in mine.items():
            b = theirs[sym]
            if a[0] == "reduce":
                assert a == b
            elif a[1] in pairs:
                assert pairs[a[1]] == b[1]
            else:
                pairs[a[1]] = b[1]
                todo.append(a[1])
    assert pairs[ours.end_state] == table.end_states["start"]
    assert len(pairs) == len(set(pairs.values())) == len(table.states)


@pytest.mark.parametrize("pattern,what,pos", [
    (r"\bab", "at the start of a grammar terminal, which reads the text before it", 0),
    ("(?<=a)b", "at the start of a grammar terminal", 0), ("^a", "at the start of a grammar terminal", 0),
    ("a(?=bc)", "a lookahead at the end of a grammar terminal, which reads more than the one character", 1),
    ("a+$", "a `$` at the end of a grammar terminal, which reads two characters after it", 2),
    ("a+?(?=b)", "a lazy quantifier in a terminal whose assertions read the text after it", None),
])
def test_unsupported_terminal_regex_names_terminal(pattern, what, pos):
    """What a terminal's assertions would read of the lexemes around it, beyond the
    next character's class, is refused, naming the terminal and the place; a
    lookaround inside the lexeme reads it alone."""
    g = f'start: WORD "b"\nWORD: /{pattern}/\n'
    with pytest.raises(GrammarError, match="terminal WORD: ") as err:
        compile_grammar(g, small_vocab([b"a", b"b"]))
    assert what in str(err.value) and (pos is None or f"at position {pos}\n" in str(err.value)), str(err.value)
    dfa = compile_grammar('start: WORD\nWORD: /a(?=b)b/\n', small_vocab([b"a", b"b"])).dfa
    assert dfa.accepting[dfa.walk(dfa.start, b"ab")]


def test_undefined_declared_terminal():
    with pytest.raises(GrammarError, match="INDENT"):
        compile_grammar('start: INDENT "a"\n%declare INDENT\n', small_vocab([b"a"]))


def test_zero_width_terminal():
    with pytest.raises(GrammarError, match="A matches the empty string"):
        compile_grammar('start: A "b"\nA: /a*/\n', small_vocab([b"a", b"b"]))


def test_inline_terminal_errors_name_pattern_and_rule():
    """A terminal written inside a rule (lark names it __ANON_0) is named in errors by
    its pattern as written and the rule that uses it."""
    vocab = small_vocab([b"a", b"b", b","])
    with pytest.raises(GrammarError, match=r'terminal /\[\^,\]\*/ \(in rule field\) matches the empty'):
        compile_grammar('start: field ("," field)*\nfield: /[^,]*/ | "b"\n', vocab)
    with pytest.raises(GrammarError, match=r"terminal /a\(\?=bc\)/ \(in rule x\): a lookahead at the end"):
        compile_grammar('start: x\nx: /a(?=bc)/ "a"\n', vocab)


def test_state_cap():
    with pytest.raises(fsm.TooLargeError):
        auto = compile_grammar(JSON, small_vocab([b"[", b"]", b"1"]), max_states=20)
        m = auto.matcher()
        for _ in range(30):
            m.accept_token(0)


def test_unproductive_rules_are_dropped():
    g = 'start: "a" | "b" loop\nloop: "c" loop\n'
    vocab = small_vocab([b"a", b"b", b"c"])
    m = compile_grammar(g, vocab).matcher()
    assert allowed_ids(m.next_token_mask(), vocab.size) == {0}


def test_productive_equals_fixpoint():
    """_productive (a worklist) against passes over every rule until nothing changes,
    on random rule sets with dead terminals, repeated symbols and cycles (with no
    terminal live it finds the nullable nonterminals, as _lalr_tables' worklist does:
    test_lalr_tables_match_lark checks that one)."""
    from lark.grammar import NonTerminal, Rule, Terminal

    from structgen.fsm.grammar.automaton import _productive, _rule_pairs
    rng = random.Random(7)
    for _ in range(300):
        nts, ts = [f"n{i}" for i in range(rng.randint(1, 7))], ["A", "B", "C"]
        rules = [Rule(NonTerminal(rng.choice(nts)),
                      [Terminal(rng.choice(ts)) if rng.random() < 0.4 else
                       NonTerminal(rng.choice(nts)) for _ in range(rng.randint(0, 4))], 0)
                 for _ in range(rng.randint(1, 12))]
        for live in ({"A", "B", "C"}, {"A"}, set()):
            want, changed = set(), True
            while changed:
                changed = False
                for r in rules:
                    if r.origin.name not in want and all(
                            x.name in live if x.is_term else x.name in want for x in r.expansion):
                        want.add(r.origin.name)
                        changed = True
            assert _productive(_rule_pairs(rules), live) == want


# -- compile_cfg -----------------------------------------------------------------------
def test_compile_cfg_matches_equivalent_lark_grammar():
    tb = TermBuilder()
    rules = {"value": [["NUM"], ["LB", "items", "RB"], ["LB", "RB"]],
             "items": [["value"], ["items", "COMMA", "value"]]}
    terms = {"NUM": regex_to_term(tb, r"[0-9]+"), "LB": tb.literal(b"["),
             "RB": tb.literal(b"]"), "COMMA": tb.literal(b","), "WS": regex_to_term(tb, r"[ \n]+")}
    vocab = small_vocab([b"[", b"]", b",", b"1", b"23", b" ", b"[1", b"],[", b"1 2"])
    auto = compile_cfg(rules, terms, "value", vocab, tb, ignore=("WS",))
    lark_text = ('value: NUM | "[" items "]" | "[" "]"\nitems: value | items "," value\n'
                 'NUM: /[0-9]+/\nWS: /[ \\n]+/\n%ignore WS\n')
    orc = Oracle(lark_text, start="value")
    rng = random.Random(3)
    alpha = "[],12 "
    dfa = auto.dfa
    for _ in range(300):
        data = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 9))).encode()
        s = dfa.walk(dfa.start, data)
        assert bool(s and dfa.accepting[s]) == orc.is_sentence(data), data
        assert (s != 0) == orc.is_prefix(data), data
    with pytest.raises(GrammarError, match="undefined symbol 'X'"):
        compile_cfg({"s": [["X"]]}, terms, "s", vocab, tb)


# -- the real vocabulary ---------------------------------------------------------------
def _whole_chars(data: bytes) -> bytes:
    """data without a trailing incomplete UTF-8 character (the oracle enumerates only
    2-byte completions)."""
    for cut in range(0, 4):
        try:
            (data[: len(data) - cut] if cut else data).decode("utf-8")
            return data[: len(data) - cut] if cut else data
        except UnicodeDecodeError:
            continue
    return data

@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_real_vocab_documents_and_random_walks(name, smol_tokenizer, smol_vocab):
    auto = compile_grammar(GRAMMARS[name], smol_vocab)
    orc = oracle(name)
    eos = smol_vocab.eos_ids[0]
    for doc in DOCUMENTS[name]:  # the tokenizer's own tokenization is accepted
        m = auto.matcher()
        for t in smol_tokenizer.encode(doc, add_special_tokens=False):
            mask = m.next_token_mask()
            assert (mask[t >> 5] >> (t & 31)) & 1, (doc, t)
            assert m.accept_token(t)
        assert m.accept_token(eos), doc
    rng = random.Random(11)
    done = 0
    for walk in range(6):
        m, out = auto.matcher(), b""
        for step in range(60):
            ids = np.flatnonzero(np.unpackbits(m.next_token_mask().view(np.uint8),
                                               bitorder="little")[: smol_vocab.size])
            assert len(ids), out
            if eos in ids and (step > 10 or rng.random() < 0.2):
                t = eos
            else:
                # prefer short tokens so that structure, not one long string, is explored
                short = [i for i in rng.sample(list(ids), min(40, len(ids)))
                         if i != eos and len(smol_vocab.token_bytes[i]) <= 3]
                t = rng.choice(short) if short else int(rng.choice(list(ids)))
            assert m.accept_token(int(t))
            if t == eos:
                break
            out += smol_vocab.token_bytes[t]
            assert orc.is_prefix(_whole_chars(out)), out
        if m.is_terminated():
            assert orc.is_sentence(out), out
            done += 1
    assert done >= 1


# -- the class fast paths that terminals rely on (fsm/regex.py) ------------------------
@pytest.mark.parametrize("pattern,flags", [
    ("[a-z_]", 2), ("[A-Z0-9_]", 2), ("[iksIKS]", 2), ("s", 2), ("k", 2), ("I", 2),
    ("[^\"\\\\\\n]", 0), ("[^']", 0), ("[^a-c]", 2), ("[^ks]", 2), ("[^\\n]", 0)])
def test_class_fast_paths_agree_with_re(pattern, flags):
    import re

    import structgen.fsm.regex.charset as charset
    from structgen.fsm.regex.syntax import _fast_class
    try:
        import re._parser as P
    except ImportError:  # pragma: no cover
        import sre_parse as P
    (op, av), = P.parse(pattern, flags)
    items = av if str(op) == "IN" else ([(op, av)] if str(op) == "LITERAL" else
                                        [(P.NEGATE, None), (P.LITERAL, av)])
    assert _fast_class(items, flags & re.IGNORECASE) == charset.by_python_re(pattern, flags)


def test_compile_cfg_boolean_terminals():
    """Terminals may be intersections/complements (JSON Schema's "any key but these"):
    lexemes whose language became empty must not keep tokens alive."""
    import re
    tb = TermBuilder()
    key = tb.intersect((regex_to_term(tb, r'"[a-z]*"'),
                        tb.complement(tb.alt([tb.literal(b'"ab"'), tb.literal(b'"abc"')]))))
    rules = {"obj": [["LB", "RB"], ["LB", "pairs", "RB"]],
             "pairs": [["pair"], ["pairs", "COMMA", "pair"]],
             "pair": [["KEY", "COLON", "NUM"]]}
    terms = {"LB": tb.literal(b"{"), "RB": tb.literal(b"}"), "COMMA": tb.literal(b","),
             "COLON": tb.literal(b":"), "NUM": regex_to_term(tb, "[0-9]"), "KEY": key}
    toks = [b"{", b"}", b",", b":", b"1", b'"', b"a", b"b", b"c", b'"ab"', b'"abc"', b'ab"']
    vocab = small_vocab(toks)
    auto = compile_cfg(rules, terms, "obj", vocab, tb)
    pair = r'"(?!(?:ab|abc)")[a-z]*":[0-9]'
    full = re.compile(r"\{(?:%s(?:,%s)*)?\}" % (pair, pair))
    rng = random.Random(2)
    dfa = auto.dfa
    for _ in range(400):
        data = b"".join(rng.choice(toks[:9]) for _ in range(rng.randint(0, 10)))
        if rng.random() < 0.3:
            data = b'{"ab' + data
        s = dfa.walk(dfa.start, data)
        text = data.decode()
        assert bool(s and dfa.accepting[s]) == bool(full.fullmatch(text)), text
        live = any(full.fullmatch(text + tail) for tail in
                   ['', '}', '"', '":1}', 'x":1}', ':1}', '1}', '"x":1}', 'a":1}', 'c":1}'])
        if live:
            assert s != 0, text
    m = auto.matcher()
    assert m.accept_token(0) and m.accept_token(toks.index(b'"ab"')) is False
    assert m.accept_token(toks.index(b'"abc"')) is False
    assert m.accept_token(5) and m.accept_token(6) and m.accept_token(7)  # {"ab
    got = allowed_ids(m.next_token_mask(), vocab.size)
    assert toks.index(b'"') not in got  # "ab" is excluded
    assert toks.index(b"c") in got and toks.index(b"a") in got
