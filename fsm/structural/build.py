"""A structural tag's nodes (spec.py) as one byte-level term over a JsonTermBuilder.

Every format is regular here, so the whole document is one term and one token automaton:
masks are exact across the boundaries (a token that ends free text and begins a trigger,
one that ends a JSON value and begins the end tag), computed once per DFA state and
cached, and the forced parts (an end tag, a tag's begin after its trigger, a schema's
keys) come out of the automaton's forced bytes. Semantics follow XGrammar's, which the
tests compare against (docs/structural-tags.md, "What each format means").
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.errors import ConstraintError, TimeBudgetError
from ..core.terms import CONCAT, Term
from ..json.options import JsonOptions
from ..json.schema import schema_to_term
from ..json.source import JsonTermBuilder
from ..json.union import UnionSchema
from ..regex.syntax import regex_to_term
from .lark_regular import lark_term
from .spec import (
    AnyText,
    Const,
    Grammar,
    JsonSchema,
    Or,
    Regex,
    Repeat,
    Sequence,
    StructuralTagError,
    Tag,
    TagsWithSeparator,
    TriggeredTags,
)

_WS = (b" ", b"\t", b"\n", b"\r")
# keywords whose value is a schema, a list of schemas, or a {name: schema} map
_ONE = ("additionalProperties", "items", "additionalItems", "contains", "not", "if", "then", "else",
        "propertyNames", "unevaluatedItems", "unevaluatedProperties")
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


@dataclass
class Builder:
    """Builds the term of a document; `relaxed` lists what json_checks="skip" left
    unchecked, by path."""

    max_whitespace: int
    json_checks: str
    tb: JsonTermBuilder = field(default_factory=JsonTermBuilder)
    relaxed: list = field(default_factory=list)

    def __post_init__(self):
        self.text = regex_to_term(self.tb, "(?s).*")  # any valid UTF-8 text
        self._after: dict[int, Term] = {}

    def term(self, node, ends: tuple = ()) -> Term:
        """The term of `node`; `ends`: the end strings of the tag it lies in, which its
        free text stops at (XGrammar's any_text inside a tag)."""
        tb = self.tb
        if isinstance(node, Const):
            return tb.literal(node.value.encode("utf-8"))
        if isinstance(node, AnyText):
            return self.free(node.excludes + ends)
        if isinstance(node, JsonSchema):
            return self.json(node)
        if isinstance(node, Regex):
            try:
                return regex_to_term(tb, node.pattern)
            except TimeBudgetError:
                raise
            except ConstraintError as e:
                raise StructuralTagError(f"{node.path}.pattern: {e}") from None
        if isinstance(node, Grammar):
            return lark_term(tb, node.grammar, node.path)
        if isinstance(node, Sequence):
            return tb.seq([self.term(x, ends) for x in node.elements])
        if isinstance(node, Or):
            return tb.alt([self.term(x, ends) for x in node.elements])
        if isinstance(node, Repeat):
            return tb.repeat(self.term(node.content, ends), node.lo, node.hi)
        if isinstance(node, Tag):
            return self.tag(node)
        if isinstance(node, TriggeredTags):
            return self.triggered(node, ends)
        if isinstance(node, TagsWithSeparator):
            one = tb.alt([self.tag(t) for t in node.tags])
            if node.stop_after_first:
                return one if node.at_least_one else tb.optional(one)
            many = tb.concat(one, tb.star(tb.concat(tb.literal(node.separator.encode()), one)))
            return many if node.at_least_one else tb.optional(many)
        raise AssertionError(node)  # pragma: no cover - spec.py makes only the nodes above

    # -- free text ---------------------------------------------------------------------
    def words(self, strings) -> Term:
        return self.tb.alt(self.tb.literal(s.encode("utf-8")) for s in strings)

    def free(self, avoid: tuple) -> Term:
        """Any text in which none of `avoid` occurs."""
        if not avoid:
            return self.text
        tb = self.tb
        return tb.intersect([self.text, tb.complement(tb.seq([tb.anything, self.words(avoid), tb.anything]))])

    def first_at_end(self, head: Term, stops: tuple) -> Term:
        """`head`, which ends with one of `stops`, where that is the first place any of
        them occurs: free text stops at the first trigger, even where a trigger overlaps
        the text before it (XGrammar's dispatch). (Free text already holds none of them, so only
        a stop that begins in the text and ends inside the final one could come first:
        where no stop's end is another's beginning, `head` is already exact, and its
        states stay free of intersections, whose masks cost more.)"""
        tb = self.tb
        if not _overlap(stops):
            return head
        early = tb.seq([tb.anything, self.words(stops), tb.any_byte, tb.anything])
        return tb.intersect([head, tb.complement(early)])

    def tag(self, t: Tag) -> Term:
        return self.tb.concat(self.tb.literal(t.begin.encode("utf-8")), self.after_begin(t))

    def after_begin(self, t: Tag) -> Term:
        """A tag's content and end (built once per tag: a triggered tag takes it twice)."""
        got = self._after.get(id(t))
        if got is None:
            tb, ends = self.tb, self.words(t.ends)
            if isinstance(t.content, AnyText):  # text without an end string, then one (XGrammar's reading)
                got = tb.concat(self.free(t.content.excludes + tuple(e for e in t.ends if e)), ends)
            else:
                got = tb.concat(self.term(t.content, t.ends), ends)
            self._after[id(t)] = got
        return got

    def triggered(self, node: TriggeredTags, ends: tuple) -> Term:
        """Free text; at each trigger, one of its tags. XGrammar's flags: at_least_one:
        the output begins with a tag; stop_after_first: nothing after the first tag."""
        tb = self.tb
        text = self.free(node.triggers + node.excludes + ends)
        led = []  # free text, its first trigger, the rest of one of that trigger's tags
        for trig in node.triggers:
            rests = [(t.begin[len(trig):].encode("utf-8"), self.after_begin(t))
                     for t in node.tags if t.begin.startswith(trig)]
            lead = self.first_at_end(tb.concat(text, tb.literal(trig.encode("utf-8"))), node.triggers)
            led.append(tb.concat(lead, prefixed(tb, rests)))
        led = tb.alt(led)
        if node.at_least_one:
            whole = tb.alt([self.tag(t) for t in node.tags])
            return whole if node.stop_after_first else tb.seq([whole, tb.star(led), text])
        return tb.alt([text, led]) if node.stop_after_first else tb.concat(tb.star(led), text)

    # -- JSON --------------------------------------------------------------------------
    def json(self, node: JsonSchema) -> Term:
        tb = self.tb
        ws = node.max_whitespace if node.max_whitespace is not None else self.max_whitespace
        opts = JsonOptions(whitespace="flexible" if ws else "compact", max_whitespace=ws)
        try:
            cs = schema_to_term(closed_objects(node.schema), tb, opts)
        except TimeBudgetError:  # (the whole document's budget, not this node's fault)
            raise
        except ConstraintError as e:
            raise StructuralTagError(f"{node.path}.json_schema: {e}") from None
        needs = ("a root anyOf split by uniqueItems" if isinstance(cs, UnionSchema) else
                 "recursion that needs a parser stack" if cs.rules is not None else
                 ", ".join(n for n, x in (("uniqueItems", cs.unique), ("distinct keys of open objects", cs.keys)) if x))
        if needs:
            if self.json_checks != "skip" or isinstance(cs, UnionSchema) or cs.rules is not None:
                raise StructuralTagError(
                    f"{node.path}.json_schema: needs {needs}, checked beside the automaton, which a structural "
                    "tag does not run (close open objects with additionalProperties: false and declared "
                    "properties; or json_checks=\"skip\" to leave those checks out, as XGrammar does)")
            self.relaxed.append(f"{node.path}: {needs} not checked (json_checks='skip')")
        term = cs.term
        if ws:  # the compiler puts whitespace around the root value; XGrammar does not
            term = _strip_ws(tb, term, tb.repeat(tb.alt(tb.literal(b) for b in _WS), 0, ws))
        return term


def prefixed(tb: JsonTermBuilder, items: list) -> Term:
    """The alternation of `literal + rest` for (literal bytes, rest term) items, with the
    literals' common prefixes shared (a trie, as TermBuilder.words): after a trigger, 400
    tools' begins (`\\n{"name": "tool_`...) cost a derivative of one branch per byte, not
    of all 400."""
    items = sorted(items, key=lambda x: x[0])

    def build(lo: int, hi: int, depth: int) -> Term:  # items[lo:hi] share items[lo][0][:depth]
        branches, i = [], lo
        while i < hi:
            word, rest = items[i]
            if len(word) == depth:
                branches.append(rest)
                i += 1
                continue
            j = i
            while j < hi and len(items[j][0]) > depth and items[j][0][depth] == word[depth]:
                j += 1
            if j == i + 1:
                branches.append(tb.concat(tb.literal(word[depth:]), rest))
            else:
                first, last = word, items[j - 1][0]
                end = depth + 1
                while end < min(len(first), len(last)) and first[end] == last[end]:
                    end += 1
                branches.append(tb.concat(tb.literal(first[depth:end]), build(i, j, end)))
            i = j
        return tb.alt(branches)
    return build(0, len(items), 0)


def _overlap(stops: tuple) -> bool:
    """Whether a proper suffix of one of `stops` is a shorter, proper prefix of one: an
    occurrence that starts before a stop and ends inside it."""
    return any(u[k:] and t.startswith(u[k:]) and len(u) - k < len(t)
               for u in stops for t in stops for k in range(1, len(u)))


def _strip_ws(tb: JsonTermBuilder, term: Term, ws: Term) -> Term:
    spine, x = [], term
    while x.kind == CONCAT:
        spine.append(x.args[0])
        x = x.args[1]
    spine.append(x)
    if len(spine) < 3 or spine[0] is not ws or spine[-1] is not ws:  # pragma: no cover - the compiler's shape
        raise AssertionError("a JSON term without its root whitespace")
    return tb.seq(spine[1:-1])


def closed_objects(schema):
    """A copy of `schema` in which an object schema with `properties` and none of
    additionalProperties, patternProperties, unevaluatedProperties takes no other keys:
    XGrammar's strict mode, the default of its structural tags."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "properties" in out and not any(k in out for k in ("additionalProperties", "patternProperties",
                                                          "unevaluatedProperties")):
        out["additionalProperties"] = False
    for k in _ONE:
        if isinstance(out.get(k), dict):
            out[k] = closed_objects(out[k])
    for k in _MANY + ("items",):
        if isinstance(out.get(k), list):
            out[k] = [closed_objects(s) for s in out[k]]
    for k in _MAP:
        if isinstance(out.get(k), dict):
            out[k] = {n: closed_objects(s) for n, s in out[k].items()}
    return out
