"""Lark grammar text -> (BNF rules, terminal definitions, ignored terminal names), the
triple lark's own loader gives (GrammarBuilder, then Grammar.compile), by a tokenizer, a
recursive-descent parser into tuples and a few direct passes, where lark builds and
transforms parse trees.

The output is lark's, field for field (Rules, TerminalDefs, the names lark makes up).
What is read here is listed in docs/grammars.md, "Reading Lark text"; anything else
raises `Unsupported`, and fsm/grammar/automaton.py's load_lark asks lark's loader
(templates, `%override`, `%extend`, other imports, every error in the grammar).
"""
from __future__ import annotations

import os
import re
from copy import copy
from operator import attrgetter

import lark
from lark.grammar import NonTerminal, Rule, RuleOptions, Symbol, Terminal
from lark.lexer import PatternRE, PatternStr, TerminalDef
from lark.load_grammar import _TERMINAL_NAMES, eval_escaping
from lark.utils import is_id_continue, is_id_start

from ..core import budget

__all__ = ["Unsupported", "load"]


class Unsupported(Exception):
    """Outside this front end (a construct it does not handle, or an error in the
    grammar): lark's loader decides."""


def load(text: str, start: str = "start", hoist: bool = False):
    """Lark grammar text -> (rules, terminals, ignore), as lark's loader gives them.

    >>> rules, terminals, ignore = load('start: "(" NAME+ ")"\\nNAME: /[a-z]+/\\n')
    >>> [str(r) for r in rules]
    ['<start : LPAR __start_plus_0 RPAR>', '<__start_plus_0 : NAME>', \
'<__start_plus_0 : __start_plus_0 NAME>']
    >>> [(t.name, t.pattern.value) for t in terminals]
    [('NAME', '[a-z]+'), ('LPAR', '('), ('RPAR', ')')]
    """
    terms, rules, ignore = _definitions(_Parser(text).statements())
    if hoist:
        _hoist_tails(rules)
    memo: dict = {}
    terminals = [TerminalDef(name, _named(name, terms, memo, frozenset()), prio)
                 for name, (tree, prio, _) in terms.items() if tree is not None]
    bnf = _Bnf(terminals, terms, rules)
    defs = []
    for name, (tree, options) in rules.items():
        budget.check()  # (a rule: the compile's time budget, fsm/core/budget.py)
        keep = RuleOptions(keep_all_tokens=True) if options.keep_all_tokens else None
        defs.append((name, bnf.rewrite(tree, name, keep), options))
    compiled = [r for d in defs + bnf.helpers for r in _alternatives(*d)]
    compiled = _used_rules(compiled, start)
    used = {s.name for r in compiled for s in r.expansion if s.is_term}
    return compiled, [t for t in terminals if t.name in used or t.name in ignore], ignore


# ---------------------------------------------------------------------------------
# Tokens and parse: lark's grammar of grammars (lark.load_grammar TERMINALS and RULES)
# ---------------------------------------------------------------------------------
# In the order lark's lexer tries them: the first that matches wins, not the longest.
# Blanks ([ \t]+, skipped) go with the token after them: one match per token, and the
# same tokens, as no token but a comment starts with a blank.
_TOKEN = re.compile(r"[ \t]*(?:" + "|".join([
    r'(?P<REGEXP>/(?!/)(?:\\/|\\\\|[^/])*?/[imslux]*)',
    r'(?P<STRING>"(?:\\"|\\\\|[^"\n])*?"i?)',
    r'(?P<SKIP>\s*//[^\n]*|\s*#[^\n]*|\\[ ]*\n)',  # comments eat the space before them
    r'(?P<RULE>_?[a-z][_a-z0-9]*)',
    r'(?P<TERMINAL>_?[A-Z][_A-Z0-9]*)',
    r'(?P<OR>(?:\r?\n)+\s*\|)',  # a line starting with "|" continues the alternatives
    r'(?P<NL>(?:\r?\n)+\s*)',
    r'(?P<NUMBER>[+-]?\d+)',
    r'(?P<DIRECTIVE>%(?:override|declare|extend|ignore|import))',
    r'(?P<MODIFIERS>(?:!|!\??|\?!?)(?=[_a-z]))',
    r'(?P<OP>[+*]|\?(?![a-z_]))',
    r'(?P<PUNCT>\.\.|->|\.(?!\.)|[][(){}|~:,])',
    r'(?P<BAD>[\s\S])',  # anything else: no statement takes it
]) + ")")
_ATOM_START = {"(", "[", "STRING", "REGEXP", "RULE", "TERMINAL"}


def _tokens(text: str) -> list:
    """(kind, text) pairs; punctuation and directives are their own kind."""
    out = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind != "SKIP":
            v = m.group(kind)
            out.append(("|" if kind == "OR" else v if kind in ("PUNCT", "DIRECTIVE") else kind, v))
    out.append(("END", ""))
    return out


class _Parser:
    """Statements as tuples: ("rule", name, modifiers, priority, tree), ("term", name,
    priority, tree), ("ignore", tree), ("declare", symbols), ("import", path, aliases).
    Trees: ("alts", alternatives), an alternative ("seq", items) or ("alias", seq,
    name); items ("T", NAME), ("N", name), ("lit", token), ("range", token, token),
    ("maybe", alts), ("op", item, "?" | "*" | "+"), ("rep", item, n, m or None), alts."""

    def __init__(self, text: str):
        self.toks, self.i = _tokens(text + "\n"), 0

    def peek(self) -> str:
        return self.toks[self.i][0]

    def take(self, kind: str | None = None) -> str:
        k, v = self.toks[self.i]
        if kind is not None and k != kind:
            raise Unsupported(f"expected {kind}, got {v!r}")
        self.i += 1
        return v

    def accept(self, kind: str) -> bool:
        if self.toks[self.i][0] == kind:
            self.i += 1
            return True
        return False

    def statements(self) -> list:
        out = []
        while self.peek() != "END":
            budget.check()
            k = self.peek()
            if k == "NL":
                self.i += 1
            elif k in ("MODIFIERS", "RULE"):
                mods = self.take() if k == "MODIFIERS" else ""
                name = self.take("RULE")
                prio = int(self.take("NUMBER")) if self.accept(".") else None
                out.append(self.ended(("rule", name, mods, prio, self.body(aliases=True))))
            elif k == "TERMINAL":
                name = self.take()
                prio = int(self.take("NUMBER")) if self.accept(".") else 0
                out.append(self.ended(("term", name, prio, self.body())))
            elif k == "%ignore":
                self.i += 1
                out.append(self.ended(("ignore", self.alts(False))))
            elif k == "%declare":
                self.i += 1
                syms = [self.symbol()]
                while self.peek() != "NL":
                    syms.append(self.symbol())
                out.append(self.ended(("declare", syms)))
            elif k == "%import":
                self.i += 1
                out.append(self.ended(self.import_()))
            else:
                raise Unsupported(f"statement {self.toks[self.i][1]!r}")
        return out

    def ended(self, statement: tuple) -> tuple:
        self.take("NL")
        return statement

    def body(self, aliases: bool = False) -> tuple:
        self.take(":")
        return self.alts(aliases)

    def symbol(self) -> tuple:
        k = self.peek()
        if k not in ("RULE", "TERMINAL"):
            raise Unsupported("expected a name")
        return ("T" if k == "TERMINAL" else "N", self.take())

    def import_(self) -> tuple:
        names = [self.symbol()[1]]
        while self.accept("."):
            names.append(self.symbol()[1])
        if self.accept("("):
            listed = [self.symbol()[1]]
            while self.accept(","):
                listed.append(self.symbol()[1])
            self.take(")")
            path, aliases = tuple(names), {n: n for n in listed}
        else:
            alias = self.symbol()[1] if self.accept("->") else names[-1]
            path, aliases = tuple(names[:-1]), {names[-1]: alias}
        if not path:
            raise Unsupported("nothing imported")
        return ("import", path, aliases)

    def alts(self, aliases: bool) -> tuple:
        out = [self.alternative(aliases)]
        while self.accept("|"):
            out.append(self.alternative(aliases))
        return ("alts", tuple(out))

    def alternative(self, aliases: bool) -> tuple:
        items = []
        while self.peek() in _ATOM_START:
            items.append(self.expr())
        seq = ("seq", tuple(items))
        if not self.accept("->"):
            return seq
        if not aliases:  # an alias inside (...) or in a terminal: lark's error
            raise Unsupported("misplaced alias")
        return ("alias", seq, self.take("RULE"))

    def expr(self) -> tuple:
        atom = self.atom()
        if self.peek() == "OP":
            return ("op", atom, self.take())
        if self.accept("~"):
            n = int(self.take("NUMBER"))
            return ("rep", atom, n, int(self.take("NUMBER")) if self.accept("..") else None)
        return atom

    def atom(self) -> tuple:
        k, v = self.toks[self.i]
        self.i += 1
        if k in ("(", "["):
            tree = self.alts(False)
            self.take(")" if k == "(" else "]")
            return tree if k == "(" else ("maybe", tree)
        if k == "TERMINAL":
            return ("T", v)
        if k == "RULE":
            if self.peek() == "{":
                raise Unsupported("template")
            return ("N", v)
        if k == "STRING" and self.accept(".."):
            return ("range", v, self.take("STRING"))
        return ("lit", v)


_EMPTY = ("seq", ())  # the empty alternative


def _kids(node: tuple) -> tuple:
    kind = node[0]
    if kind in ("alts", "seq"):
        return node[1]
    return (node[1],) if kind in ("alias", "maybe", "op", "rep") else ()


# ---------------------------------------------------------------------------------
# Definitions: what GrammarBuilder.load_grammar and build() keep
# ---------------------------------------------------------------------------------
def _definitions(stmts: list):
    """-> terminals {name: (tree or None if %declare'd, priority, scope its names are
    looked up in)}, rules {name: [tree, RuleOptions]}, ignore names. Imports come
    first, whatever their place in the text, as in lark."""
    terms: dict = {}
    rules: dict = {}
    ignore: list = []

    def define(table: dict, name: str, value) -> None:
        if name in terms or name in rules or name.startswith("__"):
            raise Unsupported(f"{name} defined twice or reserved")
        table[name] = value
    imports: dict = {}
    for s in stmts:
        if s[0] == "import":
            imports.setdefault(s[1], {}).update(s[2])
    for path, aliases in imports.items():
        lib = _library(path)
        if not aliases.keys() <= lib.keys():
            raise Unsupported(f"import of {sorted(aliases.keys() - lib.keys())} from {path}")
        for name, (pattern, prio) in lib.items():  # in the library's order, as in lark
            if name in aliases:
                define(terms, aliases[name], (("pat", pattern), prio, terms))
    for s in stmts:
        kind = s[0]
        if kind == "rule":
            _, name, mods, prio, tree = s
            if "?" in mods and name.startswith("_"):
                raise Unsupported("?_rule")
            define(rules, name, [tree, RuleOptions("!" in mods, "?" in mods, priority=prio)])
        elif kind == "term":
            define(terms, s[1], (s[3], s[2], terms))
        elif kind == "ignore":
            alts = s[1][1]
            if len(alts) == 1 and len(alts[0][1]) == 1 and alts[0][1][0][0] == "T":
                ignore.append(alts[0][1][0][1])
            else:  # an expression: a terminal of its own (no duplicate check, as in lark)
                name = f"__IGNORE_{len(ignore)}"
                ignore.append(name)
                terms[name] = (s[1], 0, terms)
        elif kind == "declare":
            for k, name in s[1]:
                if k == "N":
                    raise Unsupported("%declare of a rule")
                define(terms, name, (None, 1, terms))
    if not set(ignore) <= terms.keys():
        raise Unsupported("undefined ignored terminal")
    return terms, rules, ignore


_LIBRARIES: dict = {}  # dotted path -> {name: (pattern, priority)} or None


def _library(path: tuple) -> dict:
    """The terminals of one of lark's own grammar files (common.lark, ...), compiled
    once per process; lark's own file is the one lark would read."""
    if path not in _LIBRARIES:
        _LIBRARIES[path] = _read_library(path)
    if _LIBRARIES[path] is None:
        raise Unsupported(f"import from {'.'.join(path)}")
    return _LIBRARIES[path]


def _read_library(path: tuple):
    file = os.path.join(os.path.dirname(lark.__file__), "grammars", *path) + ".lark"
    try:
        with open(file, encoding="utf8") as f:
            stmts = _Parser(f.read()).statements()
    except (OSError, Unsupported):
        return None
    if any(s[0] not in ("term", "rule") for s in stmts):
        return None  # its own imports, ignores...: lark's to handle
    scope: dict = {}
    for s in stmts:
        if s[0] == "term":
            scope[s[1]] = (s[3], s[2], scope)
    out, memo = {}, {}
    for name, (_, prio, _) in scope.items():
        try:
            out[name] = (_named(name, scope, memo, frozenset()), prio)
        except Unsupported:
            pass  # importing it goes to lark
    return out


def _hoist_tails(rules: dict) -> None:
    """fsm/grammar/automaton.py's `_hoist_tails` on our trees: an alternative with 3+ optional
    parts keeps its parts up to the first optional one, the rest becomes a fresh rule
    `__<rule>_tail<k>` (hoisted again if it qualifies). Same order and names."""
    def optional(c) -> bool:
        return c[0] == "maybe" or c[0] == "op" and c[2] in "?*"
    todo = list(rules.items())
    while todo:
        name, d = todo.pop()  # name: the rule as written
        alts = []
        for alt in d[0][1]:
            seq = alt[1] if alt[0] == "alias" else alt
            opts = [i for i, c in enumerate(seq[1]) if optional(c)]
            if len(opts) >= 3:
                k = 0
                while f"__{name}_tail{k}" in rules:
                    k += 1
                fresh = f"__{name}_tail{k}"
                rules[fresh] = [("alts", (("seq", seq[1][opts[0] + 1:]),)), d[1]]
                todo.append((name, rules[fresh]))
                seq = ("seq", seq[1][:opts[0] + 1] + (("N", fresh),))
                alt = ("alias", seq, alt[2]) if alt[0] == "alias" else seq
            alts.append(alt)
        d[0] = ("alts", tuple(alts))


# ---------------------------------------------------------------------------------
# Terminals: patterns as lark's TerminalTreeToPattern builds them
# ---------------------------------------------------------------------------------
_LARK_UNESCAPES = re.compile("[\\\\\r\0\ud800-\udfff]")


def _unescape(body: str) -> str:
    # lark's eval_escaping (a Python literal_eval) is the identity on text without
    # backslashes, carriage returns, NULs or lone surrogates: skip it there
    return eval_escaping(body) if _LARK_UNESCAPES.search(body) else body


def _literal(token: str):
    """A "string"flags or /regex/flags token -> PatternStr / PatternRE."""
    q = token[0]
    end = token.rindex(q)
    body, flags = token[1:end], token[end + 1:]
    if q == "/" and "\n" in token and "x" not in flags:
        raise Unsupported("newline in a regex without the x flag")
    s = _unescape(body)
    if not s:
        raise Unsupported("empty literal")
    if q == '"':
        return PatternStr(s.replace("\\\\", "\\"), flags, raw=token)
    return PatternRE(s, flags, raw=token)


def _range(a: str, b: str) -> PatternRE:
    x, y = a[1:-1], b[1:-1]  # as written: lark puts the raw text in the class
    if len(_unescape(x)) != 1 or len(_unescape(y)) != 1:
        raise Unsupported("bad range")
    return PatternRE(f"[{x}-{y}]")


def _named(name: str, scope: dict, memo: dict, busy: frozenset):
    """The pattern of terminal `name` of `scope` (a grammar's or a library's)."""
    key = (id(scope), name)
    if key not in memo:
        entry = scope.get(name)
        if entry is None or entry[0] is None or key in busy or entry[0] == ("alts", (_EMPTY,)):
            raise Unsupported(f"terminal {name} undefined, declared, recursive or empty")
        memo[key] = _pattern(entry[0], entry[2], memo, busy | {key})
    return memo[key]


def _pattern(node: tuple, scope: dict, memo: dict, busy: frozenset):
    kind = node[0]
    if kind in ("alts", "seq"):
        ps = [_pattern(k, scope, memo, busy) for k in node[1]]
        if not ps:  # an empty alternative (a terminal of nothing but that is refused)
            return PatternStr("")
        if len(ps) == 1:
            return ps[0]
        if kind == "seq":
            return PatternRE("".join(p.to_regexp() for p in ps))
        # longest first: Python's re takes the first alternative that matches
        ps.sort(key=lambda p: (-p.max_width, -p.min_width, -len(p.value)))
        return PatternRE(f"(?:{'|'.join(p.to_regexp() for p in ps)})")
    if kind == "T":
        return _named(node[1], scope, memo, busy)
    if kind == "pat":  # an imported terminal, compiled with its library
        return node[1]
    if kind == "lit":
        return _literal(node[1])
    if kind == "range":
        return _range(node[1], node[2])
    if kind in ("maybe", "op", "rep"):
        inner = _pattern(node[1], scope, memo, busy)
        if kind == "rep" and node[3] is not None and node[3] < node[2]:
            raise Unsupported("bad repeat range")
        op = ("?" if kind == "maybe" else node[2] if kind == "op" else
              f"{{{node[2]}}}" if node[3] is None else f"{{{node[2]},{node[3]}}}")
        return PatternRE(f"(?:{inner.to_regexp()}){op}", inner.flags)
    raise Unsupported(f"{kind} in a terminal")


# ---------------------------------------------------------------------------------
# Rules: lark's EBNF_to_BNF, anonymous terminals and SimplifyRule_Visitor
# ---------------------------------------------------------------------------------
_GAP = Symbol("__empty__")  # lark's _EMPTY: a place `[x]` keeps in the parse tree when absent
_NAME = attrgetter("name")


class _Bnf:
    """What rewriting the rules of one grammar shares: the terminals (literals met in
    rules join them, named as lark names them) and the helper rules of `x*` / `x+`,
    one per distinct operand, numbered across the grammar. Rewritten trees hold lark
    symbols (and `_GAP`s) in ("alts", ...) and ("seq", ...) tuples."""

    def __init__(self, terminals: list, terms: dict, rules: dict):
        self.terminals, self.terms, self.rules = terminals, terms, rules
        self.names = {t.name for t in terminals}
        self.by_pattern = {t.pattern: t for t in terminals}
        self.by_token: dict = {}  # literal as written -> its terminal's name
        self.anon = self.count = 0
        self.made: dict = {}  # operand -> its helper rule's NonTerminal
        self.helpers: list = []  # (name, tree, options)

    def rewrite(self, tree: tuple, rule: str, keep):
        """EBNF -> alternatives of symbol sequences; `keep`: RuleOptions of a `!rule`.
        Nodes are rewritten in lark's order, which names what they make: deepest
        level first, left to right (lark's in-place transformers walk `iter_subtrees`)."""
        levels = [[tree]]
        while True:
            below = [k for n in levels[-1] for k in _kids(n)]
            if not below:
                break
            levels.append(below)
        done: list = []  # the level below, rewritten: its nodes are the kids, in order
        for level in reversed(levels):
            below = iter(done)
            done = [self.node(n, [next(below) for _ in _kids(n)], rule, keep) for n in level]
        return done[0]

    def node(self, node: tuple, kids: list, rule: str, keep):
        kind = node[0]
        if kind in ("T", "N"):
            if node[1] not in (self.terms if kind == "T" else self.rules):
                raise Unsupported(f"undefined symbol {node[1]}")
            return Terminal(node[1], node[1].startswith("_")) if kind == "T" else NonTerminal(node[1])
        if kind in ("lit", "range"):
            name = self.by_token.get(node[1:])
            if name is None:
                p = _literal(node[1]) if kind == "lit" else _range(*node[1:])
                name = self.by_token[node[1:]] = self.terminal(p)
            return Terminal(name, keep is None and kind == "lit" and node[1][0] == '"')
        if kind in ("alts", "seq"):
            return (kind, tuple(kids))
        inner = kids[0]
        if kind == "alias":
            return ("alias", inner, node[2])
        if kind == "maybe":  # absent: a gap per symbol its parse tree would keep
            return ("alts", (inner, ("seq", (_GAP,) * _kept(inner, keep is not None))))
        if kind == "rep":
            lo, hi = node[2], node[2] if node[3] is None else node[3]
            if lo < 0 or hi < lo or hi >= 50:  # lark splits longer repeats into rules
                raise Unsupported("repeat range")
            return ("alts", tuple(("seq", (inner,) * n) for n in range(lo, hi + 1)))
        if node[2] == "?":
            return ("alts", (inner, _EMPTY))
        nt = self.made.get(inner)
        if nt is None:  # x* and x+ share the rule `__<rule>_<kind>_<n>: x | it x`
            nt = self.made[inner] = NonTerminal(
                f"__{rule}_{'plus' if node[2] == '+' else 'star'}_{self.count}")
            self.count += 1
            self.helpers.append((nt.name, ("alts", (("seq", (inner,)), ("seq", (nt, inner)))), keep))
        return nt if node[2] == "+" else ("alts", (nt, _EMPTY))

    def terminal(self, p) -> str:
        """The terminal of a literal in a rule: a terminal defined as exactly it, else
        a new one, named as lark's PrepareAnonTerminals names it."""
        name = None
        if p in self.by_pattern:
            name = self.by_pattern[p].name
        elif isinstance(p, PatternStr):
            v = p.value
            name = _TERMINAL_NAMES.get(v)
            if name is None and is_id_continue(v) and is_id_start(v[0]) and v.upper() not in self.names:
                name = v.upper()
            if name in self.names:
                name = None
        if name is None:
            name = f"__ANON_{self.anon}"
            self.anon += 1
        if name not in self.names:
            td = TerminalDef(name, p)
            self.names.add(name)
            self.by_pattern[p] = td
            self.terminals.append(td)
        return name


def _kept(node, keep_all: bool) -> int:
    """lark's FindRuleSize: the most symbols an alternative leaves in a parse tree."""
    if isinstance(node, tuple):
        sizes = [_kept(k, keep_all) for k in node[1]]
        return sum(sizes) if node[0] == "seq" else max(sizes)
    if node is _GAP:
        return 0
    if node.is_term:
        return int(keep_all or not node.filter_out)
    return int(not node.name.startswith("_"))


def _expand(node) -> list:
    """Flat symbol tuples of a rewritten tree; the leftmost choice varies slowest."""
    if not isinstance(node, tuple):
        return [(node,)]
    if node[0] == "alts":
        return [x for k in node[1] for x in _expand(k)]
    out = [()]
    for k in node[1]:
        if isinstance(k, tuple):
            xs = _expand(k)
            out = [a + b for a in out for b in xs]
        else:
            out = [a + (k,) for a in out]
    return out


def _alternatives(name: str, tree: tuple, options) -> list:
    """A rewritten rule's lark Rules: distinct alternatives in order (their `order` is
    their place before empty duplicates go), gaps recorded in empty_indices. Symbols
    compare by name (terminal and rule names never meet: rule names have a-z)."""
    alts: dict = {}
    for alt in tree[1]:
        seq, alias = (alt[1], alt[2]) if alt[0] == "alias" else (alt, None)
        for syms in _expand(seq):
            alts.setdefault((tuple(map(_NAME, syms)), alias), syms)
    keep_all = options is not None and options.keep_all_tokens
    out, seen = [], set()
    for order, ((names, alias), syms) in enumerate(alts.items()):
        if alias and name.startswith("_"):
            raise Unsupported("alias on an inlined rule")
        opts = options
        if _GAP.name in names:
            opts = copy(options) if options else RuleOptions()
            opts.empty_indices = tuple(s is _GAP for s in syms)
            syms = tuple(s for s in syms if s is not _GAP)
            names = tuple(map(_NAME, syms))
        if keep_all:
            syms = tuple(Terminal(s.name) if s.is_term else s for s in syms)
        if names in seen:
            if names:
                raise Unsupported(f"rule {name} defined twice")
            continue
        seen.add(names)
        out.append(Rule(NonTerminal(name), list(syms), order, alias, opts))
    return out


def _used_rules(rules: list, start: str) -> list:
    """Drop rules no other rule (nor `start`) uses, until none goes."""
    while True:
        used = {s.name for r in rules for s in r.expansion
                if not s.is_term and s.name != r.origin.name} | {start}
        kept = [r for r in rules if r.origin.name in used]
        if len(kept) == len(rules):
            return rules
        rules = kept
