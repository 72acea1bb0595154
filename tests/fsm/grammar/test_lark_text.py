"""fsm/lark_text.py against its oracle, lark's own loader (fsm.grammar.automaton._load_with_lark):
the same rules, terminals and ignore list, field for field, for every grammar text of
the project, hand-written grammars for each construct it reads, and random grammars;
constructs it does not read fall back to lark, and errors stay lark's."""
from __future__ import annotations

import ast
import importlib.util
import os
import random
import re

import pytest
from oracles import GRAMMARS, LALR_EXTRA

import structgen.fsm.grammar.lark_text as lark_text
from structgen.fsm.core.errors import GrammarError
from structgen.fsm.grammar.automaton import _load_with_lark, load_lark

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")


def _bench_grammars() -> dict:
    spec = importlib.util.spec_from_file_location(
        "grammar_bench", os.path.join(ROOT, "benchmarks", "grammar_bench.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {f"bench_{k}": v for k, v in mod.GRAMMARS.items()}


def _project_texts() -> dict:
    """The grammars of examples/grammar_sql.py (read, not imported: it loads a model)
    and of README.md."""
    with open(os.path.join(ROOT, "examples", "grammar_sql.py"), encoding="utf8") as f:
        module = ast.parse(f.read())
    out = {f"example_{node.targets[0].id.lower()}": node.value.value for node in module.body
           if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
           and isinstance(node.value.value, str) and "%import" in node.value.value}
    with open(os.path.join(ROOT, "README.md"), encoding="utf8") as f:
        readme = re.findall(r'^\w+ = r"""(.*?)"""', f.read(), re.S | re.M)
    assert readme, "the README's grammar example is gone"
    out.update({f"readme_{i}": text for i, text in enumerate(readme)})
    return out


# texts elsewhere in the project, and the small grammars of oracles.py (GRAMMARS, LALR_EXTRA)
PROJECT = {
    **_project_texts(),
    "nested": 'start: "[" start? "]"',
    "ambiguous": 'start: e\ne: e "+" e | "1"\n',
    "reduce_reduce": 'start: a "x" | b "x"\na.2: "y"\nb: "y"\n',
    "tail": 'start: "a" ["b"] ["c"] ["d"] x\nx: "d" |\n',
    "lookahead": 'start: WORD\nWORD: /a(?=b)b/\n',
    "declared": 'start: INDENT "a"\n%declare INDENT\n',
    "zero_width": 'start: A "b"\nA: /a*/\n',
    "unproductive": 'start: "a" | "b" loop\nloop: "c" loop\n',
    "cfg": ('value: NUM | "[" items "]" | "[" "]"\nitems: value | items "," value\n'
            'NUM: /[0-9]+/\nWS: /[ \\n]+/\n%ignore WS\n'),
}

# one or more constructs each
CONSTRUCTS = {
    "nested_groups": 'start: "a" ("b" | "c" ("d" | "e")) "f" | ("g" | "h" "i")+ ("j" | )\n',
    "optional_forms": 'start: [A] B? C* D+ ["," A] (B C)?\nA: "a"\nB: "b"\nC: "c"\nD: "d"\n',
    "shared_star": 'start: a b\na: X* "a" (X | "y")*\nb: X* "b" X+ (X | "y")+\nX: "x"\n',
    "repeats": ('start: x ~ 3 y ~ 2..4 (x | y) ~ 0..2\nx: "x"\ny: Y\n'
                'Y: "y" ~ 2..4 | "z" ~ 3 | ("w" | "v") ~ 1..2\n'),
    "literal_dedup": 'start: item ("," item)* COMMA? ";"\nitem: "i" | COMMA\nCOMMA: ","\n',
    "case_insensitive": ('start: "select"i NAME "from"i NAME "where" SELECT\n'
                         'SELECT: "select"i\nNAME: /[a-z]+/i\n'),
    "ranges": ('start: DIGIT+ LETTER "a".."f" | HEX\nDIGIT: "0".."9"\n'
               'LETTER: "a".."z" | "A".."Z"\nHEX: ("0".."9" | "a".."f")+\n'),
    "terminal_flags": ('start: WORD LINE KEY\nWORD: KEY REST\nKEY: "key"i\nREST: /[0-9]+/s\n'
                       'LINE: /a.b/s "|" /x/i | "q"\n'),
    "priorities": 'start: a | b\na.2: A\nb: B\nA.3: "a"\nB.-1: /b+/\n',
    "aliases": ('start: x -> one | y "+" y -> two | "z" | [x] y -> three\n'
                '?x: "x"\ny: "y" -> why\n'),
    "ignore_literal": 'start: "a"+\n%ignore " "\n%ignore /\\t/\n%ignore ("\\r" | "\\n")+\n',
    "import_list": 'start: INT ("," INT)*\n%import common (WS, INT)\n%ignore WS\n',
    "import_alias": ('start: NUM (_SP NUM)* WORD\n%import common.INT -> NUM\n'
                     '%import common.WS_INLINE -> _SP\n%import common.CNAME -> WORD\n'
                     '%import common.SH_COMMENT\n%ignore SH_COMMENT\n'),
    "keyword_collision": 'start: "if" IF "else" ELSE2 "while"\nIF: "iff"\nELSE2: "else2"\n',
    "unicode": 'start: "é" "λx" "→" "ß" NAME\nNAME: /[à-ÿ]+/\n',
    "escapes": ('start: "\\"" STR "\\\\" SLASH "\\n"? "it\'s" TAB\nSTR: /"[^"\\\\]*"/\n'
                'SLASH: /\\//\nTAB: "\\t" | /\\x09/\n'),
    "keep_all": '!start: "a" ["," "b"] x? ("c" | D)*\nx: "x"\nD: "d"\n',
    "inlined": '?start: _pair | _X | one\n_pair: "(" _X ")"\n_X: "x"\none: _pair+\n',
    "layout": ('start: a\n     | b   // trailing comment\n     // a full-line comment\n'
               '     | c\n# a hash comment\na: "a" \\\n   "aa"\nb: "b"\n\n\nc: "c"\n'),
    "crlf": 'start: a\r\n    | "b"\r\na: "a"\r\n',
    "declare": 'start: "a" DECL? "b"\n%declare DECL OTHER\n',
    "ignore_expression": ('start: "a"+\nCOMMENT: /#[^\\n]*/\n%ignore /[ \\t]+/ | COMMENT\n'
                          '%import common.NEWLINE\n%ignore NEWLINE\n'),
    "hoisted": ('start: "a" ["b"] ["c"] ["d"] x -> first | x? "e"* ["f"] x*\n'
                'x: "x" [y] ["z"] [y "w"] [y y]\ny: "y"\n'),
    "start_unused": 'other: "o"\nstart: "s"\n',
    "empty_alternatives": 'start: a b\na: "x" |\nb: | "y" | \n',
    "nullable_terminal": 'start: A\nA: "a" | \n',
}

CORPUS = {**GRAMMARS, **LALR_EXTRA, **PROJECT, **CONSTRUCTS}


def _normal(loaded):
    """Everything lark's loader says, as comparable plain data."""
    rules, terminals, ignore = loaded
    return ([(r.origin.name, [(s.name, s.is_term, getattr(s, "filter_out", None)) for s in r.expansion],
              r.order, r.alias, r.options.keep_all_tokens, r.options.expand1, r.options.priority,
              r.options.template_source, r.options.empty_indices) for r in rules],
            [(t.name, type(t.pattern).__name__, t.pattern.value, sorted(t.pattern.flags),
              t.pattern.raw, t.priority) for t in terminals],
            list(ignore))


def _same(text: str, start: str = "start") -> None:
    for hoist in (False, True):
        ours = lark_text.load(text, start, hoist)  # raises Unsupported if it would fall back
        assert _normal(ours) == _normal(_load_with_lark(text, start, hoist)), hoist


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_same_as_lark(name):
    _same(CORPUS[name])


def test_benchmark_grammars_same_as_lark():
    assert {"example_sql", "example_arith", "readme_0"} <= CORPUS.keys()
    grammars = _bench_grammars()
    assert grammars["bench_toy"] != GRAMMARS["toy"]
    for text in grammars.values():
        _same(text)


def test_other_start_symbol():
    _same(PROJECT["cfg"], start="value")


def test_load_lark_uses_the_front_end(monkeypatch):
    import structgen.fsm.grammar.automaton as g
    monkeypatch.setattr(g, "_load_with_lark", None)  # any fallback would fail
    rules, terminals, ignore = load_lark(GRAMMARS["sql"], hoist=True)
    assert ignore == ["WS"] and any(t.name == "SELECT" for t in terminals)


def test_a_front_end_bug_warns_and_falls_back(monkeypatch):
    """An unexpected exception in the front end is a bug: said out loud, and the
    grammar still compiles through lark's loader."""
    def broken(*args):
        raise KeyError("boom")
    monkeypatch.setattr(lark_text, "load", broken)
    with pytest.warns(RuntimeWarning, match="KeyError"):
        got = load_lark(GRAMMARS["arith"])
    assert _normal(got) == _normal(_load_with_lark(GRAMMARS["arith"]))


FALLBACK = {
    "template": '_sep{x, sep}: x (sep x)*\nstart: _sep{"a", ","}\n',
    "override": 'start: "a"\n%import common.INT\n%override start: INT\n',
    "extend": 'start: "a"\n%extend start: "b"\n',
    "long_repeat": 'start: "a" ~ 2..60\n',
    "imported_rule": 'start: value\n%import .nonexistent.value\n',
}


@pytest.mark.parametrize("name", sorted(FALLBACK))
def test_outside_the_front_end_falls_back_to_lark(name):
    text = FALLBACK[name]
    with pytest.raises(lark_text.Unsupported):
        lark_text.load(text)
    try:
        expected = _normal(_load_with_lark(text))
    except Exception as e:  # lark refuses it too: the same error either way
        with pytest.raises(type(e)):
            load_lark(text)
        return
    assert _normal(load_lark(text)) == expected


ERRORS = {
    "syntax": 'start: "a"\n\nfoo: bar: baz\n',
    "undefined": 'start: "a" b\n',
    "twice": 'start: "a"\nstart: "b"\n',
    "duplicate_rules": 'start: [B] "c" | "c"\nB: "b"\n',
    "terminal_recursion": 'start: A\nA: "a" A\n',
    "rule_in_terminal": 'start: A\nA: "a" start\n',
    "empty_literal": 'start: ""\n',
    "empty_terminal": 'start: A\nA: \n',
    "bad_range": 'start: "ab".."z"\n',
    "alias_in_terminal": 'start: A\nA: "a" -> x\n',
    "inlined_alias": 'start: _a\n_a: "a" -> x\n',
    "unknown_import": 'start: NOPE\n%import common.NOPE\n',
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_stay_lark_errors(name):
    with pytest.raises(GrammarError) as lark_error:
        _load_with_lark(ERRORS[name])
    with pytest.raises(GrammarError) as ours:
        load_lark(ERRORS[name])
    assert str(ours.value) == str(lark_error.value)
    if name == "syntax":
        assert "line 3" in str(ours.value)


# -- random grammars: every construct in combination ---------------------------------
_LITERALS = ['","', '"("', '"select"', '"select"i', '"a"', '"\\""', '"é"', '"x y"', '"+"',
             '"\\\\"', '"\\n"', '"if"', '/[a-z]+/', '/\\//', '/a|b/i', '"a".."f"']


def _random_grammar(rng: random.Random) -> str:
    rules = ["start"] + [rng.choice(["", "_"]) + f"r{i}" for i in range(1, rng.randint(1, 4))]
    terms = [rng.choice(["", "_"]) + f"T{i}" for i in range(rng.randint(0, 3))]
    lines = []
    for name in rng.sample(["WS", "INT", "NUMBER", "ESCAPED_STRING", "CNAME"], rng.randint(0, 2)):
        alias = rng.choice([name, "I_" + name])
        lines.append(f"%import common.{name}" + (f" -> {alias}" if alias != name else ""))
        terms.append(alias)

    def item(depth, names):
        c = rng.random()
        if depth > 1 or c < 0.5:
            return rng.choice(names) if names and rng.random() < 0.5 else rng.choice(_LITERALS)
        if c < 0.6:
            return "(" + alts(depth + 1, names) + ")"
        if c < 0.7:
            return "[" + alts(depth + 1, names) + "]"
        inner = item(9, names) if rng.random() < 0.6 else "(" + alts(depth + 1, names) + ")"
        return inner + rng.choice(["?", "*", "+", " ~ 2", " ~ 0..2", "~1..3"])

    def alts(depth, names, alias=False):
        out = []
        for _ in range(rng.randint(1, 3)):
            seq = " ".join(item(depth, names) for _ in range(rng.randint(depth == 0, 3 if depth == 0 else 2)))
            out.append(seq + (f" -> al{rng.randint(0, 2)}" if alias and rng.random() < 0.2 else ""))
        return rng.choice([" | ", "\n    | "]).join(out)
    for i, t in enumerate(terms[:len(terms) - len(lines)]):
        lines.append(f"{t}{rng.choice(['', '.2'])}: " + alts(0, terms[:i]))
    for r in rules:
        mod = rng.choice(["", "!"] if r.startswith("_") else ["", "", "?", "!", "!?"])
        lines.append(f"{mod}{r}{rng.choice(['', '', '.3'])}: " + alts(0, rules + terms, not r.startswith("_")))
    if rng.random() < 0.4:
        lines.append("%ignore " + rng.choice(['" "', '/#[^\\n]*/', '(" " | "\\t")+']))
    return "\n".join(lines) + "\n"


def test_random_grammars_same_as_lark():
    handled = 0
    for k in range(60):
        text = _random_grammar(random.Random(k))
        for hoist in (False, True):
            try:
                expected = _normal(_load_with_lark(text, hoist=hoist))
            except GrammarError:  # lark refuses it (rules defined twice, mostly): so must we
                with pytest.raises(Exception):
                    lark_text.load(text, hoist=hoist)
                continue
            assert _normal(lark_text.load(text, hoist=hoist)) == expected, text
            handled += 1
    assert handled > 60
