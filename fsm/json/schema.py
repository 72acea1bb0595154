"""JSON Schema (draft 2020-12, plus draft-07 forms) -> one byte-level term -> token automaton.

    >>> from structgen import fsm
    >>> auto = fsm.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}},
    ...                                 "required": ["a"]}, vocab)   # doctest: +SKIP

Every (sub)schema compiles to a term whose language is the canonical texts of the values
valid under it, so the composition keywords are exact intersections, unions and
complements of terms. What cannot be enforced exactly raises SchemaError naming the
keyword and JSON pointer (strict), or is dropped with a SchemaWarning (strict=False).
uniqueItems and distinct keys are checked beside the automaton (unique.py, keys.py), a
split root anyOf runs as several automata (union.py), recursion goes through recursive.py.
This module holds the compiler (_Compiler), CompiledSchema and the public API. Keyword
support, canonical form, options and limits: docs/json-schema.md.
"""
from __future__ import annotations

import functools
import json
import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from itertools import combinations, product
from typing import NamedTuple
from urllib.parse import unquote, urldefrag

from ..core.automaton import TokenAutomaton
from ..core.budget import freed_on_timeout, scope, stage
from ..core.dfa import DEFAULT_MAX_STATES, LazyDFA
from ..core.errors import ConstraintError, RegexError, SchemaError, SchemaWarning, TimeBudgetError, TooLargeError
from ..core.matcher import TokenMatcher
from ..core.options import lists_options, resolve
from ..core.terms import ALT, AND, BYTES, CONCAT, NOT, STR, Term, TermBuilder, paused_gc
from ..grammar.automaton import GrammarAutomaton
from .allof import AllOfMerges
from .disjoint import (
    _disc_values,
    closed_keys,
    deref,
    disjoint,
    group_ways,
    pairwise_apart,
    required_keys,
    scalar_overlaps,
    types_of,
)
from .dynamic import DynamicRefs, join_uri
from .formats import FORMAT_ALIASES, INTEGER_FORMATS, OPENAPI_ANY, PYDANTIC_ANY_STRING, is_known
from .keys import KeyMatcher, KeyPlan, key_language, longest_text
from .keywords import (
    _ANNOTATIONS,
    _ARRAY_KW,
    _FAMILIES,
    _NUMBER_KW,
    _OBJECT_KW,
    _STRING_KW,
    _SUB_LIST,
    _SUB_MAP,
    _SUB_ONE,
    _TYPED_KW,
    _TYPES,
    _UNSUPPORTED,
    _beside_ref,
    _check_values,
    _idle_keywords,
    _names_type,
    _schema_keys,
    contradictions,
    schema_notes,
)
from .merge import _TYPED_ENUM_KEYS, _common_values, _finite_values, _has_type, _json_equal, _well_typed, canonical_json
from .numbers import NumberTerms, integer_texts, number_text_term, to_decimal
from .options import JsonOptions
from .pydantic_models import _pydantic_generator
from .recursive import MarkerMemo, _marker_index, _RecursiveRules, lazy_recursion
from .source import JsonTermBuilder, JsonTermSource
from .strings import StringTerms, encode_string, string_text
from .union import UnionAutomaton, UnionSchema, branch_schemas, root_unions, schemas_below
from .unique import MIN_UNIQUE_DOMAIN, UniquePlan, _count_strings, plan_unique_items, without_unique_items
from .unique_matcher import UniqueMatcher
from .variants import (
    CONDITIONS_MAX,
    CONDITIONS_ONE_KEY_MAX,
    _holds,
    _named,
    _own_keys,
    _presence_parts,
    _presence_sets,
    _required_only,
    _value_conditions,
)

MAX_UNIQUE_DOMAIN = 16
# Subschemas compiled inside one another at most (declared containers, $refs and
# applicators each a level), a level taking up to ~6 of Python's 1000 frames: deeper,
# the compile starts again with declared containers counted against max_depth
# (_TooDeep), and past it then, SchemaError. Real schemas nest up to ~60 (Renovate's).
MAX_NESTING = 120
MAX_PATTERN_PROPERTIES_PARTITION = 5  # patterns whose every subset is a way a key may match
MAX_PATTERN_SUBSETS = 64  # past that many patterns, the subsets whose patterns meet (_pattern_subsets)
MAX_KEY_STATES = 4096  # DFA states of an object's undeclared keys read to tell if they are bounded (_free_keys)
# states of the search that tells whether an item can hold `contains` (_holders):
# a finite contains (enum, const) settles within tens; past this, it is left to the array
CONTAINS_SEARCH_STATES = 2000
# a `contains` in an array of at most this many items counts them place by place
# (_prefix_count_list): a state whose count the places left cannot reach is nothing at
# once, where _count_list's would need a search of the item under way (`maxItems: 1,
# contains: {const: {k: 1}}`: every object begun otherwise, a TooLargeError mid-output)
CONTAINS_COUNTED_PLACES = 16

_PARTS_KW = ("type", "const", "enum", "$ref", "allOf", "anyOf", "oneOf", "not", "if")  # (_value's parts)
_OPEN = {"additionalProperties": True}
# Keywords under which object terms meet in intersections (complement operands are built
# canonical anyway): a document with none of them gives its objects slots for their
# own keys only, the other keys after them (_Compiler._object_variant)
_MEETS = frozenset(("allOf", "oneOf", "not", "if", "dependentSchemas", "dependencies", "contains",
                    "uniqueItems", "unevaluatedProperties", "unevaluatedItems", "patternProperties",
                    "$ref beside", "containers beside"))  # (_index: a $ref with sibling keywords
# is intersected with them; so are two parts of one schema that may both accept objects
# or arrays)


@dataclass(frozen=True)
class JsonInfo:
    """What a compiled schema's Constraint tells of its outputs (`constraint.info`)."""

    key_order: list  # declared properties in output order
    relaxed: list  # what lenient mode (strict=False) relaxed or dropped, with its pointer
    recursion: str | None  # how recursive $refs run: "lazy" (lazy terms), "grammar", or None
    canonical: Callable  # canonical(instance, indent=None): the text the constraint accepts
    schema: object = field(default=None, repr=False, compare=False)  # the schema compiled (loaded)

    @functools.cached_property
    def why_empty(self) -> tuple:
        """Keywords that contradict, with their pointers (keywords.contradictions): named
        where the constraint is refused for having no output (TokenAutomaton.require_output).
        Found when first asked: a walk of the whole schema, which a compile that has
        output does not need (CloudFormation's: a tenth of its compile)."""
        return () if self.schema is None else tuple(contradictions(self.schema))


class CompiledSchema:
    """The term of a schema plus what is needed to write instances canonically."""

    def __init__(self, tb: TermBuilder, term: Term, key_order: list[str], options: dict, relaxed: list):
        self.tb, self.term, self.key_order, self.options, self.relaxed = tb, term, key_order, options, relaxed

    rules = None  # _RecursiveRules for recursive schemas on the grammar path
    recursion = None  # how a recursive schema is run: "lazy" (lazy terms) or "grammar" (rules)
    unique = None  # unique.UniquePlan: the uniqueItems checked beside the automaton
    keys = None  # keys.KeyPlan: objects' keys kept distinct beside the automaton
    own_slots = None  # (root schema, its _Compiler: _meets, _resolve...) where objects may slot own keys only
    MAX_ARRANGEMENTS = 256

    def canonical(self, instance, indent: int | None = None) -> str:
        """The canonical text of an instance (docs/json-schema.md), compact or indented.

        Where objects put their own keys first (`own_slots`), which keys are an object's
        own depends on the subschema it is read under: the instance is walked with the
        schema, and under an anyOf each branch gives an arrangement; the first one the
        automaton accepts is written (the first one if none is: an invalid instance).

        >>> cs = schema_to_term({"properties": {"a": {"properties": {"z": {}}}, "z": {}}})
        >>> cs.canonical({"z": 1, "a": {"a": 2, "z": 3}})
        '{"a":{"z":3,"a":2},"z":1}'
        """
        if self.own_slots is None:
            return canonical_json(instance, self.key_order, indent)
        first = None
        for k, v in enumerate(self._arrange(self.own_slots[0], instance)):
            if k == self.MAX_ARRANGEMENTS:
                break
            if first is None:
                first = v
            if self.accepts(canonical_json(v, None), self._canon_dfa):
                return canonical_json(v, None, indent)
        return canonical_json(first, None, indent)

    @functools.cached_property
    def _canon_dfa(self) -> LazyDFA:
        return self.dfa()

    @functools.cached_property
    def _key_rank(self) -> dict:
        """Key -> its place in the key order (unknown keys: after all of them)."""
        return {k: i for i, k in enumerate(self.key_order)}

    def _arrange(self, node, v):
        """The instance v (read under schema `node`) with its objects' keys in the order
        of their slots: own keys first, in key order, then the others; below a schema
        that meets, every key in key order; one arrangement per anyOf (or disjoint
        oneOf) branch taken (a generator: the caller stops at the first accepted)."""
        comp = self.own_slots[1]
        if not isinstance(v, (dict, list)) or not isinstance(node, dict) or comp._meets(node):
            yield self._ordered(v)  # (below a schema that meets: every known key slotted)
            return
        if "$ref" in node and (not _beside_ref(node) or comp._typed_ref(node)):
            yield from self._arrange(comp._resolve(node, node["$ref"]), v)
            return
        if "allOf" in node or "$ref" in node:  # (as _Compiler._value: merged if it merges; else presence parts)
            node = comp._conjunction(node) or node
        if _presence_parts(node) is not None:  # (the variant of node with v's keys: its slots)
            keys = set(v) if isinstance(v, dict) else set()
            node = next((x for x in comp._presence_variants(node) if "object" in x["type"]
                         and set(x["required"]) <= keys and not any(x["properties"][k] is False and k in keys
                                                                   for k in x["properties"])), node)
        node = comp._union_distributed(node) or node
        for kw in ("anyOf", "oneOf"):  # (no other part of node accepts objects; a oneOf here
            if kw in node:           # is a union: _Compiler._meets)
                for b in node[kw]:
                    yield from self._arrange(b, v)
                return
        if isinstance(v, list):
            pre = node.get("prefixItems")
            rest = node.get("items", True)
            if isinstance(rest, list):  # draft-07 tuple form
                pre, rest = rest, node.get("additionalItems", True)
            pre = pre or []
            subs = [pre[i] if i < len(pre) else rest for i in range(len(v))]
            for combo in product(*[self._arrange(s, x) for s, x in zip(subs, v)]):
                yield list(combo)
            return
        own, rank = _own_keys(node), self._key_rank
        keys = sorted(v, key=lambda k: (k not in own, rank.get(k, len(rank))))
        subs = [comp._key_schema(node, k) for k in keys]
        for combo in product(*[self._arrange(s, v[k]) for s, k in zip(subs, keys)]):
            yield dict(zip(keys, combo))

    def _ordered(self, v):
        """v with every object's keys in key order (the universe and const values)."""
        if isinstance(v, list):
            return [self._ordered(x) for x in v]
        if isinstance(v, dict):
            rank = self._key_rank
            return {k: self._ordered(v[k]) for k in sorted(v, key=lambda k: rank.get(k, len(rank)))}
        return v

    def source(self, max_states: int = DEFAULT_MAX_STATES):
        """(state source, start key): terms, or a grammar for recursive schemas."""
        if self.rules is None:
            return JsonTermSource(self.tb, max_states), self.term
        src = self.rules.grammar_source(max_states)
        return src, src.start_key

    def dfa(self, max_states: int = DEFAULT_MAX_STATES) -> LazyDFA:
        """A byte-level lazy DFA (no vocabulary): `accepts(text)` for tests."""
        src, start = self.source(max_states)
        return LazyDFA(src, start, max_states)

    def accepts(self, text, dfa: LazyDFA | None = None) -> bool:
        dfa = dfa or self.dfa()
        data = text.encode("utf-8") if isinstance(text, str) else text
        s = dfa.walk(dfa.start, data)  # walk first: it may grow dfa.accepting
        return bool(dfa.accepting[s]) and (self.unique is None or self.unique.accepts(data)) \
            and (self.keys is None or self.keys.accepts(data))


def _container_parts(node: dict) -> int:
    """How many of the parts that _Compiler._value intersects for `node` may accept an
    object or an array, which may hold objects (a typed part, const, enum, anyOf; a
    $ref beside others is counted apart)."""
    ty = node.get("type")
    if ty is not None:
        typed = bool({"object", "array"} & set(ty if isinstance(ty, list) else [ty]))
    else:
        typed = not _TYPED_KW.isdisjoint(node)
    if "enum" in node and _schema_keys(node) <= _TYPED_ENUM_KEYS and _well_typed(ty):
        return int(typed)  # the enum values are filtered by type, not intersected
    const = isinstance(node.get("const"), (dict, list))
    enum = isinstance(node.get("enum"), list) and any(isinstance(v, (dict, list)) for v in node["enum"])
    return typed + const + enum + ("anyOf" in node)


def _conjuncts(node: dict) -> list:
    """node and its allOf branches that are schema objects: each holds on every value of
    node (where node requires a key, or lists a property's values, one of them says so)."""
    more = node.get("allOf") if isinstance(node.get("allOf"), list) else []
    return [node] + [x for x in more if isinstance(x, dict)]


def _meet_reasons(node: dict) -> set:
    """Why the compiler may intersect or complement values for schema `node`: its
    keywords of _MEETS, a $ref beside other keywords, two parts that may hold
    containers (presence parts do not count). _Compiler._meets decides."""
    parts = _presence_parts(node)
    rest = node if parts is None else parts[2]  # (allOf, dependencies: some may be left)
    out = {k for k in rest if k in _MEETS}
    for k in ("dependentSchemas", "dependencies"):
        if k in out and isinstance(rest[k], dict) and all(_required_only(v) is not None for v in rest[k].values()):
            out.discard(k)
    if "$ref" in node and _beside_ref(node):
        out.add("$ref beside")
    if _container_parts(rest) > 1:
        out.add("containers beside")
    return out


# keys without which a schema meets nothing (_meet_reasons: _MEETS, a $ref beside, and
# the parts _container_parts counts beyond a typed one)
_MEET_TRIGGERS = _MEETS | {"$ref", "const", "enum", "anyOf"}

# applicators whose subschemas evaluate properties or items (unevaluated* read them)
_EVALUATORS = frozenset(("allOf", "anyOf", "oneOf", "not", "if", "$ref", "dependentSchemas", "dependencies",
                         "contains"))
UNEVALUATED_MAX_CASES = 16  # ways for applicators to hold that unevaluated* are written for


class _Evaluated(NamedTuple):
    """What the parts of a schema that hold evaluate (_Compiler._ways): property names,
    patterns, every key; items: a prefix of them, every one, those a contains matches."""
    keys: tuple = ()
    patterns: tuple = ()
    every_key: bool = False
    prefix: int = 0
    every_item: bool = False
    contains: tuple = ()

    def __or__(self, f: _Evaluated) -> _Evaluated:
        return _Evaluated(tuple(dict.fromkeys(self.keys + f.keys)), tuple(dict.fromkeys(self.patterns + f.patterns)),
                          self.every_key or f.every_key, max(self.prefix, f.prefix),
                          self.every_item or f.every_item, self.contains + f.contains)


_NONE_EVALUATED = _Evaluated()


def _products(groups) -> list | None:
    """Ways (_Compiler._ways) of parts that all hold: one way of each, their schemas
    and evaluated properties together. None if a part's are unknown or they are too many."""
    out = [([], _NONE_EVALUATED)]
    for g in groups:
        if g is None:
            return None
        out = [(a + b, e | f) for a, e in out for b, f in g]
        if len(out) > UNEVALUATED_MAX_CASES:
            return None
    return out


def _alternatives(groups) -> list | None:
    """The ways of one of several parts holding."""
    out = []
    for g in groups:
        if g is None:
            return None
        out += g
    return out if len(out) <= UNEVALUATED_MAX_CASES else None


class _MixedOrders(Exception):
    """A recursive schema's rule is referred to both below a meeting schema and
    elsewhere (two key orders, one rule): schema_to_term compiles again with every
    known key slotted everywhere."""


class _TooDeep(SchemaError):
    """Subschemas nested more than MAX_NESTING deep where declared containers do not
    count against max_depth: schema_to_term compiles again with them counted (as before
    issue #51; a recursion through ever new merged copies of its schemas, Renovate's
    managers each merged with the root, otherwise goes on until this limit)."""


# the keywords _Compiler._index reads, in the order it reads them: those the node tells
# of itself ($anchor... enum, in this order among themselves) and its subschemas
# (_SUB_ONE, items, _SUB_MAP, _SUB_LIST), one order that keeps both
_INDEXED = {k: i for i, k in enumerate((
    "$anchor", "$dynamicAnchor", "$dynamicRef", "uniqueItems", "$ref", *_SUB_ONE, "items", "properties",
    "required", "dependentRequired", "patternProperties", "$defs", "definitions", "dependentSchemas",
    "dependencies", "const", "enum", *_SUB_LIST))}


def _escape_ptr(k: str) -> str:
    return str(k).replace("~", "~0").replace("/", "~1")


def load_schema(schema):
    """dict / bool / JSON text / Pydantic model class -> JSON value."""
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, (str, bytes)):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"invalid JSON text: {e}") from None
    if hasattr(schema, "model_json_schema"):
        return schema.model_json_schema(schema_generator=_pydantic_generator())
    try:  # a type pydantic can describe (list[int], a dataclass...)
        from pydantic import TypeAdapter
        adapter = TypeAdapter(schema)
    except Exception:  # noqa: BLE001
        raise SchemaError(f"not a JSON Schema: {schema!r}") from None
    return adapter.json_schema(schema_generator=_pydantic_generator())


class _Compiler(AllOfMerges):
    def __init__(self, root, tb: JsonTermBuilder, options: JsonOptions | None = None, all_meet: bool = False,
                 count_depth: bool = False):
        options = (options or JsonOptions()).for_source(root)  # (a loaded schema: Pydantic's were decided before)
        whitespace, max_whitespace, strict = options.whitespace, options.max_whitespace, options.strict
        max_recursion_depth, recursion, documents = options.max_recursion_depth, options.recursion, options.documents
        self.options = options
        self.root, self.tb, self.strict = root, tb, strict
        self.max_depth = options.max_depth
        self.max_recursion_depth = max_recursion_depth
        # declared containers count against max_depth everywhere (_counts_depth): where
        # recursion is unrolled, or once a compile went past MAX_NESTING without (_TooDeep)
        self.count_depth = count_depth or max_recursion_depth is not None
        self.assert_formats = options.assert_formats
        self.custom_formats = options.custom_formats
        self.allow_extra = options.allow_extra_properties
        self.python_dates = options.python_dates
        self.python_sets = options.python_sets
        # recursive $ref: markers in terms (_marker), then lazy terms or context-free
        # rules (fsm/json/recursive.py)
        self.recursion = recursion
        self.recursion_grammar = recursion != "refuse" and max_recursion_depth is None
        self.nonterminals: dict[int, int] = {}  # id(node) -> index
        self.rule_bodies: dict[int, Term] = {}  # index -> term (with markers)
        self.st = StringTerms(tb)
        self.ws_options = (whitespace, max_whitespace)
        if whitespace == "flexible":
            ws_byte = tb.alt([tb.literal(b" "), tb.literal(b"\t"), tb.literal(b"\n"), tb.literal(b"\r")])
            self.ws = tb.repeat(ws_byte, 0, max_whitespace)
        else:
            self.ws = tb.empty
        ws = self.ws
        self.open_obj = tb.seq([tb.literal(b"{"), ws])
        self.close_obj = tb.seq([ws, tb.literal(b"}")])
        self.open_arr = tb.seq([tb.literal(b"["), ws])
        self.close_arr = tb.seq([ws, tb.literal(b"]")])
        self.comma = tb.seq([ws, tb.literal(b","), ws])
        self.colon = tb.seq([ws, tb.literal(b":"), ws])
        self.null = tb.literal(b"null")
        self.boolean = tb.alt([tb.literal(b"true"), tb.literal(b"false")])
        self.relaxed: list[str] = []
        # resources
        self.resources: dict[str, object] = {}
        self.anchors: dict[tuple, object] = {}
        self.dynamic_anchors: dict[tuple, dict] = {}  # (base, name) -> the schema whose $dynamicAnchor it is
        self._dynamic = False  # whether _index met a $dynamicRef
        self._unevaluated = False  # whether it met an unevaluatedProperties / unevaluatedItems
        self._uniques: list[dict] = []  # the schemas with uniqueItems: true (fsm/json/unique.py)
        self.unique_reasons: dict[str, str] = {}  # JSON pointer -> why the planner does not check it
        self.base_of: dict[int, str] = {}
        self.ptr_of: dict[int, str] = {}
        self.key_order: list[str] = []
        self._key_set: set = set()
        self._refs: list[dict] = []  # the schemas with a $ref, as _index met them
        # draft-04 (and 03) differ: a schema's URI is named by `id` (where `$id` is no
        # keyword: some schemas put JSON pointers in `$id`s, which validators ignore there),
        # and an integer is a number written without a fraction (2.0 is none: nt)
        schema_uri = root.get("$schema") if isinstance(root, dict) else None
        self._draft4 = isinstance(schema_uri, str) and re.search(r"draft-0[34]\b", schema_uri) is not None
        self._id_kw = "id" if self._draft4 else "$id"
        self._index(root, "", "#")
        for uri, doc in (documents or {}).items():  # other documents that $ref reaches
            base, frag = urldefrag(uri) if isinstance(uri, str) else ("", "")
            if not base or frag or base in self.resources:
                raise SchemaError(f"documents: {uri!r} is not a document URI (without a fragment) that "
                                  "no other document has", "documents")
            self.resources[base] = doc = load_schema(doc)
            self._index(doc, base, f"{base}#")
        self._index_targets()
        # > 0 while compiling below a schema that meets (_meets): objects slot every known
        # key there; 1 from the start: everywhere (_MixedOrders)
        self._meeting = int(all_meet)
        self._rule_meets: dict[int, bool] = {}  # id(node) of a recursive schema -> its order
        self._meet_memo: dict[tuple, bool] = {}  # (id(node), negated) -> _meets
        self._checked: set[int] = set()  # id(node) of schemas whose values _check_values read
        self._gkey_index = {k: i for i, k in enumerate(self.key_order)}
        self._memo: dict = {}
        self._free: dict = {}
        self._any: dict[int, Term] = {}
        self._dep_stack: list[bool] = []
        self._within: list[dict] = []  # the schemas being compiled, outermost first
        self._active: dict[int, int] = {}
        self._ref_targets: set[int] = set()
        self.rule_bodies_done: set[int] = set()
        self._merged: dict[int, object] = {}
        self._idle_memo: dict[tuple, tuple] = {}  # (id(schema), type) -> (schema, _idle_of)
        self._narrow_memo: dict[tuple, dict | None] = {}  # (id(branch), types) -> _narrowed's schema
        self._wraps: dict[tuple, dict] = {}  # (id(branch), types) -> _typed_wrap
        self._narrowing: set[int] = set()  # ids of those schemas (not narrowed again)
        self._listed: dict[int, list | None] = {}  # id(anyOf schema) -> _listed_values
        self._scalar_checks: dict[str, Term] = {}  # JSON text of a merged scalar schema -> its term
        self._unions: dict[tuple, dict | None] = {}  # (id(node), negated) -> _union_distributed
        self._ref_branch: dict[int, dict] = {}  # id(node) -> node with its $ref as an allOf branch (_conjunction)
        self._copies: dict[int, dict | None] = {}  # id(node) -> _typed_copies(node)
        self._ref_typings: dict = {}  # _ref_typed's schemas
        self._unions_typed: dict = {}  # id(node) -> _typed_union(node)
        self._type_vars: dict[int, list | None] = {}  # id(node) -> _type_variants(node)
        self._distributing: set[tuple] = set()  # (pointer, depth) of the variants being compiled (_value)
        self._apart: dict[int, list | None] = {}  # id(node) -> _apart_by_keys(node, its oneOf)
        self._narrowed_keys: dict[tuple, list] = {}  # (id(node), indexes) -> _keys_narrowed
        self._apart_value: dict[int, tuple | None] = {}  # id(node) -> _apart_by_value(node, its oneOf)
        self._variants: dict[int, list | None] = {}  # id(node) -> _presence_variants
        self._cond_variants: dict[int, list | None] = {}  # id(node) -> _condition_variants
        self._key_matches: dict[tuple, bool] = {}  # (term id, key text) -> _matches
        self._commons: dict[tuple, tuple] = {}  # ids of lists of values -> _listed_common
        self._marker_memo = MarkerMemo()  # term id -> _marker_index
        self._unresolved: set = set()  # (node id, $ref) of references to other documents
        self._resolved: dict = {}  # (base URI, $ref) -> its target (_resolve)
        self._key_merges: dict = {}  # ids of a key's property and pattern schemas -> _key_schemas
        self._keep: list = []  # merged schemas stay alive (memo keys are ids)
        self._uneval: dict = {}  # id(node) -> _unevaluated_written(node)
        self._negated = 0
        self._nts: dict[bool, NumberTerms] = {}  # integral_fraction -> its NumberTerms (nt)
        # objects that take keys no slot writes (kept distinct while decoding:
        # fsm/json/keys.py), and whether some of those keys are bounded
        self.free_keys = self.walk_keys = False
        self._key_languages: dict = {}  # (key terms' ids, bare ones', minProperties) -> _free_keys' verdict
        # the schema to compile: root, or where it has $dynamicRefs, its copy with them
        # resolved (fsm/json/dynamic.py)
        self.entry = root
        if self._dynamic:
            self.entry = DynamicRefs(self).entry(root)

    @functools.cached_property
    def _gkeys(self) -> list[tuple]:
        """(key, its literal) for every key of the key order (objects below a schema
        that meets slot them all), made when the first such object is."""
        return [(k, self.tb.literal(string_text(k))) for k in self._gkey_index]

    def plain_number(self, integer: bool) -> Term:
        """The integers, or the numbers, without bounds: a program made once per process,
        loaded when the output first reaches one (NumberTerms' ~30 terms were a large part
        of a small schema's compile)."""
        name = f"json:integer:{self.nt_fraction}" if integer else "json:number"  # (numbers keep fractions)
        prog = _NUMBERS.get(name)
        if prog is None:
            prog = _NUMBERS[name] = self.tb.export(self.nt.integer if integer else self.nt.number)
        return self.tb.lazy(name, prog)

    @property
    def nt_fraction(self) -> bool:
        """NumberTerms' integral_fraction: integers may be written 1.0. Only inside
        complement operands (`not`, `if`, overlapping `oneOf` branches...: `_negated`),
        so that a complement takes no text of an integer; elsewhere an integer has one
        text, `2`, never `2.0`, `2.000...` (a subset of the valid texts, which keeps
        intersections exact: the fraction-free text of every integral value is in every
        number term). Never for Pydantic sources (python_dates) and draft-04."""
        return self._negated > 0 and not (self.python_dates or self._draft4)

    @property
    def nt(self) -> NumberTerms:
        """Number terms (nt_fraction's kind), made for the first number (a schema without
        one skips ~30 terms)."""
        frac = self.nt_fraction
        nt = self._nts.get(frac)
        if nt is None:
            nt = self._nts[frac] = NumberTerms(self.tb, integral_fraction=frac)
        return nt

    # -- indexing: $id / $anchor / key order ---------------------------------------
    def _add_key(self, k) -> None:
        if isinstance(k, str) and k not in self._key_set:
            self._key_set.add(k)
            self.key_order.append(k)

    def _value_keys(self, v) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                self._add_key(k)
                self._value_keys(x)
        elif isinstance(v, list):
            for x in v:
                self._value_keys(x)

    def _index(self, node, base: str, ptr: str) -> None:
        """Index node: $id, anchors, pointers, key order."""
        if not isinstance(node, dict):
            return
        sid = node.get(self._id_kw)  # (2020-12: an $id beside $ref still sets the base)
        if isinstance(sid, str):
            if sid.startswith("#"):
                self.anchors[(base, sid[1:])] = node
            else:
                base = urldefrag(join_uri(base, sid))[0]
                self.resources[base] = node
        if not self.resources.get(base) and ptr == "#":
            self.resources[base] = node
        # the keywords read here that node has, in _INDEXED's order (a schema has a few:
        # asking for each of ~35 was most of a small schema's indexing); first what the
        # node itself tells, then its subschemas, so the key order has this node's keys
        # before those below it
        kws = sorted(_INDEXED.keys() & node.keys(), key=_INDEXED.__getitem__)
        for k in kws:
            v = node[k]
            if k == "$anchor" or k == "$dynamicAnchor":
                if isinstance(v, str):
                    self.anchors.setdefault((base, v), node)
                    if k == "$dynamicAnchor":
                        self.dynamic_anchors.setdefault((base, v), node)
            elif k == "$dynamicRef":
                self._dynamic = True
            elif k == "unevaluatedProperties" or k == "unevaluatedItems":
                self._unevaluated = True
            elif k == "uniqueItems":
                if v is True:
                    self._uniques.append(node)
            elif k == "$ref":
                if isinstance(v, str):
                    self._refs.append(node)
            elif k == "properties":
                if isinstance(v, dict):
                    for name in v:
                        self._add_key(name)
            elif k == "required":
                if isinstance(v, list):
                    for name in v:
                        self._add_key(name)
            elif k in ("dependentRequired", "dependentSchemas", "dependencies"):
                if isinstance(v, dict):
                    for name, d in v.items():
                        self._add_key(name)
                        if isinstance(d, list):
                            for n in d:
                                self._add_key(n)
            elif k == "const" or k == "enum" and isinstance(v, list):
                self._value_keys(v)
        self.base_of[id(node)] = base
        self.ptr_of.setdefault(id(node), ptr)
        for k in kws:
            v = node[k]
            if k in _SUB_ONE:
                self._index(v, base, f"{ptr}/{k}")
            elif k == "items":
                if isinstance(v, list):
                    for i, s in enumerate(v):
                        self._index(s, base, f"{ptr}/items/{i}")
                else:
                    self._index(v, base, f"{ptr}/items")
            elif k in _SUB_MAP:
                if isinstance(v, dict):
                    for name, s in v.items():
                        self._index(s, base, f"{ptr}/{k}/{_escape_ptr(name)}")
            elif k in _SUB_LIST and isinstance(v, list):
                for i, s in enumerate(v):
                    self._index(s, base, f"{ptr}/{k}/{i}")

    def _index_targets(self) -> None:
        """Index the schemas that $refs point to through places _index does not walk
        (`#/definitions/notificationObject/slack`: under a key that is no
        keyword), and those their own $refs reach, before the key order is read: an
        object's keys have their places there (compiling reads them). References that
        point nowhere are left to _resolve, which names them where the output meets them."""
        k = 0
        while k < len(self._refs):
            node = self._refs[k]
            k += 1
            res, uri, frag = self._ref_document(node, node["$ref"])
            if res is not None and frag.startswith("/"):
                cur = _pointer(res, frag)
                if isinstance(cur, dict) and id(cur) not in self.base_of:
                    self._index(cur, self.base_of.get(id(res), uri), "#" + frag)

    def _ref_document(self, node: dict, ref: str) -> tuple:
        """(the document or resource that `ref` at `node` points into, or None; its URI;
        the fragment)."""
        base = self.base_of.get(id(node), "")
        if ref.startswith("#"):  # (bases are URIs without a fragment, as urldefrag leaves them)
            uri, frag = base, ref[1:]
        else:
            uri, frag = urldefrag(join_uri(base, ref))
        res = self.resources.get(uri)
        if res is None and uri == "" and base == "":
            res = self.root
        return res, uri, frag

    def _resolve(self, node: dict, ref: str):
        key = (self.base_of.get(id(node), ""), ref)  # (once per base: merges resolve the same refs often)
        out = self._resolved.get(key)
        if out is None:
            out = self._resolved[key] = self._find(node, ref)
            if out is True:
                del self._resolved[key]
        return out

    def _find(self, node: dict, ref: str):
        res, uri, frag = self._ref_document(node, ref)
        if res is None:  # (another document: lenient mode takes it as any value, once per place)
            if (id(node), ref) not in self._unresolved:
                self._unresolved.add((id(node), ref))
                self.refuse(node, "$ref", f"cannot resolve reference {ref!r} (another document: pass it "
                            f"as documents={{{uri!r}: schema}})")
            return True
        if not frag:
            self._ref_targets.add(id(res))
            return res
        if frag.startswith("/"):
            cur = _pointer(res, frag)
            if cur is _NOWHERE:
                raise SchemaError(f"reference {ref!r} points nowhere", "$ref", self.ptr(node))
            if isinstance(cur, dict) and id(cur) not in self.base_of:
                self._index(cur, self.base_of.get(id(res), uri), "#" + frag)
            self._ref_targets.add(id(cur))
            return cur
        hit = self.anchors.get((uri, frag))
        if hit is None:
            raise SchemaError(f"unknown anchor in reference {ref!r}", "$ref", self.ptr(node))
        self._ref_targets.add(id(hit))
        return hit

    def _peek(self, node: dict):
        """What node's $ref points to, as _find reads it, but without a word where that is
        nowhere (None: the error or the lenient note is the compilation's to make) and
        without indexing it (fsm/json/union.py's reachability)."""
        ref = node["$ref"]
        res, uri, frag = self._ref_document(node, ref) if isinstance(ref, str) else (None, "", "")
        if res is None or not frag:
            return res
        return _pointer(res, frag) if frag.startswith("/") else self.anchors.get((uri, frag))

    def ptr(self, node) -> str:
        return self.ptr_of.get(id(node), "#")

    # -- errors ---------------------------------------------------------------------
    def refuse(self, node, keyword: str, message: str, instead: str = "dropped (output may violate it)") -> None:
        """Strict: raise. Lenient: note it (schema_to_term warns); the caller drops the
        keyword (or does `instead`)."""
        if self.strict:
            raise SchemaError(message + " (strict=False drops it with a warning)", keyword, self.ptr(node))
        head = f"{keyword!r} at {self.ptr(node)}: "
        if not any(t.startswith(head) and t.endswith(instead) for t in self.relaxed):  # (one note per relaxation)
            self.relaxed.append(f"{head}{message}; {instead}")  # (warned once the schema compiled: schema_to_term)

    # -- universe --------------------------------------------------------------------
    def any(self, d: int) -> Term:
        """Any value at most d containers deep.

        Canonical (inside complements: `self._negated`): only canonical texts (known keys
        in key order, each once), so that complements are exact. Elsewhere a cheap
        universe: any keys in any order. Its extra texts are other key orders of values
        that are valid there anyway (free positions), and intersecting with a canonical
        term drops them; only complements need the canonical one, and complement operands
        and their universes are always built in canonical mode."""
        self._uses_depth()
        self.free_keys |= d >= 1  # (its objects take any keys: fsm/json/keys.py)
        canon = self._negated > 0
        t = self._any.get((d, canon))
        prog_key = (d, self.ws_options)
        if t is None and not canon and prog_key in _UNIVERSES:  # loaded when the output reaches it
            t = self._any[(d, canon)] = self.tb.lazy(f"universe:{prog_key!r}", _UNIVERSES[prog_key])
        if t is None:
            tb = self.tb
            parts = [self.null, self.boolean, self.plain_number(False), self.st.any_string]
            if d >= 1:
                inner = self.any(d - 1)
                if not canon:  # a level's program names the next one: ~120 entries, not ~500
                    below = (d - 1, self.ws_options)
                    inner = tb.lazy(f"universe:{below!r}", _UNIVERSES[below])
                parts.append(self._array_list([], inner, 0, None))
                if canon:
                    parts.append(self._object(_OPEN, d))  # the universe: always open
                else:
                    pair = tb.seq([self.st.any_string, self.colon, inner])
                    body = tb.optional(tb.concat(pair, tb.star(tb.concat(self.comma, pair))))
                    parts.append(tb.seq([self.open_obj, body, self.close_obj]))
            t = self._any[(d, canon)] = tb.alt(parts)
            if not canon:  # the cheap universe depends on nothing but d and whitespace
                _UNIVERSES[prog_key] = tb.export(t)
        return self.tb.json_value(t)

    def _counts_depth(self) -> bool:
        """Whether declared containers count against the depth `d` here: inside a
        complement's operands (`not`, `if`, `contains`: they and the universe they are
        taken from share one bound, so the complement is exact) and when recursion is
        unrolled (max_recursion_depth), or everywhere once nesting went past MAX_NESTING
        (_TooDeep). Elsewhere only free values do (any(d)): a
        subschema's term is then the same wherever it is reached, built once however
        many places refer to it (docs/json-schema.md, "Nesting")."""
        return self._negated > 0 or self.count_depth

    def _below(self, d: int) -> int:
        """The depth left to the values inside a container at depth d."""
        return d - 1 if self._counts_depth() else d

    def _uses_depth(self) -> None:
        if self._dep_stack:
            self._dep_stack[-1] = True

    # -- values ----------------------------------------------------------------------
    def value(self, node, d: int, budget: int | None = None) -> Term:
        tb = self.tb
        if node is True:
            return self.any(d)
        if node is False:
            return tb.nothing
        if not isinstance(node, dict):
            where = self.ptr(self._within[-1]) if self._within else "#"
            raise SchemaError(f"a schema must be an object or a boolean, not {node!r:.80} "
                              f"(a subschema of {where})", None, where)
        if budget is None:
            budget = self.max_recursion_depth or 0
        key = id(node)
        entering = not self._meeting and self._meets(node)
        # closed objects (allow_extra_properties=False) are opened under negation;
        # canonical mode (complement operands), and every known key slotted (meets)
        variant = (self._negated > 0, entering or self._meeting > 0)
        fkey = (key, variant)
        t = self._free.get(fkey)
        if t is not None:
            return t
        mkey = (key, d, budget, variant)
        t = self._memo.get(mkey)
        if t is not None:
            self._uses_depth()
            return t
        if key in self.nonterminals and key in self.rule_bodies_done:
            return self._marker(key, variant[1])
        if key in self._active:
            if self.recursion_grammar:  # the first schema a cycle comes back to is its rule
                return self._marker(key, variant[1])
            if self.max_recursion_depth is None:
                raise SchemaError("recursive schema: pass max_recursion_depth=N to unroll it N levels "
                                  "(recursion is refused otherwise)", "$ref", self.ptr(node))
            self._uses_depth()
            if key in self._ref_targets:  # one level of recursion: count it once per cycle
                if budget <= 0:
                    return tb.nothing
                budget -= 1
                mkey = (key, d, budget, variant)
                t = self._memo.get(mkey)
                if t is not None:
                    return t
        if len(self._within) >= MAX_NESTING:
            raise (SchemaError if self.count_depth else _TooDeep)(
                f"the schema nests more than {MAX_NESTING} subschemas deep here (containers, $refs and applicators "
                "each count one)", None, self.ptr(node))
        self._active[key] = self._active.get(key, 0) + 1
        self._dep_stack.append(False)
        self._within.append(node)
        self._meeting += entering
        try:
            t = tb.json_value(self._value(node, d, budget))
        except TimeBudgetError as e:  # (the innermost subschema: where it was)
            e.note_where(self.ptr(node))
            raise
        finally:
            self._meeting -= entering
            self._within.pop()
            used = self._dep_stack.pop()
            self._active[key] -= 1
            if not self._active[key]:
                del self._active[key]
        if key in self.nonterminals:  # it referred to itself: t is the body of its rule
            self.rule_bodies[self.nonterminals[key]] = t
            self.rule_bodies_done.add(key)
            return self._marker(key, variant[1])
        if used:
            self._memo[mkey] = t
            self._uses_depth()
        else:
            self._free[fkey] = t
        return t

    def _meets(self, node) -> bool:
        """Whether the values of schema `node` meet (are intersected or complemented),
        so that every object below it slots every known key (docs/json-schema.md). Not for a
        oneOf alone whose branches are disjoint (disjoint.disjoint: a union), nor for
        patternProperties whose intersections take at most one part that holds
        objects (`"^x-": {}`: the cheap universe accepts every key order), nor for a
        $ref beside a `type` its target has (_typed_ref), nor for an allOf (or a $ref
        beside other keywords) that merges into a schema that does not meet
        (_conjunction; merging reads the negation depth: decided apart there)."""
        if not isinstance(node, dict):
            return False
        mk = (id(node), self._negated > 0)
        r = self._meet_memo.get(mk)
        if r is None:
            self._check(node)  # (before its type, allOf... are read)
            if node.keys().isdisjoint(_MEET_TRIGGERS):  # (most schemas: nothing to decide)
                self._meet_memo[mk] = False
                return False
            self._meet_memo[mk] = True  # (a merge that leads back here: taken as meeting, the safe side)
            why = _meet_reasons(node)
            if "oneOf" in why and not _container_parts(node) \
                    and not {"$ref", "allOf", "not", "if"} & node.keys() \
                    and (len(node["oneOf"]) <= 1 or disjoint(self, node, node["oneOf"])
                         or scalar_overlaps(self, node, node["oneOf"])):
                why.discard("oneOf")
            if "patternProperties" in why and self._patterns_apart(node):
                why.discard("patternProperties")
            if "$ref beside" in why and self._typed_ref(node):
                why.discard("$ref beside")
            if {"allOf", "$ref beside"} & why and not self._negated and (m := self._conjunction(node)) is not None \
                    and not self._meets(m):
                why -= {"allOf", "$ref beside"}  # (compiled as the merged schema: _value)
            if why and why <= {"oneOf", "containers beside"} and not self._negated \
                    and (m := self._union_distributed(node)) is not None and not self._meets(m):
                why = set()  # (compiled as a union of merged schemas: _value)
            r = self._meet_memo[mk] = bool(why)
        return r

    def _check(self, node: dict) -> None:
        """_check_values, once per schema."""
        if id(node) not in self._checked:
            _check_values(node, self.ptr)
            self._checked.add(id(node))
            self._keep.append(node)

    def _typed_ref(self, node: dict) -> bool:
        """Whether node is a $ref with only a `type` beside it that its target has
        already (and keywords of other types, which assert nothing then:
        `{"type": "object", "$ref": "#", "items": ...}`): compiled as the target (_value),
        it meets nothing."""
        beside = _beside_ref(node) if "$ref" in node else set()
        if "type" not in beside or not _well_typed(node["type"]):
            return False
        own = types_of(self, {"type": node["type"]})
        if not beside - {"type"} <= _idle_keywords(own):
            return False
        types = types_of(self, self._resolve(node, node["$ref"]))
        return types is not None and types <= own

    def _order_free(self, s) -> bool:
        """Whether schema s accepts no object that slots keys: any value (the cheap
        universe takes every key order) or scalars only."""
        if s is True or (isinstance(s, dict) and _schema_keys(s) <= _ANNOTATIONS):
            return True  # (vendor keys assert nothing)
        types = types_of(self, s)
        return types is not None and not types & {"object", "array"}

    def _patterns_apart(self, node) -> bool:
        """Whether node's patternProperties make no intersection of two value schemas
        that are not order-free (_order_free): for a declared property, its schema and
        those of the patterns it matches; for another key, the patterns' where two of them
        match one key (_keys_disjoint: no key matches two)."""
        pats, props = node["patternProperties"], node.get("properties", {})  # (objects: _check)
        held = [p for p, v in pats.items() if not self._order_free(v)]
        if len(held) > 1 and not self._keys_disjoint(held):
            return False
        return all(sum(not self._order_free(x) for x in [v] + self._pattern_hits(pats, k)) <= 1
                   for k, v in props.items())

    def _pattern_hits(self, pats: dict, key: str) -> list:
        """The schemas of the patterns that `key` matches (ECMA search, as the compiler
        reads them; a pattern it cannot read counts as a match)."""
        out = []
        for p, v in pats.items():
            try:
                hit = self._matches(self.st.search(p), encode_string(key))
            except RegexError:
                hit = True
            if hit:
                out.append(v)
        return out

    def _keys_disjoint(self, patterns: list) -> bool:
        """Whether no key matches two of `patterns` (appsettings' eight `^(nlog|NLog)$`
        names: their value schemas never meet, so objects need not slot every known key)."""
        tb, src = self.tb, JsonTermSource(self.tb, DEFAULT_MAX_STATES)
        try:
            terms = [self.st.search(p) for p in patterns]
        except RegexError:  # (refused where the object is compiled)
            return False
        try:
            return all(src.is_empty(tb.intersect([a, b])) for a, b in combinations(terms, 2))
        except TooLargeError:
            return False

    def _key_schema(self, node, key: str):
        """The schema under which an object of `node` holds `key` where nothing meets
        there (CompiledSchema._arrange): of its property's and the patterns' it matches,
        the one that is not order-free (at most one is: _patterns_apart), else the first;
        else additionalProperties."""
        props = node.get("properties", {})
        parts = ([props[key]] if key in props else []) + self._pattern_hits(node.get("patternProperties", {}), key)
        return next((v for v in parts if not self._order_free(v)), parts[0] if parts else
                    node.get("additionalProperties", True))

    def _marker(self, key: int, meets: bool) -> Term:
        """A placeholder for the recursive schema `key`: byte 0xFF (never in UTF-8 JSON
        text) and two bytes of its index; turned into a nonterminal by _RecursiveRules.
        Its rule has one key order (`meets`: every known key slotted): a reference in
        the other order raises _MixedOrders."""
        if self._rule_meets.setdefault(key, meets) != meets:
            raise _MixedOrders
        k = self.nonterminals.setdefault(key, len(self.nonterminals))
        self._uses_depth()
        head = self.tb.byte_range(0xFF, 0xFF)
        if not self._marker_memo.floor:
            self._marker_memo.floor = head.id
        return self.tb.seq([head] + [self.tb.byte_range(b, b) for b in (k >> 8, k & 0xFF)])  # BYTES chain:
        # _marker_index reads it

    def _value(self, node: dict, d: int, budget: int) -> Term:
        tb = self.tb
        self._check(node)
        if (node.get("unevaluatedProperties", True) is not True or node.get("unevaluatedItems", True) is not True) \
                and not node.keys().isdisjoint(_EVALUATORS):
            written = self._unevaluated_written(node)
            if written is not None:
                return self.value(written, d, budget)
        if "$ref" in node and not _beside_ref(node):
            return self.value(self._resolve(node, node["$ref"]), d, budget)  # (the target alone: the
            # rest of this method finds nothing else in it)
        if "allOf" in node or "$ref" in node:
            merged = self._conjunction(node)
            if merged is not None:
                return self.value(merged, d, budget)
        variants = self._presence_variants(node)
        if variants is None:
            variants = self._condition_variants(node)
        if variants is not None:
            return tb.alt([self.value(v, d, budget) for v in variants])
        union = self._union_distributed(node)
        if union is not None:
            return self.value(union, d, budget)
        typed = self._typed_union(node)
        if typed is not None:
            return self.value(typed, d, budget)
        if self._typed_ref(node):
            # `type` beside a $ref whose target has those types already
            # ({"type": "object", "$ref": "#"}): the target alone, not an intersection
            return self.value(self._resolve(node, node["$ref"]), d, budget)
        for k, what in _UNSUPPORTED.items():
            if k in node:
                self.refuse(node, k, f"{what} are not supported")
        if "enum" in node and isinstance(node["enum"], list) and _schema_keys(node) <= _TYPED_ENUM_KEYS \
                and _well_typed(ty := node.get("type")) \
                and not (self._draft4 and (ty == "integer" or isinstance(ty, list) and "integer" in ty)):
            # only `type` beside the values: keep the values of those types (every term
            # accepts the same texts of a value, so this equals the intersection, without
            # an emptiness search of it at compile time; not draft-04's integer, which
            # takes no `2.0`, where a listed 2 does)
            return self._enum([v for v in node["enum"] if _has_type(v, node.get("type"))], d)
        parts: list[Term] = []
        typed = self._typed(node, d, budget)
        if typed is not None:
            parts.append(typed)
        if "const" in node:
            parts.append(self.const(node["const"], d))
        if "enum" in node:
            if not isinstance(node["enum"], list):
                raise SchemaError("enum must be an array", "enum", self.ptr(node))
            parts.append(self._enum(node["enum"], d))
        if "$ref" in node:
            target = self._resolve(node, node["$ref"])
            parts.append(self.value(target, d, budget))
        if "allOf" in node:
            subs = self._narrowed(node, node["allOf"])
            if subs is None:
                return tb.nothing
            parts.extend(self.value(s, d, budget) for s in subs)
        if "anyOf" in node:
            parts.append(tb.alt([self.value(s, d, budget) for s in node["anyOf"]]))
        if "oneOf" in node:
            parts.append(self._one_of(node, d, budget))
        if "not" in node:
            self._negated += 1
            try:
                inner = self.value(node["not"], d, budget)
                parts.append(self._meet(node, "not", tb.intersect([self.any(d), tb.complement(inner)]),
                                        lambda: self.any(d)))
            finally:
                self._negated -= 1
        if "if" in node and ("then" in node or "else" in node):
            self._negated += 1
            try:
                cond = self.value(node["if"], d, budget)
                els = tb.intersect([self.value(node.get("else", True), d, budget), tb.complement(cond)])
            finally:
                self._negated -= 1
            then = self.value(node.get("then", True), d, budget)
            parts.append(self._meet(node, "if", tb.alt([tb.intersect([cond, then]), els]), lambda: tb.alt(
                [then, self.value(node.get("else", True), d, budget)])))
        if not parts:
            return self.any(d)
        if len(parts) == 1:
            return parts[0]
        if self.nonterminals and any(_marker_index(p, self._marker_memo) is not None for p in parts):
            # (neither lazy terms nor the grammar path intersect them.) Not again for the same place at
            # the same depth: a branch that leads back to node without entering a value
            # (`anyOf: [..., {$ref: itself}]`) would make a new merged copy per round
            place = (self.ptr(node), d)
            variants = None if place in self._distributing else self._type_variants(node)
            if variants is not None:
                self._distributing.add(place)
                try:
                    return tb.alt([self.value(v, d, budget) for v in variants])
                finally:
                    self._distributing.discard(place)
        # lenient, where a part holds a recursive reference: that part alone (the first)
        return self._meet(node, "/".join(k for k in _PARTS_KW if k in node) or "allOf", tb.intersect(parts),
                          lambda: next(p for p in parts if _marker_index(p, self._marker_memo) is not None))

    def _meet(self, node: dict, keyword: str, t: Term, relaxed, instead: str | None = None) -> Term:
        """t, an intersection or complement made for `keyword` of node (or a union of
        them: oneOf). One that holds a recursive reference, which neither lazy terms nor
        the grammar path intersect (fsm/json/recursive.py), is refused naming the keyword, the node and
        the recursive schema; lenient mode warns and takes `relaxed()`, a superset
        (oneOf as anyOf, the node without `not`...), or what `instead` says it is."""
        if not self.nonterminals:
            return t
        for b in t.args if t.kind == ALT else (t,):
            while b.kind == CONCAT:  # (after a head its parts share: JsonTermBuilder._shared_head)
                b = b.args[1]
            k = _marker_index(b, self._marker_memo) if b.kind in (AND, NOT) else None
            if k is not None:
                target = next(i for i, j in self.nonterminals.items() if j == k)
                self.refuse(node, keyword, f"recursive schema: {keyword} intersects the recursive reference to "
                            f"{self.ptr_of.get(target, '?')} (a recursive reference under an intersection "
                            "or complement is not supported)", *([instead] if instead else []))
                return relaxed()
        return t

    def _type_variants(self, node: dict) -> list | None:
        """node = {oneOf|anyOf: branches, type-specific keywords} as one schema per
        branch, each with the keywords of the types it may have (`{type: object}` takes
        patternProperties, a string branch none: they assert nothing of strings), and
        node's `type` (every branch takes it: a root object). The union of these is node
        where a oneOf's branches are disjoint (their types known: disjoint.types_of, and
        apart, or disjoint.disjoint): `oneOf: [{type: object}, ${{...}}]` beside object
        keywords whose values are recursive needs no intersection so, nor a oneOf of three
        ways to name an executor beside recursive steps. None where node is not of that form."""
        if id(node) in self._type_vars:  # (once per node: the variants' ids key the memos below them)
            return self._type_vars[id(node)]
        self._type_vars[id(node)] = out = None
        kws = [k for k in ("oneOf", "anyOf") if isinstance(node.get(k), list) and node[k]]
        rest = {k: v for k, v in node.items() if k not in _ANNOTATIONS and k not in kws}
        if len(kws) != 1 or not rest \
                or not set(rest) - {"type"} <= _TYPED_KW - {"unevaluatedProperties", "unevaluatedItems"}:
            return None
        branches = node[kws[0]]
        types = [types_of(self, b) for b in branches]  # (None: not known, the branch takes all of rest)
        apart = None not in types and pairwise_apart(types)
        if kws[0] == "oneOf" and not apart and not disjoint(self, node, branches):
            if self.strict:
                return None
            # lenient: the branches narrowed apart where they can be, else as an anyOf,
            # each with the node's keywords of its types (which the node's
            # intersection, taken instead, would drop)
            apart = self._lenient_apart(node, branches)
            self.refuse(node, "oneOf", "recursive schema: oneOf branches that overlap beside keywords "
                        "that hold a recursive reference", apart[1] if apart else
                        "taken as anyOf (an output may match more than one branch)")
            if apart:
                branches = apart[0]
                types = [types_of(self, b) for b in branches]
        out = []
        for b, ts in zip(branches, types):
            own = {k: v for k, v in rest.items()
                   if ts is None or k == "type" or any(k in _FAMILIES.get(t, ()) for t in ts)}
            v = {"allOf": [b, own]} if own else {"allOf": [b]}
            self._adopt(v, node)
            if own:
                self._adopt(own, node)
            out.append(v)
        self._type_vars[id(node)] = out
        self._keep.append(out)
        return out

    def _presence_variants(self, node: dict) -> list | None:
        """node as schemas without its presence parts (_presence_parts), one per set of
        the keys they name that satisfies them: those keys required, the others'
        properties false. Without `type`, the variants are objects, and the node's other
        values make one more variant where the parts hold on them (every `required`
        does: `oneOf: [{required: [files]}, {required: [folder]}]` does not).
        None where node has no presence parts."""
        if id(node) in self._variants:
            return self._variants[id(node)]
        got = _presence_parts(node)
        out = None
        if got is not None:
            _, f, rest = got
            keys = sorted(_named(f))
            out = []
            for have in _presence_sets(f, tuple(keys)):
                v = dict(rest)
                v["required"] = sorted(set(rest.get("required", ())) | have)
                v["properties"] = {**rest.get("properties", {}), **{k: False for k in keys if k not in have}}
                v["type"] = "object"
                out.append(v)
            if "type" not in node and _holds(f, frozenset(keys)):
                out.append({**rest, "type": [t for t in _TYPES if t != "object"]})
            for v in out:
                self._adopt(v, node)
        self._variants[id(node)] = out
        self._keep.append(out)
        return out

    def _unevaluated_written(self, node: dict) -> dict | None:
        """node, whose unevaluatedProperties U or unevaluatedItems I sits beside
        applicators, written without them: node's other keywords, and for each way its
        applicators may hold (_ways), the schemas that then hold and a schema whose keys
        that none of them evaluates take U, and whose items none evaluates I (where a
        contains evaluates, an item not matched by it). None, after `refuse`, where the
        ways are unknown or too many."""
        if id(node) in self._uneval:
            return self._uneval[id(node)]
        out, cases = None, self._ways(node, top=True)
        u, i = node.get("unevaluatedProperties", True), node.get("unevaluatedItems", True)
        if cases is not None:
            def rest(e: _Evaluated):
                r = {}
                if u is not True and not e.every_key:
                    r.update(properties=dict.fromkeys(e.keys, True), patternProperties=dict.fromkeys(e.patterns, True),
                             additionalProperties=u)
                if i is not True and not e.every_item:
                    r.update(prefixItems=[True] * e.prefix,
                             items={"anyOf": list(e.contains) + [i]} if e.contains else i)
                return r or True
            base = {k: v for k, v in node.items() if k not in ("unevaluatedProperties", "unevaluatedItems")}
            ways = [{"allOf": schemas + [rest(e)]} for schemas, e in cases]
            out = {"allOf": [base] + (ways[0]["allOf"] if len(ways) == 1 else [{"anyOf": ways}])}
            for x in [out, base] + ways + [x for w in ways for x in w["allOf"] if isinstance(x, dict)
                                           and id(x) not in self.base_of]:
                self._adopt(x, node)
        else:
            kw = "unevaluatedProperties" if u is not True else "unevaluatedItems"
            self.refuse(node, kw, f"not supported here: its applicators may hold in more than "
                        f"{UNEVALUATED_MAX_CASES} ways, through a branch that has branches of its own "
                        "(anyOf/oneOf/if/dependentSchemas), or through a cycle of allOf/$ref")
        self._uneval[id(node)] = out
        self._keep.append(out)
        return out

    def _ways(self, s, top: bool = False, seen: tuple = ()) -> list | None:
        """The ways schema s may hold, for the properties and items its parts evaluate:
        pairs (schemas that hold then, beside s; what s and they evaluate: _Evaluated).
        A subschema evaluates where it holds:
        allOf's and $ref's always, one oneOf branch, if's and then's or else's, a
        dependent schema's where its key is present. For anyOf, "some nonempty set S of
        the branches holds, with the keys they evaluate" (a key left by all the
        branches that hold is left by every S among them: one S is enough, and no
        negation is needed; contains likewise). `top`: s's own unevaluated* are the
        ones being written (else they evaluate every key, every item). None where a
        cycle of allOf/$ref makes them unknown, or they exceed UNEVALUATED_MAX_CASES."""
        if not isinstance(s, dict):
            return [([], _NONE_EVALUATED)]
        if id(s) in seen:
            return None
        seen += (id(s),)
        items = s.get("items")
        cases = [([], _Evaluated(
            tuple(s.get("properties", {})), tuple(s.get("patternProperties", {})),
            "additionalProperties" in s or ("unevaluatedProperties" in s and not top),
            len(items) if isinstance(items, list) else len(s.get("prefixItems", [])),
            ("additionalItems" in s if isinstance(items, list) else items is not None)
            or ("unevaluatedItems" in s and not top), (s["contains"],) if "contains" in s else ()))]

        def ways_of(x, schemas=(), one=False):  # x's ways, with `schemas` holding beside them
            got = self._ways(x, seen=seen)
            if got is None or (one and len(got) > 1):  # (branches in branches: oneOf in a oneOf
                return None  # complements terms the ways intersect: searches of 200k states)
            return [(list(schemas) + a, e) for a, e in got]
        groups = [ways_of(x) for x in s.get("allOf", []) if isinstance(s.get("allOf"), list)]
        if "$ref" in s:
            groups.append(ways_of(self._resolve(s, s["$ref"])))
        any_of, one_of = s.get("anyOf"), s.get("oneOf")
        if isinstance(any_of, list) and any_of:
            if (1 << len(any_of)) - 1 > UNEVALUATED_MAX_CASES:  # (its nonempty subsets)
                return None
            branch = [ways_of(x, [x], True) for x in any_of]  # (each in half the subsets: once)
            groups.append(_alternatives(_products(c) for n in range(1, len(branch) + 1)
                                        for c in combinations(branch, n)))
        if isinstance(one_of, list) and one_of:
            groups.append(_alternatives(ways_of(x, [x], True) for x in one_of))
        if "if" in s:
            cond = s["if"]
            then = _products([ways_of(cond, [cond], True), ways_of(s.get("then", True), (), True)])
            groups.append(_alternatives([then, ways_of(s.get("else", True), [{"not": cond}], True)]))
        for kw in ("dependentSchemas", "dependencies"):
            for key, sub in (s.get(kw) or {}).items():
                if isinstance(sub, (dict, bool)):
                    groups.append(_alternatives([ways_of(sub, [{"type": "object", "required": [key]}], True),
                                                 [([{"properties": {key: False}}], _NONE_EVALUATED)]]))
        return _products([cases] + groups)

    def _condition_variants(self, node: dict) -> list | None:
        """node as schemas without its value conditions (_value_conditions), one per
        outcome of their tests: the test and `then`, or the test's negation (the key
        present, unless the `if` requires it, and its value not the test's) and `else`.
        The outcomes exclude each other, so their union is node. None where node has
        no value conditions."""
        if id(node) in self._cond_variants:
            return self._cond_variants[id(node)]
        got = _value_conditions(node)
        out = None
        split = None if got is None else self._objects_apart(node, *got)
        if split is not None:
            self._cond_variants[id(node)] = split
            return split
        found = None if got is None else self._outcomes(*got)
        if found is not None:
            (conds, rest), (outcomes, apart) = got, found
            out, negated = [], {}
            for holding in outcomes:
                extra = []
                # a failing test whose values are apart from a holding one's (same key) fails
                # wherever the key is there (or, where its `if` requires the key, anyway): not
                # negated (a hundred `if`s on a form item's `type`: a schema each, not a hundred
                # negations each)
                implied = set().union(*(apart.get(i, ()) for i in holding)) - holding
                present = {conds[i][0] for i in implied if not conds[i][2]}
                for i, (key, test, required, then, els) in enumerate(conds):
                    if i in holding:
                        extra += [{"properties": {key: test}, "required": [key] if required else []}, then]
                    elif i in implied:
                        if key in present:
                            present.discard(key)
                            extra.append({"type": "object", "required": [key]})
                        extra.append(els)
                    else:  # the `if` fails: only on an object, whose key has another value (or is absent)
                        if i not in negated:  # (one schema per test, shared by the outcomes it fails in)
                            negated[i] = {"type": "object", "properties": {key: self._negated_test(rest, key, test)},
                                          "required": [] if required else [key]}
                        extra += [negated[i], els]
                if False in extra:
                    continue
                v = dict(rest)
                v["allOf"] = list(rest.get("allOf", [])) + [x for x in extra if x is not True]
                self._adopt(v, node)
                for x in v["allOf"]:
                    if id(x) not in self.base_of:  # the tests' wrappers
                        self._adopt(x, node)
                out.append(v)
        self._cond_variants[id(node)] = out
        self._keep.append(out)
        return out

    def _objects_apart(self, node: dict, conds: list, rest: dict) -> list | None:
        """node, whose value conditions `conds` sit beside `rest` that holds objects and
        other values, as [node on objects, rest on the others with every `then`]: an
        `if` that tests a property holds on a value that is no object, and on objects
        the tests of one key group (_outcomes), where 2^n outcomes of n tests would not
        (a score of `if`s on an optional, untyped `function`). None
        where rest holds objects only, or no objects."""
        types = types_of(self, rest)
        types = set(_TYPES) if types is None else types  # (unknown: any; none: no value, nothing to split)
        if "object" not in types or types == {"object"}:
            return None
        objects = {**node, "type": "object"}  # (rest holds objects: node's own type does)
        idle = _idle_keywords(types - {"object"})
        thens = [c[3] for c in conds if not (isinstance(c[3], dict) and _schema_keys(c[3]) <= idle | _ANNOTATIONS)]
        typed = {"type": sorted(types - {"object"})}
        others = {**rest, "allOf": list(rest.get("allOf", [])) + [typed] + thens}
        for v in (objects, others, typed):
            self._adopt(v, node)
        self._keep.append((objects, others))
        return [objects, others]

    def _outcomes(self, conds: list, rest: dict) -> tuple | None:
        """(outcomes, apart): the sets of conditions (indexes into conds, _value_conditions) that may hold
        together, at most CONDITIONS_MAX of them (or CONDITIONS_ONE_KEY_MAX + 2 for the
        tests of one key). Tests of one key of an object for
        values apart hold one at a time where the key is always there (required by the
        `if` or by rest: five `if`s on a form item's `type` are six outcomes, not 32), and
        also all at once where it may be absent (17 `if`s on an optional `conditions`: 19
        outcomes); `apart`: each test of such a group -> the group (values pairwise apart).
        None where there are more."""
        groups: dict = {}  # (key, always there) -> indexes of tests of it that exclude each other
        lone = []
        objects = types_of(self, rest) == {"object"}  # (every `if` holds on other values)
        for i, (key, test, required, _, _) in enumerate(conds):
            vals = self._listed_values(test)
            here = required or any(key in x.get("required", ()) for x in _conjuncts(rest))
            g = groups.setdefault((key, here), []) if objects and vals is not None else None
            if g is not None and all(not _common_values([vals, self._listed_values(conds[j][1])]) for j in g):
                g.append(i)
            else:
                lone.append(i)
        choices = [[frozenset()] + [frozenset([i]) for i in g] + ([] if here or len(g) < 2 else [frozenset(g)])
                   for (_, here), g in groups.items() if g]
        choices += [[frozenset(), frozenset([i])] for i in lone]
        n = math.prod(map(len, choices))
        if n > CONDITIONS_MAX and not (len(choices) == 1 and n <= CONDITIONS_ONE_KEY_MAX + 2):
            return None
        apart = {i: frozenset(g) for g in groups.values() if len(g) > 1 for i in g}
        return [frozenset().union(*c) for c in product(*choices)], apart

    def _negated_test(self, node: dict, key: str, test) -> dict:
        """A schema for node's property `key` failing `test`: the values the property
        declares less the test's where both list theirs (no complement to search at
        every state), else {"not": test}."""
        has = next((v for x in _conjuncts(node) if isinstance(x.get("properties"), dict)
                    and (v := _finite_values(deref(self, x["properties"].get(key, True)))) is not None), None)
        bad = _finite_values(deref(self, test))
        if has is None or bad is None:
            return {"not": test}
        return {"enum": [v for v in has if not any(_json_equal(v, b) for b in bad)]}

    def _pattern_subsets(self, node: dict, pats: list) -> list:
        """The sets of patterns (indices into pats, string-content terms) an undeclared
        key may match, all of them and no other: every subset, up to
        MAX_PATTERN_PROPERTIES_PARTITION patterns; past that, only those whose patterns'
        languages meet (a search pruned where their intersection is empty: disjoint
        patterns, appsettings' 8 names or pyrseas' 6 prefixes, make n + 1 sets), at
        most MAX_PATTERN_SUBSETS of them."""
        n = len(pats)
        if n <= MAX_PATTERN_PROPERTIES_PARTITION:
            return [tuple(i for i in range(n) if mask >> i & 1) for mask in range(1 << n)]
        tb, src = self.tb, JsonTermSource(self.tb, DEFAULT_MAX_STATES)
        out, todo = [], [((), None)]  # (a set, the intersection of its patterns)
        while todo:
            sub, both = todo.pop()
            out.append(sub)
            if len(out) > MAX_PATTERN_SUBSETS:
                raise SchemaError(f"{n} patternProperties whose patterns a key may match in more than "
                                  f"{MAX_PATTERN_SUBSETS} combinations", "patternProperties", self.ptr(node))
            for i in range(sub[-1] + 1 if sub else 0, n):
                t = pats[i] if both is None else tb.intersect([both, pats[i]])
                if not src.is_empty(t):
                    todo.append((sub + (i,), t))
        return out

    def _matches(self, t: Term, key: bytes) -> bool:
        """tb.matches, remembered: every object of a document with intersections slots
        all its keys, and checks each against the same patterns (an `^x-` pattern in
        dozens of objects)."""
        k = (t.id, key)
        r = self._key_matches.get(k)
        if r is None:
            r = self._key_matches[k] = self.tb.matches(t, key)
        return r

    def _adopt(self, new: dict, node: dict) -> None:
        """Give a schema written for node (a variant, a merged allOf) node's base URI and
        pointer, and its subschemas theirs (_index_subs)."""
        self.base_of[id(new)] = self.base_of.get(id(node), "")
        self.ptr_of[id(new)] = self.ptr(node)
        self._index_subs(new)

    def _index_subs(self, merged: dict) -> None:
        """Give the merged schema's new allOf wrappers a base URI and pointer."""
        base, ptr = self.base_of[id(merged)], self.ptr(merged)
        for k, v in merged.get("properties", {}).items():
            if isinstance(v, dict) and id(v) not in self.base_of:
                self.base_of[id(v)] = base
                self.ptr_of[id(v)] = f"{ptr}/properties/{_escape_ptr(k)}"
        for k in ("additionalProperties", "items"):
            a = merged.get(k)
            if isinstance(a, dict) and id(a) not in self.base_of:
                self.base_of[id(a)] = base
                self.ptr_of[id(a)] = ptr

    def _one_of(self, node, d, budget) -> Term:
        tb = self.tb
        subs = node["oneOf"]
        if len(subs) <= 1 or disjoint(self, node, subs):
            return tb.alt([self.value(s, d, budget) for s in subs])
        parts = []
        for group, way in group_ways(self, node, subs):
            if way != "complement":
                x = [subs[i] for i in group] if way == "union" else self._keys_narrowed(node, group)
                parts += [self.value(s, d, budget) for s in x]
                continue
            self._negated += 1
            try:
                terms = [self.value(subs[i], d, budget) for i in group]
                comps = [tb.complement(t) for t in terms]
                own = [self._held_alone(node, [subs[j] for j in group], k, d, budget) for k in range(len(group))]
            finally:
                self._negated -= 1
            parts += [tb.intersect([t if o is None else o] + [c for j, c in enumerate(comps) if j != i])
                      for i, (t, o) in enumerate(zip(terms, own)) if o is not tb.nothing]
        apart = self._lenient_apart(node, subs) if self.nonterminals else None  # (recursive only)
        branches, relaxed = apart or (subs, "taken as anyOf (an output may match more than one branch)")
        return self._meet(node, "oneOf", tb.alt(parts), lambda: tb.alt([self.value(s, d, budget) for s in branches]),
                          relaxed)

    def _held_alone(self, node: dict, subs: list, i: int, d: int, budget: int) -> Term | None:
        """The oneOf branch subs[i] without the types that another branch holds every
        value of (_idle_of), which are never in subs[i] alone: nothing where that leaves
        no type, None where it leaves them all. The complements of the others then need
        no emptiness search of those types' values: `oneOf: [{type: array, items: ...},
        {properties: ...}]`, whose second branch takes every array, had the search
        prove that no array of free objects is outside it (a long search, then TooLargeError)."""
        types = types_of(self, subs[i])
        types = set(_TYPES) if types is None else types
        lost = {t for t in types if any(self._idle_of(s, t) for j, s in enumerate(subs) if j != i)}
        if not lost:
            return None
        if lost == types:
            return self.tb.nothing
        return self.value(self._typed_wrap(subs[i], frozenset(types - lost), node), d, budget)

    def _keys_narrowed(self, node: dict, group: list) -> list:
        """node's oneOf branches `group` (indexes), closed objects whose keys are apart
        (disjoint.keys_apart), each narrowed to the values no other one holds:
        `minProperties: 1` where another holds `{}` too, `type: object` where another
        is untyped too (a non-object holds both). Their union is the oneOf's, exactly."""
        key = (id(node), tuple(group))
        if key not in self._narrowed_keys:
            subs = [node["oneOf"][i] for i in group]
            ks = [closed_keys(self, s) for s in subs]
            out = []
            for i, (s, (_, _, empty, untyped)) in enumerate(zip(subs, ks)):
                others = [k for j, k in enumerate(ks) if j != i]
                extra = {**({"minProperties": 1} if empty and any(k[2] for k in others) else {}),
                         **({"type": "object"} if untyped and any(k[3] for k in others) else {})}
                if extra:
                    s = {"allOf": [s, extra]}
                    self._adopt(s, node)
                out.append(s)
            self._narrowed_keys[key] = out
            self._keep.append(out)
        return self._narrowed_keys[key]

    def _lenient_apart(self, node: dict, subs: list) -> tuple | None:
        """Lenient mode's oneOf whose branches overlap around a recursion, narrowed to a
        subset that keeps the output valid (_apart_by_keys, else _apart_by_value): (the
        narrowed branches, what the warning says was left out); None where neither
        narrows them (strict mode too)."""
        apart = self._apart_by_keys(node, subs)
        if apart is not None:
            return apart, ("narrowed: each branch without a key that another requires (output stays valid; "
                           "such instances are not written)")
        named = self._apart_by_value(node, subs)
        if named is not None:
            return named[1], (f"narrowed: each branch with its `{named[0]}` required (output stays valid; "
                              "objects without it are not written)")
        return None

    def _apart_by_value(self, node: dict, subs: list) -> tuple | None:
        """Lenient mode's oneOf where branches overlap, a recursive reference stands
        under the complements, and _apart_by_keys finds no keys: (k, each branch an object
        that requires k) where every branch lists values of its property k, apart from
        the other branches' (manifests of five kinds of one shape, `kind` a const
        but not required). A subset of the oneOf that keeps the output valid: an object
        with k holds one branch at most. None where no property does."""
        if self.strict:
            return None
        if id(node) in self._apart_value:  # (once per node, as _apart_by_keys)
            return self._apart_value[id(node)]
        self._apart_value[id(node)] = None
        first = deref(self, subs[0])
        if isinstance(first, dict) and "$ref" in first:
            first = self._resolve(first, first["$ref"])
        for k in first.get("properties", {}) if isinstance(first, dict) else ():
            vals = [_disc_values(self, s, k, True) for s in subs]
            if None in vals or not pairwise_apart(vals):
                continue
            out = []
            for s in subs:
                s = {"allOf": [s, {"type": "object", "required": [k]}]}
                self._adopt(s, node)
                out.append(s)
            self._keep.append(out)
            self._apart_value[id(node)] = k, out
            break
        return self._apart_value[id(node)]

    def _apart_by_keys(self, node: dict, subs: list) -> list | None:
        """Lenient mode's oneOf where branches overlap and a recursive reference stands
        under the complements: each branch without (`properties: false`) a key that each
        other one it may share a value with requires and it does not (objects: no
        non-object value in common), so no value holds two. A subset of the oneOf (an
        object holding such a key may hold one branch only, a value of the key failing
        the other), and the output stays valid, where the superset (anyOf) would not
        (CKAN's relationships: a name, or an any_of list of them). None where a pair
        of branches has no such key."""
        if self.strict:
            return None
        if id(node) in self._apart:  # (once per node: its wrappers' ids key the memos below them)
            return self._apart[id(node)]
        self._apart[id(node)] = None
        types = [types_of(self, x) for x in subs]
        required = [set(required_keys(self, x)) for x in subs]
        if None in types:
            return None
        out = []
        for i, x in enumerate(subs):
            drop = []
            for j in range(len(subs)):
                if j == i or not types[i] & types[j]:
                    continue
                keys = sorted(required[j] - required[i])
                if types[i] & types[j] - {"object"} or not keys:
                    return None
                drop.append(keys[0])
            if drop:
                x = {"allOf": [x, {"properties": dict.fromkeys(drop, False)}]}
                self._adopt(x, node)
            out.append(x)
        self._apart[id(node)] = out
        self._keep.append(out)
        return out

    # -- const / enum ----------------------------------------------------------------
    def _enum(self, values: list, d: int) -> Term:
        """An enum's values as tries (TermBuilder.words): the literal texts in one, and
        the literal heads of values with the same tail in one each (integers: their
        digits, then the shared optional zero fraction), so a derivative touches one
        branch and the terms are built once, not once per value."""
        tb = self.tb
        if values and all(v is None or type(v) in (bool, int, str) or (type(v) is float and math.isfinite(v))
                          for v in values):
            # scalars: built when the output first reaches the enum (the tries of a
            # schema's enums cost nothing before its first mask)
            name = ("json:enum", json.dumps(values, ensure_ascii=False, allow_nan=True))
            return tb.deferred(name, lambda: self._enum_term(values, d), False)
        return self._enum_term(values, d)

    def _enum_term(self, values: list, d: int) -> Term:
        tb, heads, others = self.tb, {}, []
        for v in values:
            if type(v) is str:  # the texts const() has, without a term per value
                heads.setdefault(tb.empty, []).append(string_text(v))
                continue
            if type(v) is int:
                text, tail = integer_texts(self.nt, v)
                heads.setdefault(tail, []).append(text)
                continue
            c = self.const(v, d)
            head, tail = c.args if c.kind == CONCAT else (c, tb.empty)
            text = _literal_text(head)
            if text is None:
                others.append(c)
            else:
                heads.setdefault(tail, []).append(text)
        return tb.alt([tb.concat(tb.words(ts), tail) for tail, ts in heads.items()] + others)

    def const(self, v, d: int) -> Term:
        tb = self.tb
        if v is None:
            return self.null
        if v is True:
            return tb.literal(b"true")
        if v is False:
            return tb.literal(b"false")
        if isinstance(v, (int, float)):
            if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
                return tb.nothing
            return number_text_term(tb, self.nt, v)
        if isinstance(v, str):
            return tb.literal(string_text(v))
        if isinstance(v, list):
            self._uses_depth()
            if d < 1 and self._counts_depth():
                return tb.nothing
            if not v:
                return tb.seq([self.open_arr, self.close_arr])
            items = []
            for i, x in enumerate(v):
                if i:
                    items.append(self.comma)
                items.append(self.const(x, self._below(d)))
            return tb.seq([self.open_arr] + items + [self.close_arr])
        if isinstance(v, dict):
            self._uses_depth()
            if d < 1 and self._counts_depth():
                return tb.nothing
            order = {k: i for i, k in enumerate(self.key_order)}
            keys = sorted(v, key=lambda k: order[k])
            items = []
            for i, k in enumerate(keys):
                if i:
                    items.append(self.comma)
                items += [tb.literal(string_text(k)), self.colon, self.const(v[k], self._below(d))]
            return tb.seq([self.open_obj] + items + [self.close_obj])
        raise SchemaError(f"not a JSON value: {v!r}", "const")

    def _asserts(self, name) -> bool:
        """Whether string format `name` is asserted: under assert_formats, a format
        formats.py defines (the specification's, OpenAPI's byte, Pydantic's for a
        Pydantic source, and their aliases) but those that assert nothing of a string
        (OpenAPI's float, double, binary, password; int32 and int64 assert on numbers:
        _number); another name only under custom_formats='refuse' (else an annotation,
        warned by keywords.schema_notes)."""
        if not self.assert_formats or not isinstance(name, str):
            return False
        name = FORMAT_ALIASES.get(name, name)
        if name in OPENAPI_ANY or name in INTEGER_FORMATS:
            return False
        return is_known(name, self.python_dates) or self.custom_formats == "refuse"

    def _integer_format(self, node: dict) -> tuple | None:
        """(lo, hi) of OpenAPI's int32 / int64 where node's format is one and asserted."""
        fmt = node.get("format")
        return INTEGER_FORMATS.get(fmt) if self.assert_formats and isinstance(fmt, str) else None

    # -- typed parts -----------------------------------------------------------------
    def _typed(self, node: dict, d: int, budget: int) -> Term | None:
        tb = self.tb
        ty = node.get("type")
        has = {
            "string": any(k in node for k in _STRING_KW if k != "format") or (
                "format" in node and self._asserts(node["format"])),
            "number": any(k in node for k in _NUMBER_KW) or self._integer_format(node) is not None,
            "object": any(k in node for k in _OBJECT_KW),
            "array": any(k in node for k in _ARRAY_KW),
        }
        if ty is None:
            if not any(has.values()):
                return None
            types = list(_TYPES)
            if not node.keys().isdisjoint(_TYPE_SAYERS):  # (the types its applicators leave:
                # uniqueItems beside a oneOf of strings and objects says nothing)
                known = types_of(self, node)
                types = types if known is None else [t for t in types if t in known]
        else:
            types = ty if isinstance(ty, list) else [ty]
            for t in types:
                if t not in _TYPES and t != "integer":
                    raise SchemaError(f"unknown type {t!r}", "type", self.ptr(node))
        parts = []
        if "number" in types:
            types = [t for t in types if t != "integer"]
        for t in types:
            if t == "null":
                parts.append(self.null)
            elif t == "boolean":
                parts.append(self.boolean)
            elif t in ("number", "integer"):
                parts.append(self._number(node, t == "integer"))
            elif t == "string":
                parts.append(self._string(node))
            elif t == "object":
                self._uses_depth()
                if d >= 1 or not self._counts_depth():
                    parts.append(self._object(node, d, budget))
            elif t == "array":
                self._uses_depth()
                if d >= 1 or not self._counts_depth():
                    parts.append(self._array(node, d, budget))
        return tb.alt(parts)

    # -- strings ---------------------------------------------------------------------
    def _string(self, node: dict) -> Term:
        tb, st = self.tb, self.st
        parts = []
        lo, hi = node.get("minLength", 0), node.get("maxLength")
        bounds = (int(lo), None if hi is None else int(hi)) if lo or hi is not None else None
        if "pattern" in node:
            try:
                parts.append(st.search(node["pattern"]))
            except RegexError as e:
                self.refuse(node, "pattern", f"unsupported pattern: {e}")
        run = st.bounded_run(parts[0], *bounds) if bounds and parts else None
        if run is not None:  # the pattern is a run of one class: the bounds go into it
            parts[0] = run
        elif bounds:
            parts.append(st.length(*bounds))
        if "format" in node and self._asserts(node["format"]) and not (
                self.python_dates and node["format"] in PYDANTIC_ANY_STRING):
            from .formats import format_term
            try:
                parts.append(format_term(st, node["format"], self.python_dates))
            except KeyError:
                custom = "" if is_known(node["format"], self.python_dates) else (
                    " (a custom format: custom_formats='annotate' or 'ignore' takes it as an annotation)")
                self.refuse(node, "format", f"format {node['format']!r} is not supported{custom}")
        content = tb.intersect(parts) if len(parts) > 1 else parts[0] if parts else st.any_chars
        return st.quoted(content)

    # -- numbers ---------------------------------------------------------------------
    def _number(self, node: dict, integer: bool) -> Term:
        tb = self.tb
        lo = hi = None  # (Decimal, exclusive)
        if (within := self._integer_format(node)) is not None:  # (an integer in its range)
            integer, lo, hi = True, (Decimal(within[0]), False), (Decimal(within[1]), False)
        for kw, excl in (("minimum", node.get("exclusiveMinimum") is True), ("exclusiveMinimum", True)):
            if kw in node:
                v = node[kw]
                if isinstance(v, bool):  # draft-04: a flag that makes `minimum` exclusive
                    continue
                b = (to_decimal(v), excl)
                if lo is None or b[0] > lo[0] or (b[0] == lo[0] and excl):
                    lo = b
        for kw, excl in (("maximum", node.get("exclusiveMaximum") is True), ("exclusiveMaximum", True)):
            if kw in node:
                v = node[kw]
                if isinstance(v, bool):
                    continue
                b = (to_decimal(v), excl)
                if hi is None or b[0] < hi[0] or (b[0] == hi[0] and excl):
                    hi = b
        ilo = ihi = None
        if lo is not None:
            ilo = int(lo[0].to_integral_value(rounding="ROUND_CEILING"))
            if lo[1] and ilo == lo[0]:
                ilo += 1
        if hi is not None:
            ihi = int(hi[0].to_integral_value(rounding="ROUND_FLOOR"))
            if hi[1] and ihi == hi[0]:
                ihi -= 1
        mult = node.get("multipleOf")
        if mult is not None:
            mult = to_decimal(mult)
            if mult <= 0:
                raise SchemaError("multipleOf must be > 0", "multipleOf", self.ptr(node))
        if integer or (mult is not None and mult == mult.to_integral_value() and mult >= 1):
            # integers only (a number that is a multiple of an integer is an integer)
            if ilo is None and ihi is None:
                base = self.plain_number(True)  # (int_range(None, None)'s language)
            elif ilo is None or ihi is None or ilo <= ihi:  # (not empty: deferred terms are not)
                nt = self.nt  # (now: the term is built later, outside this complement or inside one)
                base = self._range(("int", ilo, ihi, self.nt_fraction), lambda: nt.int_range(ilo, ihi))
            else:
                base = tb.nothing
            if mult is not None and mult != 1:
                _, _, exp = mult.normalize().as_tuple()
                j = -exp if exp < 0 else 0
                num = int(mult * (Decimal(10) ** j))
                m = num // math.gcd(num, 10 ** j)  # integer x: k | x  <=>  m | x
                if m != 1:
                    base = tb.intersect([base, self.nt.multiple_of(m, 0)])
            return base
        if lo is not None and hi is not None and (lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1]))):
            return tb.nothing  # (deferred terms are not empty)
        nt = self.nt
        parts = [self.plain_number(False) if lo is None and hi is None else
                 self._range(("interval", lo, hi), lambda: nt.interval(lo, hi))]
        if mult is not None:
            _, _, exp = mult.normalize().as_tuple()
            parts.append(self.nt.multiple_of(int(mult.scaleb(-exp)), -exp))
        return tb.intersect(parts)

    def _range(self, name: tuple, build) -> Term:
        """A digit-range term, built when the output first reaches it (a schema's
        numbers cost nothing before its first mask: digit ranges were most of a
        number-heavy schema's compile). `build()` makes a non-empty language, the same for `name`."""
        return self.tb.deferred(("json:range",) + name, build, False)

    # -- objects ---------------------------------------------------------------------
    def _object(self, node: dict, d: int, budget: int = 0) -> Term:
        tb = self.tb
        deps_req = dict(node.get("dependentRequired", {}))
        deps_sch = dict(node.get("dependentSchemas", {}))
        for k, v in node.get("dependencies", {}).items():
            if isinstance(v, list):
                deps_req[k] = v
            else:
                deps_sch[k] = v
        for k, v in list(deps_sch.items()):  # {required: [...]} alone: a dependentRequired
            if keys := _required_only(v):
                deps_req[k] = sorted(set(deps_req.get(k, ())) | keys)
                del deps_sch[k]
        dep_keys = list(dict.fromkeys(list(deps_req) + list(deps_sch)))
        if not dep_keys:
            return self._object_variant(node, d, budget, {})
        variants_per_key = []
        for a in dep_keys:
            req = {a: "req"}
            for b in deps_req.get(a, []):
                req[b] = "req"
            variants_per_key.append([({a: "forbid"}, None), (req, deps_sch.get(a))])
        if len(dep_keys) <= 5:
            alts = []
            for combo in product(*variants_per_key):
                modes: dict = {}
                ok = True
                extra = []
                for m, sch in combo:
                    for k, mode in m.items():
                        if modes.get(k, mode) != mode:
                            ok = False
                        modes[k] = mode
                    if sch is not None:
                        extra.append(sch)
                if not ok:
                    continue
                t = self._object_variant(node, d, budget, modes)
                if extra:
                    t = tb.intersect([t] + [self.value(s, d, budget) for s in extra])
                alts.append(t)
            return tb.alt(alts)
        parts = [self._object_variant(node, d, budget, {})]
        for (fm, _), (rm, sch) in variants_per_key:
            req = self._object_variant(node, d, budget, rm)
            if sch is not None:
                req = tb.intersect([req, self.value(sch, d, budget)])
            parts.append(tb.alt([self._object_variant(node, d, budget, fm), req]))
        return tb.intersect(parts)

    def _object_variant(self, node: dict, d: int, budget: int, modes: dict) -> Term:
        tb, st = self.tb, self.st
        props = node.get("properties", {})
        required = set(node.get("required", []))
        pats = node.get("patternProperties", {})
        addl = node.get("additionalProperties")
        uneval = node.get("unevaluatedProperties")
        if uneval is not None and addl is None and (uneval is True or node.keys().isdisjoint(_EVALUATORS)):
            addl = uneval  # (beside applicators: written as their ways, _unevaluated_written, or refused)
        if addl is None:
            addl = True if (self.allow_extra or self._negated) else False
        names = node.get("propertyNames", True)
        names_t = None if names is True else self.value(names, 0, budget)
        pat_terms = []
        for p, s in pats.items():
            try:
                pat_terms.append((p, st.search(p), s))
            except RegexError as e:
                self.refuse(node, "patternProperties", f"unsupported pattern {p!r}: {e}")
        addl_t = self.value(addl, self._below(d), budget) if addl is not True else self.any(self._below(d))
        # slots: keys at fixed places, in the document's key order; other keys come
        # last. Where objects may be intersected or complemented every known key has
        # one: objects agree on one order, and complements see only canonical texts
        # (below a schema that meets: _meets). Elsewhere only the object's own keys have
        # one (the same for all its dependentRequired variants) and every other key is
        # among the other keys: a large schema's objects hold a few slots each instead
        # of one per key of the document (CompiledSchema.canonical writes that order).
        canon = self._negated > 0 or self._meeting > 0
        if canon:
            gkeys = self._gkeys
        else:  # (its own keys in key order: not a scan of every key of the document)
            index = self._gkey_index
            gkeys = [(k, tb.literal(string_text(k))) for k in sorted((k for k in _own_keys(node) if k in index),
                                                                     key=index.__getitem__)]
        slots = []
        for k, lit in gkeys:
            mode = modes.get(k)
            req = k in required or mode == "req"
            if mode == "forbid":
                if req:
                    return tb.nothing
                continue
            if names_t is not None and not self._matches(names_t, string_text(k)):
                if req:
                    return tb.nothing
                continue
            enc = encode_string(k)
            vparts = []
            if k in props:
                vparts.append(self.value(props[k], self._below(d), budget))
            matched = [s for p, t, s in pat_terms if self._matches(t, enc)]
            vparts += [self.value(s, self._below(d), budget) for s in matched]
            if k not in props and not matched:
                if addl is False:
                    if req:
                        return tb.nothing
                    continue
                vparts.append(addl_t)
            if len(vparts) > 1 and self.nonterminals and any(
                    _marker_index(v, self._marker_memo) is not None for v in vparts):
                merged = self._merged_all_of(self._key_schemas(node, k, matched))  # (no intersection)
                if merged is not None:
                    vparts = [self.value(merged, self._below(d), budget)]
            vt = vparts[0] if len(vparts) == 1 else self._meet(  # (lenient: the first part, a superset)
                node, "patternProperties", tb.intersect(vparts), lambda vparts=vparts: vparts[0])
            if vt is tb.nothing:
                if req:
                    return tb.nothing
                continue
            slots.append((tb.seq([lit, self.colon, vt]), req))
        # other keys: not among the known ones
        others, keys, bare = [], [], []  # (bare: the keys' languages without not_known)
        if pat_terms or addl is not False:
            not_known = st.not_in(k for k, _ in gkeys)  # (deferred trie nodes: interned by words)
            subsets = self._pattern_subsets(node, [t for _, t, _ in pat_terms]) if pat_terms else [()]
            for sub in subsets:
                if not sub and addl is False:
                    continue
                content = [pat_terms[i][1] if i in sub else tb.complement(pat_terms[i][1])
                           for i in range(len(pat_terms))]
                content.append(not_known)
                key = st.quoted(tb.intersect(content) if len(content) > 1 else content[0])
                if sub:
                    vs = [self.value(pat_terms[i][2], self._below(d), budget) for i in sub]
                    v = tb.intersect(vs) if len(vs) > 1 else vs[0]
                else:
                    v = addl_t
                if v is tb.nothing:
                    continue
                if names_t is not None:
                    key = tb.intersect([key, names_t])
                if pat_terms or names_t is not None:
                    b = st.quoted(tb.intersect(content[:-1])) if pat_terms else st.any_string
                    bare.append(b if names_t is None else tb.intersect([b, names_t]))
                keys.append(key)
                others.append(tb.seq([key, self.colon, v]))
        other = tb.alt(others) if others else None
        lo = int(node.get("minProperties", 0))
        hi = node.get("maxProperties")
        hi = None if hi is None else int(hi)
        # (every cell of the patterns' partition taken, no propertyNames: the keys' languages
        # cover every key, which is endless from every beginning; no DFA of them to build)
        every = bool(pat_terms) and names_t is None and len(bare) == len(subsets)
        limit = self._free_keys(keys, bare, lo, every) if others else None
        cap = max(1, lo, (hi + 1) if hi is not None else 0)
        n = len(slots)
        if n * cap > 200_000:
            raise SchemaError("minProperties/maxProperties too large for this many properties",
                              "maxProperties", self.ptr(node))
        comma = self.comma
        memo: dict = {}

        def tail(c: int) -> Term:
            rlo = max(0, lo - c)
            rhi = None if hi is None else hi - c
            if limit is not None:  # (fewer other keys than minProperties asks: keys.py)
                rhi = limit if rhi is None else min(rhi, limit)
            if rhi is not None and rhi < rlo:
                return tb.nothing
            if other is None:
                return tb.empty if rlo == 0 else tb.nothing
            more = tb.concat(comma, other)
            if c == 0:
                if rhi == 0:
                    return tb.empty
                first = tb.concat(other, tb.repeat(more, max(rlo - 1, 0), None if rhi is None else rhi - 1))
                return tb.alt([tb.empty, first]) if rlo == 0 else first
            return tb.repeat(more, rlo, rhi)

        if cap == 1:  # no count to keep beyond "is this the first key": linear terms
            return tb.seq([self.open_obj, self._slot_chain(slots, tail(0), tail(1)), self.close_obj])
        # memo[i, c]: the members from slot i on, c keys written (at most cap counted),
        # built from the end (a loop, not a recursive closure: that is a reference cycle)
        for i in range(n, -1, -1):
            for c in range(cap, -1, -1):
                if i == n:
                    memo[i, c] = tail(c)
                    continue
                pair, req = slots[i]
                take = tb.seq([comma if c else tb.empty, pair, memo[i + 1, min(c + 1, cap)]])
                memo[i, c] = take if req else tb.alt([take, memo[i + 1, c]])
        return tb.seq([self.open_obj, memo[0, 0], self.close_obj])

    def _free_keys(self, keys: list, bare: list, lo: int, every: bool = False) -> int | None:
        """Notes that an object takes keys no slot writes (`keys`: their quoted
        languages; `bare`: the same without the declared keys taken out, where patterns
        or propertyNames bound them, else empty), which the matcher keeps distinct
        (fsm/json/keys.py), and whether some are bounded: not endless from every
        beginning, or meeting others where objects are intersected or complemented
        (the matcher then walks). Returns how many such keys there are where fewer
        than minProperties `lo`, else None: the object then takes no more of them.
        `every`: the `bare` languages together take every key (endless, not finite)."""
        self.free_keys = True
        if not bare:  # (any key but the declared ones: endless from every beginning)
            return None
        tb = self.tb
        k = (tuple(t.id for t in keys), tuple(t.id for t in bare), lo)
        if k not in self._key_languages and every:
            self._key_languages[k] = (True, None)
        if k not in self._key_languages:
            count = None
            try:
                if longest_text(tb.alt(bare)) is not None:  # (bounded: finitely many keys, whose
                    endless, finite = False, True  # beginnings, the opening quote first, end in finitely many ways)
                else:
                    endless, finite = key_language(LazyDFA(JsonTermSource(tb), tb.alt(bare), MAX_KEY_STATES))
                if finite and lo:
                    count = _count_strings(LazyDFA(JsonTermSource(tb), tb.alt(keys), MAX_KEY_STATES), lo)
            except TimeBudgetError:  # (the budget ends the compile, no fallback)
                raise
            except TooLargeError:
                endless = False
            self._key_languages[k] = (endless, count if count is not None and count < lo else None)
        endless, limit = self._key_languages[k]
        if not endless or self._negated or self._meeting:
            self.walk_keys = True
        return limit

    def _slot_chain(self, slots: list, first_tail: Term, tail: Term) -> Term:
        """An object's members: `slots` ((key: value term, required) in order) then the
        other keys, `first_tail` where no slot was written, `tail` after one. After the
        first written slot each optional one is a factor (, slot)? of a concatenation;
        the first is one of the slots up to the first required one. As alternations
        (a slot, or the choice among the rest) each would hold all the later slots:
        quadratic in the slots (objects where every key of the document has a slot
        hold hundreds)."""
        tb, comma = self.tb, self.comma
        after = [tail]  # after[j]: what may follow slot n-1-j once a slot is written
        for pair, req in reversed(slots):
            more = tb.seq([comma, pair])
            after.append(tb.concat(more if req else tb.alt([tb.empty, more]), after[-1]))
        after.reverse()  # after[i]: the members from slot i on, one already written
        firsts = []
        for i, (pair, req) in enumerate(slots):
            firsts.append(tb.concat(pair, after[i + 1]))
            if req:
                break
        else:
            firsts.append(first_tail)
        return tb.alt(firsts)

    # -- arrays ----------------------------------------------------------------------
    def _array_list(self, prefix: list, rest: Term | None, lo: int, hi: int | None) -> Term:
        """[ p1, p2, ..., rest, rest ... ] with lo <= length <= hi."""
        tb = self.tb
        n = len(prefix)
        if hi is not None and hi < lo:
            return tb.nothing
        comma = self.comma

        def rest_part(i: int) -> Term:
            rlo = max(0, lo - i)
            rhi = None if hi is None else hi - i
            if rest is None or rest is tb.nothing:
                return tb.empty if rlo == 0 else tb.nothing
            if rhi == 0:
                return tb.empty if rlo == 0 else tb.nothing
            if i == 0:
                first = tb.concat(rest, tb.repeat(tb.concat(comma, rest), max(rlo - 1, 0),
                                                  None if rhi is None else rhi - 1))
                return tb.alt([tb.empty, first]) if rlo == 0 else first
            return tb.repeat(tb.concat(comma, rest), rlo, rhi)

        top = n if hi is None else min(n, hi)
        t = rest_part(top) if top == n else (tb.empty if top >= lo else tb.nothing)
        for i in range(top - 1, -1, -1):
            take = tb.seq([comma if i else tb.empty, prefix[i], t])
            t = tb.alt([tb.empty, take]) if i >= lo else take
        return tb.seq([self.open_arr, t, self.close_arr])

    def _count_list(self, x: Term, y: Term, a: int, b: int | None) -> Term:
        """Arrays of x/y elements with between a and b elements from x (x, y disjoint)."""
        tb = self.tb
        if b is not None and b < a:
            return tb.nothing
        comma = self.comma
        ys = tb.star(tb.concat(comma, y))

        def after(lo, hi):  # elements each preceded by a comma
            if hi is not None and hi < 0:
                return tb.nothing
            return tb.concat(ys, tb.repeat(tb.seq([comma, x, ys]), max(lo, 0), hi))

        parts = [tb.concat(y, after(a, b)), tb.concat(x, after(a - 1, None if b is None else b - 1))]
        if a == 0:
            parts.append(tb.empty)
        return tb.seq([self.open_arr, tb.alt(parts), self.close_arr])

    def _array(self, node: dict, d: int, budget: int) -> Term:
        tb = self.tb
        items = node.get("items")
        if isinstance(items, list):  # draft-07 tuple form
            prefix_s, rest_s = items, node.get("additionalItems", True)
        else:
            prefix_s = node.get("prefixItems", [])
            rest_s = True if items is None else items
        uneval = node.get("unevaluatedItems")
        if uneval is not None and node.keys().isdisjoint(_EVALUATORS):  # (else _unevaluated_written)
            if rest_s is True and "items" not in node and "additionalItems" not in node:
                rest_s = uneval
        prefix = [self.value(s, self._below(d), budget) for s in prefix_s]
        rest = self.value(rest_s, self._below(d), budget)
        lo = int(node.get("minItems", 0))
        hi = node.get("maxItems")
        hi = None if hi is None else int(hi)
        parts = [self._array_list(prefix, rest, lo, hi)]
        if "contains" in node:
            a = int(node.get("minContains", 1))
            b = node.get("maxContains")
            b = None if b is None else int(b)
            self._negated += 1
            try:
                c = self.value(node["contains"], self._below(d), budget)
                holders = self._holders(node["contains"], c, [*prefix_s, rest_s], [*prefix, rest])
                if not any(holders) or (hi is not None and a > hi):
                    if a > 0:  # (every array holds none, or too few)
                        return tb.nothing
                    c = tb.nothing  # (the count holds on every array: none is too many for no b)
                anyv = self.any(self._below(d))
                notc = tb.intersect([anyv, tb.complement(c)])
                if not (a == 0 and b is None):  # (else every count holds)
                    held = tb.intersect([c, anyv])
                    if not holders[-1]:  # (only prefix items may hold it)
                        parts.append(self._prefix_count_list(held, notc, anyv, len(prefix), a, b))
                    elif hi is not None and hi <= CONTAINS_COUNTED_PLACES:  # (every place counted)
                        parts.append(self._prefix_count_list(held, notc, tb.nothing, hi, a, b))
                    else:
                        parts.append(self._count_list(held, notc, a, b))
            finally:
                self._negated -= 1
        if node.get("uniqueItems") is True and (hi is None or hi > 1):
            dom = self._finite_domain(rest_s, prefix_s)
            if dom is None and not (self.python_sets and self._negated == 0):  # (a complement would shrink)
                why = self.unique_reasons.get(self.ptr(node), "no array that the tracker reads holds it for sure (it "
                                              "sits under not, if or contains, or in a key read before the "
                                              "key whose value decides it)")
                self.refuse(node, "uniqueItems", f"uniqueItems cannot be enforced here: {why}. It is enforced "
                            f"where the items range over a finite set of at most {MAX_UNIQUE_DOMAIN} values (enum, "
                            "const, boolean, null), "
                            f"or are strings (any, listed by an enum, of at least {MIN_UNIQUE_DOMAIN} values, or "
                            "counted, in an array of one way), "
                            "lists of strings or of any values, open objects, closed objects of at least that "
                            "many values (whose unique arrays below hold none), or numbers without bounds or above one "
                            "of 0 or more (any, or integers), with true, false and null beside them, in an "
                            "array whose place every valid instance decides (fsm/json/unique.py)")
            elif dom is not None:
                self._negated += 1
                try:
                    anyv = self.any(self._below(d))
                    for v in dom:
                        x = self.const(v, self._below(d))
                        parts.append(self._count_list(x, tb.intersect([anyv, tb.complement(x)]), 0, 1))
                finally:
                    self._negated -= 1
        return tb.intersect(parts) if len(parts) > 1 else parts[0]

    def _holders(self, contains, c: Term, items_s: list, items: list) -> list[bool]:
        """For each place of an array (prefix items, then the rest: schemas `items_s`,
        terms `items`), whether its item may hold `contains` (term c): False where their
        types are apart (disjoint.types_of: `contains: {const: 0}` beside objects)
        or their intersection is empty, as a search of at most CONTAINS_SEARCH_STATES
        states shows (`contains: {enum: [true, "a"]}` beside closed objects); True where
        it may or where that is not known. Otherwise the count's terms meet the items only
        inside the array's states, and an emptiness search there (at a mask past the
        array's key, mid-output) explored every array of the items for one more that
        holds c: a long search, then TooLargeError."""
        ct = types_of(self, contains)
        src = JsonTermSource(self.tb, CONTAINS_SEARCH_STATES)
        out = []
        for s, x in zip(items_s, items):
            kinds = set() if s is False else types_of(self, s)
            if ct is not None and kinds is not None and not ct & kinds:
                out.append(False)
            elif self.nonterminals and (_marker_index(c, self._marker_memo) is not None
                                        or _marker_index(x, self._marker_memo) is not None):
                out.append(True)  # (a recursive reference's marker stands for a language no search reads)
            else:
                try:
                    out.append(not src.is_empty(self.tb.intersect([c, x])))
                except TimeBudgetError:  # (the budget ends the compile, no fallback)
                    raise
                except TooLargeError:
                    out.append(True)
        return out

    def _prefix_count_list(self, x: Term, y: Term, z: Term, k: int, a: int, b: int | None) -> Term:
        """Arrays whose first k elements are x or y (disjoint), between a and b of them
        x, and whose later ones are z (nothing: none): a `contains` (x) that only the k
        prefix items may hold, or an array of at most k items. (_count_list's terms would
        ask the later items for x as well, and a state past the prefix that still needs
        one held no member, which only a search of every later item could tell.)"""
        tb, comma, memo = self.tb, self.comma, {}

        def rest(i: int, j: int) -> Term:  # the elements from place i on, each after a comma; j of x so far
            if b is not None and j > b:
                return tb.nothing
            if (i, j) not in memo:
                if i == k:
                    memo[i, j] = tb.star(tb.concat(comma, z)) if j >= a else tb.nothing
                else:
                    memo[i, j] = tb.alt([tb.empty if j >= a else tb.nothing, tb.seq([comma, x, rest(i + 1, j + 1)]),
                                         tb.seq([comma, y, rest(i + 1, j)])])
            return memo[i, j]
        first = [tb.concat(x, rest(1, 1)), tb.concat(y, rest(1, 0))] if k else [tb.concat(z, rest(0, 0))]
        if a == 0:
            first.append(tb.empty)
        return tb.seq([self.open_arr, tb.alt(first), self.close_arr])

    def _finite_domain(self, rest_s, prefix_s) -> list | None:
        vals: list = []
        for s in list(prefix_s) + [rest_s]:
            s = deref(self, s)
            if s is False:
                continue
            if not isinstance(s, dict):
                return None
            if "const" in s:
                vs = [s["const"]]
            elif isinstance(s.get("enum"), list):
                vs = s["enum"]
            elif _names_type(s.get("type"), "boolean"):
                vs = [True, False]
            elif _names_type(s.get("type"), "null"):
                vs = [None]
            else:
                return None
            for v in vs:
                if not any(_json_equal(v, w) for w in vals):
                    vals.append(v)
        return vals if len(vals) <= MAX_UNIQUE_DOMAIN else None


_TYPE_SAYERS = frozenset(("anyOf", "oneOf", "allOf", "$ref", "enum", "const"))  # (disjoint.types_of reads)


_NOWHERE = object()  # (_pointer: no such place)


def _pointer(doc, frag: str):
    """The value at JSON pointer `frag` ("/a/0/b~1c") in `doc`, or _NOWHERE."""
    cur = doc
    for part in frag[1:].split("/"):
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _NOWHERE
    return cur


# (depth, (whitespace, max_whitespace)) -> TermBuilder.export program of the cheap
# universe `_Compiler.any` builds (the values of free positions: every schema that
# allows extra properties needs one ~20 levels deep)
_UNIVERSES: dict[tuple, tuple] = {}
_NUMBERS: dict[str, tuple] = {}  # _Compiler.plain_number's programs


def _literal_text(t: Term) -> bytes | None:
    """The one text of a literal term (STR, or a one-byte range), else None."""
    if t.kind == STR:
        return t.args[0]
    if t.kind == BYTES and t.args[0] == t.args[1]:
        return bytes(t.args[:1])
    return None


def schema_to_term(schema, tb: JsonTermBuilder | None = None, options: JsonOptions | None = None,
                   **keywords) -> CompiledSchema | UnionSchema:
    """Compile a schema to a byte-level term (no vocabulary needed); a root anyOf that
    uniqueItems sets apart, to a term per branch (fsm/json/union.py). Options: JsonOptions,
    or its fields as keywords."""
    options = resolve(JsonOptions, options, keywords, "schema_to_term").for_source(schema)
    root = load_schema(schema)
    notes = schema_notes(root, options.assert_formats, options.custom_formats, options.python_dates)
    cs = _schema_to_term(root, tb, True, None, options)
    for text in notes + cs.relaxed:  # (those of a compilation begun again are not repeated)
        warnings.warn(text, SchemaWarning, stacklevel=2)
    return cs


def _schema_to_term(schema, tb: JsonTermBuilder | None, split: bool, counts: dict | None,
                    options: JsonOptions) -> CompiledSchema | UnionSchema:
    """schema_to_term, without its warnings; `split`: a root anyOf may be split;
    `counts`: the uniqueItems planner's, shared by a split's branches."""
    tb = tb or JsonTermBuilder()
    root = load_schema(schema)
    if options.documents:  # (loaded once: the uniqueItems planner copies them)
        options = replace(options, documents={u: load_schema(d) for u, d in options.documents.items()})
    given = (root, options.documents)
    if split:  # (the counts of unique arrays' items, for a split's branches too)
        counts = {}
    with paused_gc():
        comp = first = _Compiler(root, tb, options)

        def make_compiler(edit):  # (the planner's helper: of a copy that edit makes)
            r, docs = edit(root, options.documents)
            return _Compiler(r, tb, replace(options, documents=docs))
        unique = plan_unique_items(comp, make_compiler, counts)
        if unique is not None and (unique[1] or unique[2]):  # (those uniqueItems are checked beside the
            # automaton; vacuous anyOfs go)
            root, docs = without_unique_items(root, options.documents, *unique[1:3])
            options = replace(options, documents=docs)
            comp = _Compiler(root, tb, options)
        reasons = unique[3] if unique is not None else {}  # (by JSON pointer: the same in the copy)
        comp.unique_reasons = reasons
        try:
            again: dict = {}  # (compiled again, with what changed: _MixedOrders, _TooDeep)
            while True:
                try:
                    term = comp.value(comp.entry, comp.max_depth)
                    break
                except _MixedOrders:
                    if again.get("all_meet"):
                        raise
                    again["all_meet"] = True
                except _TooDeep:
                    if again.get("count_depth"):
                        raise
                    again["count_depth"] = True
                comp = _Compiler(root, tb, options, **again)
                comp.unique_reasons = reasons
        except SchemaError as e:
            if not split or e.keyword != "uniqueItems" or \
                    (union := _split_union(first, given, options, [e.pointer], counts)) is None:
                raise
            return union
    ws = comp.ws
    if ws is not tb.empty:
        term = tb.seq([ws, term, ws])
    if options.prefix or options.suffix:
        term = tb.seq([tb.literal(options.prefix.encode()), term, tb.literal(options.suffix.encode())])
    rules = None
    if comp.rule_bodies:  # recursive: lazy terms where they are exact, else the grammar path
        lazy = None if comp.recursion == "grammar" else \
            lazy_recursion(tb, JsonTermSource(tb), term, comp.rule_bodies, comp._marker_memo.floor)
        if lazy is not None:
            term = lazy
        else:
            rules = _RecursiveRules(tb, term, comp.rule_bodies, comp._marker_memo,
                                    None if comp.strict else comp.relaxed)
    cs = CompiledSchema(tb, term, comp.key_order, options, comp.relaxed)
    cs.unique = unique and unique[0]
    cs.keys = KeyPlan(comp.walk_keys) if comp.free_keys else None
    if not comp._meeting:
        cs.own_slots = (comp.entry, comp)
    cs.rules = rules
    cs.recursion = "grammar" if rules is not None else "lazy" if comp.rule_bodies else None
    head = "'uniqueItems' at "  # (lenient: uniqueItems relaxed, which a split may enforce)
    if split and (relaxed := [n[len(head):].split(": ", 1)[0] for n in comp.relaxed if n.startswith(head)]):
        return _split_union(first, given, options, relaxed, counts) or cs
    return cs


def _split_union(comp, given: tuple, options: JsonOptions, pointers: list[str], counts: dict) -> UnionSchema | None:
    """The root anyOf of the schema `comp` indexed (given: its root and documents) split
    into a compiled schema per branch, where a uniqueItems at `pointers` (refused, or
    relaxed) lies below one of its branches, and no branch refuses or relaxes a
    uniqueItems; else None (fsm/json/union.py). `counts`: the planner's of the whole schema."""
    targets = [t for p in pointers if p.startswith("#/") and (t := _pointer(comp.root, p[1:])) is not _NOWHERE]
    if not targets or comp._dynamic or comp._unevaluated:  # (unevaluated*: what every branch that
        return None  # holds evaluates counts, and one branch alone evaluates less)
    root, docs = given
    for union in root_unions(comp):
        if not schemas_below(comp, union["anyOf"]).intersection(map(id, targets)):
            continue
        try:  # (the branches are copies: their unique arrays' item counts are the whole schema's)
            branches = [_schema_to_term(r, None, False, counts, replace(options, documents=d))
                        for r, d in branch_schemas(root, docs, union)]
        except TimeBudgetError:  # (the budget ends the compile, no fallback)
            raise
        except ConstraintError:
            continue
        if not any(n.startswith("'uniqueItems' at ") for b in branches for n in b.relaxed):
            return UnionSchema(branches, comp.key_order, options)
    return None


def unique_plan_of(schema, options: JsonOptions | None = None, **keywords) -> UniquePlan | None:
    """The plan of a schema alone (for tests and the doctest; the compiler builds its own
    through `plan_unique_items`)."""
    options = resolve(JsonOptions, options, keywords, "unique_plan_of").for_source(schema)
    comp = _Compiler(load_schema(schema), JsonTermBuilder(), options)
    found = plan_unique_items(comp)
    return found and found[0]


def build_automaton(schema, vocab, options: JsonOptions | None = None, **keywords):
    """compile_json_schema without the cache."""
    options = resolve(JsonOptions, options, keywords, "build_automaton")
    ms = options.max_states or DEFAULT_MAX_STATES
    tb = JsonTermBuilder()
    with scope(options.time_budget_s, "json schema"), paused_gc(), freed_on_timeout(tb):
        stage("compiling the schema to terms")
        cs = schema_to_term(schema, tb, options)
        root = load_schema(schema)
        stage("deciding whether the start state is empty")
        if isinstance(cs, UnionSchema):
            info = JsonInfo(cs.key_order, cs.relaxed, None, cs.canonical, root)
            auto = UnionAutomaton([_automaton(b, vocab, ms, root) for b in cs.branches], info)
        else:
            auto = _automaton(cs, vocab, ms, root)
        paused_gc().collect_young()
    return auto


def _automaton(cs: CompiledSchema, vocab, max_states: int, root=None):
    """The automaton of a compiled schema, its term (or rules), its matcher (uniqueItems
    and distinct keys checked beside the automaton) and its JsonInfo (of `root`, the
    schema loaded)."""
    make = _matcher_factory(cs.unique, cs.keys)
    info = JsonInfo(cs.key_order, cs.relaxed, cs.recursion, cs.canonical, root)
    if cs.rules is not None:
        auto = GrammarAutomaton(cs.rules.grammar_source(max_states), vocab, "json schema (recursive)",
                                max_states, ahead=False, make_matcher=make, info=info)
    else:
        auto = TokenAutomaton(JsonTermSource(cs.tb, max_states), cs.term, vocab, "json schema", max_states,
                              make_matcher=make, info=info)
    return auto.owns_source()


def _matcher_factory(unique, keys):
    """How a schema's matchers are made: TokenMatcher's steps, plus the uniqueItems plan's
    and the key plan's checks where the schema has them (None: a plain TokenMatcher)."""
    if unique is None and keys is None:
        return None

    def make(auto):
        m = TokenMatcher(auto) if unique is None else UniqueMatcher(auto, unique)
        return m if keys is None else KeyMatcher(m, keys)
    return make


@lists_options(JsonOptions)
def compile_json_schema(schema, vocab, options: JsonOptions | None = None, **keywords):
    """Compile a JSON Schema (dict, JSON text or Pydantic model class) for `vocab`: a
    Constraint (TokenAutomaton; a UnionAutomaton where a root anyOf is split) whose
    `info` is a JsonInfo (key order, canonical text, what lenient mode relaxed).

    Options: a JsonOptions, or its fields as keywords (both: the keywords win). Cached
    per vocabulary by the schema's JSON text and the options. What each keyword
    supports, and why it is exact: docs/json-schema.md."""
    options = resolve(JsonOptions, options, keywords, "compile_json_schema").for_source(schema)
    root = load_schema(schema)
    key = ("json_schema", json.dumps(root, sort_keys=False, separators=(",", ":")),
           json.dumps({u: load_schema(d) for u, d in (options.documents or {}).items()}),
           replace(options, documents=None))
    return vocab.cached(key, lambda: build_automaton(root, vocab, options))

