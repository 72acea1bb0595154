"""A Lark grammar without recursion as one byte-level term, so that it joins the
structural tag's single automaton (docs/structural-tags.md, "Grammars").

Its language is the grammar's sentences: the terminals' texts in the order the rules
allow, with the %ignore'd terminals allowed between them and around the whole. A rule
may loop on itself at one end of its alternatives (`x*`, `x+`: lark expands them so);
other recursion is not regular: StructuralTagError names it.
"""
from __future__ import annotations

import re

from ..core.errors import GrammarError, RegexError
from ..core.terms import Term, TermBuilder
from ..grammar.automaton import load_lark
from ..regex.syntax import terminal_terms
from .spec import StructuralTagError

_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE, "u": re.UNICODE}


def lark_term(tb: TermBuilder, grammar: str, path: str, start: str = "start") -> Term:
    """The term of the sentences of the Lark grammar `grammar` (rule `start`)."""
    try:
        rules, terminals, ignore = load_lark(grammar, start)
    except GrammarError as e:
        raise StructuralTagError(f"{path}.grammar: {e}") from None
    by_rule: dict[str, list] = {}
    for r in rules:
        by_rule.setdefault(r.origin.name, []).append(r.expansion)
    if start not in by_rule:
        raise StructuralTagError(f"{path}.grammar: no rule {start!r}")
    lexemes = {td.name: _terminal(tb, td, path) for td in terminals}
    ign = tb.star(tb.alt(lexemes[n] for n in ignore)) if ignore else tb.empty
    memo: dict[str, Term] = {}

    def rule(name: str, busy: tuple) -> Term:
        if name in busy:
            raise StructuralTagError(f"{path}.grammar: rule {name!r} is recursive "
                                     f"({' -> '.join((*busy[busy.index(name):], name))}); grammars inside a "
                                     "structural tag must be regular (no rule may reach itself but at one end "
                                     "of its own alternatives, as `x*` and `x+` expand)")
        if name not in memo:
            inner = (*busy, name)

            def seq(exp) -> Term:
                parts = [lexemes[s.name] if s.is_term else rule(s.name, inner) for s in exp]
                return tb.seq([x for p in parts for x in (p, ign)])
            # R: B | R X | Y R (lark's expansion of x* and x+, and any rule that loops on
            # itself at one end) is Y* B X*: regular
            base, left, right = [], [], []
            for exp in by_rule[name]:
                names = [s.name for s in exp]
                if name not in names:
                    base.append(exp)
                elif names.count(name) == 1 and len(names) > 1 and names[0] == name:
                    left.append(exp[1:])
                elif names.count(name) == 1 and len(names) > 1 and names[-1] == name:
                    right.append(exp[:-1])
                else:
                    rule(name, inner)  # (raises: recursion in the middle)
            body = tb.alt(seq(e) for e in base)
            if left:
                body = tb.concat(body, tb.star(tb.alt(seq(e) for e in left)))
            if right:
                body = tb.concat(tb.star(tb.alt(seq(e) for e in right)), body)
            memo[name] = body
        return memo[name]
    return tb.seq([ign, rule(start, ())])


def _terminal(tb: TermBuilder, td, path: str) -> Term:
    p = td.pattern
    if p.type == "str" and not p.flags:
        return tb.literal(p.value.encode("utf-8"))
    flags = 0
    for f in p.flags:
        flags |= _FLAGS.get(f, 0)
    value = p.value if p.type == "re" else re.escape(p.value)
    try:
        got = terminal_terms(tb, value, flags)
    except RegexError as e:
        raise StructuralTagError(f"{path}.grammar: terminal {td.name}: {e}") from None
    if any(need is not None for _, need in got):
        raise StructuralTagError(f"{path}.grammar: terminal {td.name}: an assertion that reads the text "
                                 "after it is not supported inside a structural tag")
    return tb.alt(t for t, _ in got)
