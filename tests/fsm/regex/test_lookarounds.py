"""Lookarounds, anchors and word boundaries anywhere (fsm/regex/looks.py, context.py): in
repeats of any count, inside lookarounds, looking past their group. Differential against
Python's re.fullmatch on every short string and random longer ones over small alphabets,
at the byte level and the token level, and through the JSON Schema front end."""
from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest
from oracles import compiled, small_vocab

from structgen import fsm
from structgen.fsm.core.dfa import LazyDFA, TermSource
from structgen.fsm.core.terms import TermBuilder
from structgen.fsm.regex.syntax import regex_to_term

try:  # Python >= 3.11
    import re._compiler as _compiler
    import re._constants as C
    import re._parser as P
except ImportError:  # pragma: no cover - Python 3.10
    import sre_compile as _compiler  # type: ignore
    import sre_constants as C  # type: ignore
    import sre_parse as P  # type: ignore

# word characters a 0 é (é: not under re.ASCII); non-word: - space newline
ALPHABET = "a0-é \n"
ATOMS = ["a", "b", "0", "-", " ", r"\n", ".", r"\w", r"\W", r"\d", r"\s", "[ab]", "[^a]", "é", "[a-]"]
# assertions that read one character on each side, and longer lookarounds
ASSERTS = [r"\b", r"\B", "^", "$", r"\A", r"\Z", "(?=a)", "(?!a)", "(?<=a)", "(?<!-)", r"(?=\w)",
           r"(?<=\W)", "(?!$)", "(?=ab)", r"(?!a\b)", "(?<=a0)", "(?<!a-)", r"(?=\w*\b)", r"(?<=\b.)",
           r"(?<=^a)", r"(?=-|\Z)"]
REPEATS = ["*", "+", "?", "{2}", "{0,3}", "{2,}", "{1,12}", "{10}", "*?", "{3,9}", "+?"]
FLAGS = [0, 0, 0, re.MULTILINE, re.IGNORECASE, re.ASCII]
# what may be refused, each at a construct's position: lookaheads of more than one
# character in a repeat of more than 8 or inside a lookbehind, lookbehinds of more than
# one character that look before their group
REFUSED = ("a lookahead inside a repeat of more than 8", "a lookbehind that may look before",
           "a lookahead inside a lookbehind")


def generated(seed: int, count: int) -> list:
    """`count` (pattern, flags) mixing assertions, lookarounds, classes and repeats (no
    repeat in a repeat in a repeat: re's backtracking on those takes minutes)."""
    rng = random.Random(seed)

    def piece() -> str:  # an atom, an assertion before or after one, or one alone
        r = rng.random()
        return (rng.choice(ATOMS) if r < 0.4 else rng.choice(ASSERTS) + rng.choice(ATOMS) if r < 0.65
                else rng.choice(ATOMS) + rng.choice(ASSERTS) if r < 0.9 else rng.choice(ASSERTS))

    def gen(depth: int, reps: int) -> str:
        r = rng.random()
        if depth > 2 or r < 0.2:
            return piece()
        if r < 0.45:
            return gen(depth + 1, reps) + gen(depth + 1, reps)
        if r < 0.55:
            return gen(depth + 1, reps) + "|" + gen(depth + 1, reps)
        if r < 0.8 and reps < 2:
            return "(?:" + gen(depth + 1, reps + 1) + ")" + rng.choice(REPEATS)
        if r < 0.9:
            return rng.choice(["(?=", "(?!"]) + gen(depth + 1, reps) + rng.choice(["", "$", r"\b"]) + ")"
        return "(" + gen(depth + 1, reps) + ")"
    out = []
    while len(out) < count:
        p, flags = gen(0, 0), rng.choice(FLAGS)
        try:
            tree = P.parse(p, flags)
        except re.error:  # (a lookbehind of no fixed width)
            continue
        if not _backtracks(tree):
            out.append((p, flags))
    return out


def _backtracks(items) -> bool:
    """Whether re's backtracking may take exponential time on the pattern: a repeat of
    more than one item holding another that is not of a fixed count, or one of them
    matching the empty text (the automaton takes no longer; re.fullmatch, the oracle,
    would take minutes)."""
    for op, av in items:
        subs = [av[3]] if op == C.SUBPATTERN else av[1] if op == C.BRANCH else [av[2]] \
            if op in (C.MAX_REPEAT, C.MIN_REPEAT) else [av[1]] if op in (C.ASSERT, C.ASSERT_NOT) else []
        if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[1] > 1:
            inner = [x for x in _repeats(av[2]) if x[1] > 1]
            if any(x[0] != x[1] or x[2].getwidth()[0] == 0 for x in inner) or inner and av[2].getwidth()[0] == 0:
                return True
        if any(_backtracks(x) for x in subs):
            return True
    return False


def _repeats(items) -> list:
    """The repeats' arguments (lo, hi, items) inside `items`."""
    out = []
    for op, av in items:
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            out += [av] + _repeats(av[2])
        elif op == C.SUBPATTERN:
            out += _repeats(av[3])
        elif op == C.BRANCH:
            out += [x for b in av[1] for x in _repeats(b)]
    return out


def strings(seed: int, longest: int, n_random: int) -> list[str]:
    """Every string over ALPHABET up to `longest` characters, and random longer ones."""
    rng = random.Random(seed)
    out = ["".join(t) for k in range(longest + 1) for t in itertools.product(ALPHABET, repeat=k)]
    return out + ["".join(rng.choice(ALPHABET + "b") for _ in range(rng.randint(4, 14))) for _ in range(n_random)]


def near(pattern: str, flags: int, n: int, seed: int) -> list[str]:
    """Strings near the pattern's language: `n` of its matches with its assertions left
    out (re's parse tree, each character item's own match among ALPHABET), each also
    with a character left out or put in."""
    rng, tree = random.Random(seed), P.parse(pattern, flags)
    alphabet, members = ALPHABET + "b", {}

    def chars(item, fl: int) -> str:
        key = (id(item), fl)
        if key not in members:
            rx = _compiler.compile(P.SubPattern(tree.state, [item]), fl)
            members[key] = "".join(c for c in alphabet if rx.fullmatch(c))
        return members[key]

    def text(items, fl: int) -> str:
        out = []
        for op, av in items:
            if op in (C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY):
                cs = chars((op, av), fl)
                out.append(rng.choice(cs) if cs else "")
            elif op == C.SUBPATTERN:
                out.append(text(av[3], (fl | av[1]) & ~av[2]))
            elif op == C.BRANCH:
                out.append(text(rng.choice(av[1]), fl))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                out += [text(av[2], fl) for _ in range(rng.randint(av[0], min(av[1], av[0] + 3)))]
        return "".join(out)
    out = []
    for _ in range(n):
        t = text(tree, tree.state.flags)
        k = rng.randint(0, len(t))
        out += [t, t[:k] + t[k + 1:], t[:k] + rng.choice(alphabet) + t[k:]]
    return out


def byte_dfa(pattern, flags=0):
    tb = TermBuilder()
    return LazyDFA(TermSource(tb), regex_to_term(tb, pattern, flags))


def agree(pattern: str, flags: int, texts) -> int:
    """Assert the automaton accepts exactly re.fullmatch's strings among texts; the
    number of pairs checked (0 where the pattern is refused, as REFUSED allows)."""
    try:
        dfa = byte_dfa(pattern, flags)
    except fsm.RegexError as e:
        assert any(what in str(e) for what in REFUSED), (pattern, str(e))
        assert pattern[e.pos:e.pos + 3] in ("(?=", "(?!", "(?<"), (pattern, e.pos)
        return 0
    rx = re.compile(pattern, flags)
    for text in texts:
        s = dfa.walk(dfa.start, text.encode())
        assert bool(s and dfa.accepting[s]) == bool(rx.fullmatch(text)), (pattern, flags, text)
    return len(texts)


@pytest.mark.parametrize("seed", range(4))
def test_generated_patterns_agree_with_re(seed):
    """Generated patterns, each on every string up to 3 characters, 20 longer ones and
    30 near its language."""
    texts = strings(seed, 3, 20)
    pairs = sum(agree(p, flags, texts + near(p, flags, 12, seed)) for p, flags in generated(seed, 60))
    assert pairs >= 5000, pairs  # (4 seeds: 20,000 pattern/string pairs at least)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 124))
def test_generated_patterns_agree_with_re_slow(seed):
    texts = strings(seed, 4, 100)
    pairs = sum(agree(p, flags, texts + near(p, flags, 100, seed)) for p, flags in generated(seed, 200))
    assert pairs >= 100_000, pairs


# The examples (#53), and their kin: boundaries and `$` in repeats of any count,
# a boundary in a lookahead that looks past its group, lookbehinds in repeats. Each with
# an alphabet: every string over it up to 6 characters, and 400 random ones up to 30 of
# the alphabet's pieces (words and separators: the long counted repeats need long texts).
EXAMPLES = {
    r"(\w+\b[ ,]*){10}": (["a ", "b0,", "é ", "ab ,", "a ", "b0,", "é ", "ab ,", "-", "a"], 12),
    r"(?:\b[a-z]+\b ?){1,12}": (["a", "bb", " ", "a ", "0", "é"], 14),
    r"^(\/?((\.{2})|([a-z0-9\-]*))($|\/))*$": (["a", ".", "..", "/", "-", "\n", "A", "a/"], 10),
    r"\d{1,3}(?=(\d{3})*\b)[0-9,]*": (["0", "12", "345", ",", "a", " "], 10),
    r"(\w+\b[ ,]*)+": (["a", "b0", " ", ",", "-"], 12),
    r"(?:^|,)(?:\b\w+\b)*(?:,|$)": (["a", ",", "-", " ", "b"], 8),
    r"(?m)(?:^a$\n?)*": (["a", "\n", "b", "a\n"], 10),
    r"(?m)(?:a$\n?){2,20}": (["a", "\n", "b", "a\n"], 12),
    r"(?:a$\n?){2,20}": (["a", "\n", "b"], 8),
    r"(?:(?<=a)b|a)*": (["a", "b", "ab"], 12),
    r"(?:(?<!a)b|a|-)+\B": (["a", "b", "-"], 12),
    r"(?:(?=a)\w|-){12,}": (["a", "b", "-", "aa--"], 12),
    r"a(?<=\ba)-|a(?<=a\b)-?b?": (["a", "-", "b"], 5),
    r"(?=a\b)\w+|(?!(ab|b)\b)[a-b]+": (["a", "b", "ab"], 8),
    r"(?:\B0|\b-)*": (["0", "-", "a"], 12),
    r"(?:-\B)*\B": (["-", "a"], 6),  # (Python's \B before 3.14: never in an empty text)
}


@pytest.mark.parametrize("pattern", list(EXAMPLES))
def test_examples_agree_with_re(pattern):
    pieces, most = EXAMPLES[pattern]
    chars = sorted(set("".join(pieces)))
    rng = random.Random(pattern)
    texts = ["".join(t) for k in range(6) for t in itertools.product(chars, repeat=k)]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, most))) for _ in range(600)]
    assert agree(pattern, 0, texts) == len(texts)


@pytest.mark.parametrize("pattern,construct,pos", [
    (r"(a)\1", "backreference", 3), ("(?P<x>a)(?P=x)", "backreference", 8),
    ("(a)?(?(1)b|c)", "conditional", 4), ("(?>ab)", "atomic", 0), ("a*+", "possessive", 2),
    ("(?:a(?=bc))*b", "a lookahead inside a repeat of more than 8", 4),
    (r"x|(?:b(?!a\b)){9}", "a lookahead inside a repeat of more than 8", 6),
    ("xa(?:b(?<!ab))*", "a lookbehind that may look before its group", 6),
    (r"x(?<=a(?=bc))", "a lookahead inside a lookbehind", 1),
])
def test_what_is_not_regular_or_not_taken_names_its_position(pattern, construct, pos):
    with pytest.raises(fsm.RegexError) as err:
        byte_dfa(pattern)
    assert construct in str(err.value) and err.value.pos == pos, str(err.value)


# -- token level ----------------------------------------------------------------------
def token_vocab():
    """All strings of 1..2 characters over a small alphabet, and split UTF-8 pieces."""
    chars = ["a", "b", "0", "-", " ", "é", "\n", ","]
    toks = [c.encode() for c in chars] + [(x + y).encode() for x in chars for y in chars]
    toks += [b"\xc3", b"\xa9", b"a\xc3", b"\xa9a", b"ab ", b"aaaa", b" , "]
    return small_vocab(toks)


TOKEN_PATTERNS = list(EXAMPLES)[:6] + [p for p, f in generated(7, 40) if f == 0][:16]


@pytest.mark.parametrize("pattern", TOKEN_PATTERNS)
def test_masks_are_the_live_tokens_and_accept_agrees(pattern):
    """Along random token walks: the mask is exactly the tokens whose bytes keep the
    byte automaton alive (EOS iff it accepts), and accept_token agrees with the mask."""
    vocab = token_vocab()
    try:
        a = fsm.compile_regex(pattern, vocab)
    except fsm.RegexError as e:
        assert any(what in str(e) for what in REFUSED), e
        return
    oracle = byte_dfa(pattern)
    rng = random.Random(pattern)
    eos = vocab.eos_ids[0]
    for _ in range(4):
        m, s = a.matcher(), oracle.start
        for _ in range(8):
            allowed = set(a.allowed_tokens(m.state).tolist())
            want = {i for i, b in enumerate(vocab.token_bytes) if b and oracle.walk(s, b) != 0}
            if oracle.accepting[s]:
                want.add(eos)
            assert allowed == want, pattern
            row = np.zeros(vocab.num_words, np.int32)
            m.fill_next_token_bitmask(row)
            t = rng.randrange(len(vocab.token_bytes))
            assert bool(int(row[t >> 5]) >> (t & 31) & 1) == (t in want)
            choices = sorted(want - {eos})
            if not choices:
                break
            t = rng.choice(choices)
            assert m.accept_token(t)
            s = oracle.walk(s, vocab.token_bytes[t])
        if oracle.accepting[s]:
            assert m.accept_token(eos) and m.is_terminated()


# -- JSON Schema: pattern and patternProperties ----------------------------------------------
@pytest.mark.parametrize("pattern", [r"^(\w+\b[ ,]*){10}$", r"^(?:\b[a-z]+\b ?){1,12}$",
                                     r"^(\/?((\.{2})|([a-z0-9\-]*))($|\/))*$", r"\d{1,3}(?=(\d{3})*\b)[0-9,]*$",
                                     r"(?:\b\w\B){3}", r"^(?:(?<=a)b|a)*$"])
def test_json_schema_patterns(pattern):
    """pattern (ECMA-262 search; `$` is the very end, \\w and \\b ASCII) and
    patternProperties, against Python's re.search on the same reading."""
    py = re.compile(pattern.replace("$", r"\Z"), re.ASCII)
    acc, _ = compiled({"type": "string", "pattern": pattern})
    obj, _ = compiled({"type": "object", "patternProperties": {pattern: {"type": "integer"}},
                       "additionalProperties": False})
    rng = random.Random(pattern)
    for _ in range(300):
        s = "".join(rng.choice("ab0 ,./-") for _ in range(rng.randint(0, 14)))
        want = bool(py.search(s))
        assert acc(f'"{s}"') == want, (pattern, s)
        assert obj(f'{{"{s}":1}}') == want, (pattern, s)
