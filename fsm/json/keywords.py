"""The JSON Schema vocabulary as fsm/json/schema.py reads it: the keywords, grouped by
the type they constrain, where subschemas sit, which only annotate, and what each
keyword's value must be (_check_values). Plain tables, shared by the compiler and the
schema rewrites beside it (fsm/json/merge.py, fsm/json/variants.py); nothing here
builds terms.
"""
from __future__ import annotations

import difflib
import functools
import json
import math
import re

from ..core.errors import SchemaError
from .formats import is_known

_TYPES = ("null", "boolean", "object", "array", "number", "string")
_STRING_KW = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_OBJECT_KW = ("properties", "required", "additionalProperties", "patternProperties", "propertyNames",
              "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
              "unevaluatedProperties")
_ARRAY_KW = ("items", "prefixItems", "additionalItems", "contains", "minContains", "maxContains",
             "minItems", "maxItems", "uniqueItems", "unevaluatedItems")
_TYPED_KW = frozenset(_STRING_KW + _NUMBER_KW + _OBJECT_KW + _ARRAY_KW)  # (a typed part without `type`)
# the keywords that assert something of each type's values (integer: number's)
_FAMILIES = {"object": _OBJECT_KW, "array": _ARRAY_KW, "string": _STRING_KW, "number": _NUMBER_KW}
_SUB_ONE = ("additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if", "then",
            "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_SUB_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_SUB_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")


_NOTES = frozenset(("$ref", "$id", "$schema", "$comment", "$anchor", "$dynamicAnchor", "$defs",
                    "definitions", "title", "description", "default", "examples", "deprecated",
                    "readOnly", "writeOnly"))
_ANNOTATIONS = _NOTES - {"$ref"}  # keywords that assert nothing
# The JSON Schema keywords of drafts 4 to 2020-12 (and OpenAPI's that assert): any other
# key of a schema (allowTrailingCommas, x-...) is a vendor annotation
_KEYWORDS = frozenset((
    "$schema", "$id", "id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
    "$recursiveAnchor", "$vocabulary", "$comment", "$defs", "definitions", "allOf", "anyOf", "oneOf", "not",
    "if", "then", "else", "dependentSchemas", "dependencies", "prefixItems", "items", "additionalItems",
    "contains", "properties", "patternProperties", "additionalProperties", "propertyNames",
    "unevaluatedItems", "unevaluatedProperties", "type", "enum", "const", "multipleOf", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
    "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "dependentRequired", "format", "contentEncoding", "contentMediaType", "contentSchema", "title",
    "description", "default", "deprecated", "readOnly", "writeOnly", "examples", "discriminator",
    "nullable"))
_UNSUPPORTED = {"$dynamicRef": "dynamic references here (fsm/json/dynamic.py resolves those it reaches)",
                "$recursiveRef": "recursive references (2019-09)"}


def _schema_keys(node: dict) -> set:
    """The keys of schema `node` that are JSON Schema keywords: vendor keys (editors'
    allowTrailingCommas, doNotSuggest, ignoreCase...) assert nothing."""
    return {k for k in node if k in _KEYWORDS}


def _beside_ref(node: dict) -> set:
    """The keys of schema `node` that assert something beside its $ref (not notes, not
    vendor keys: `{"$ref": ..., "doNotSuggest": true}` is its target)."""
    return _schema_keys(node) - _NOTES


def _names_type(ty, name: str) -> bool:
    """Whether a schema's `type` value is the one type `name`: `"object"` or
    `["object"]` (a one-name list is the same schema, and reads the same way here)."""
    return ty == name or ty == [name]


def _idle_keywords(types) -> frozenset:
    """The type-specific keywords that assert nothing of values of `types` (type names,
    integer as number): `items` beside `type: object`."""
    return _idle_of_types(frozenset("number" if t == "integer" else t for t in types))


@functools.cache
def _idle_of_types(types: frozenset) -> frozenset:
    """_idle_keywords of normalised type names (at most 2**6 sets: asked per pair of a
    oneOf's branches, hadolint's 100)."""
    return frozenset(k for t, kws in _FAMILIES.items() if t not in types for k in kws)


_COUNT_KW = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
             "minContains", "maxContains")
_OBJECTS_OF_SCHEMAS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


_TYPE_NAMES = _TYPES + ("integer",)


def _is_number(v) -> bool:
    return type(v) in (int, float) and v == v


def _is_count(v) -> bool:
    return type(v) in (int, float) and v >= 0 and (type(v) is int or v.is_integer())


def _is_type_value(v) -> bool:
    return v in _TYPE_NAMES or isinstance(v, list) and bool(v) and all(t in _TYPE_NAMES for t in v)


_VALUE_CHECKS = {  # keyword -> (what it must be, test)
    **{k: ("a non-negative integer", _is_count) for k in _COUNT_KW},
    **{k: ("a number", _is_number) for k in ("minimum", "maximum")},
    **{k: ("a number", lambda v: type(v) is bool or _is_number(v))  # (draft-04's flag)
       for k in ("exclusiveMinimum", "exclusiveMaximum")},
    "multipleOf": ("a number greater than 0", lambda v: _is_number(v) and v > 0),
    "required": ("an array of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "pattern": ("a string", lambda v: isinstance(v, str)),
    **{k: ("an object", lambda v: isinstance(v, dict)) for k in _OBJECTS_OF_SCHEMAS},
    "type": (f"one of {', '.join(_TYPE_NAMES)} or a non-empty array of them", _is_type_value),
    **{k: ("a non-empty array of schemas", lambda v: isinstance(v, list) and bool(v))
       for k in ("allOf", "anyOf", "oneOf")},
}


def _check_values(node: dict, ptr) -> None:
    """SchemaError (naming the keyword and the pointer) for keyword values of the wrong
    kind, which would otherwise be read some other way: `required: "ab"` as the keys a
    and b, `maxItems: 1.5` as 1, `minimum: "x"` as a TypeError deep inside, `anyOf: {}`
    as no constraint). `ptr` gives a schema's pointer (asked only to name a bad value).
    Read per key of the node (most have two or three): once per schema compiled."""
    for k, v in node.items():
        what = _VALUE_CHECKS.get(k)
        if what is not None and not what[1](v):
            raise SchemaError(f"{k} must be {what[0]}, not {v!r:.80}", k, ptr(node))


# Keys of other vocabularies that plainly annotate (OpenAPI's, editors' and SchemaStore's,
# draft-03's): never read as a typo of a keyword (`example` is not `examples` misspelt)
VENDOR_NOTES = frozenset((
    "example", "xml", "externalDocs", "discriminator", "nullable", "readOnly", "writeOnly", "deprecated",
    "markdownDescription", "deprecationMessage", "errorMessage", "defaultSnippets", "doNotSuggest",
    "allowTrailingCommas", "allowComments", "enumDescriptions", "markdownEnumDescriptions",
    "patternErrorMessage", "suggestSortText", "tsType", "extends", "disallow", "divisibleBy", "optional",
    "requires", "media", "links", "fileMatch"))
TYPO_CUTOFF = 0.8  # difflib ratio from which an unknown key is taken for a misspelt keyword


def _subschemas(node: dict, ptr: str):
    """(subschema, its pointer) of the schema positions directly under `node`."""
    def esc(k) -> str:
        return str(k).replace("~", "~0").replace("/", "~1")
    for k, v in node.items():
        if k in _SUB_ONE or (k == "items" and isinstance(v, (dict, bool))):
            yield v, f"{ptr}/{esc(k)}"
        elif k in _SUB_MAP and isinstance(v, dict):
            yield from ((x, f"{ptr}/{esc(k)}/{esc(name)}") for name, x in v.items() if isinstance(x, (dict, bool)))
        elif (k in _SUB_LIST or k == "items") and isinstance(v, list):
            yield from ((x, f"{ptr}/{esc(k)}/{i}") for i, x in enumerate(v))


@functools.lru_cache(maxsize=4096)
def _near_keyword(key: str) -> str | None:
    """The keyword that `key` is probably a misspelling of, or None. Cached: real schemas
    repeat the same few unknown keys thousands of times (Azure Pipelines' `ignoreCase`),
    and one difflib search over the keywords takes about a millisecond."""
    near = difflib.get_close_matches(key, _KEYWORDS, n=1, cutoff=TYPO_CUTOFF)
    return near[0] if near else None


def schema_notes(root, assert_formats: bool, custom_formats: str, python: bool) -> list[str]:
    """What a schema probably did not mean, as SchemaWarning texts, each naming the key
    and its JSON pointer: a key that is no keyword but close to one (`maxLenght`: the
    nearest keyword, by difflib; keys of other vocabularies, VENDOR_NOTES and `x-...`,
    are not), and a `format` that no specification defines, read as an annotation
    (custom_formats='annotate')."""
    out, todo, seen = [], [(root, "#")], set()
    while todo:
        node, ptr = todo.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        for k in node:
            if not isinstance(k, str) or k in _KEYWORDS or k in VENDOR_NOTES or k.lower().startswith("x-"):
                continue
            near = _near_keyword(k)
            if near:
                out.append(f"unknown keyword {k!r} at {ptr} is ignored: did you mean {near!r}?")
        fmt = node.get("format")
        if assert_formats and custom_formats == "annotate" and isinstance(fmt, str) and not is_known(fmt, python):
            out.append(f"format {fmt!r} at {ptr} is not one the specification or OpenAPI defines: read as an "
                       "annotation, not enforced (custom_formats='refuse' refuses it)")
        todo.extend(reversed(list(_subschemas(node, ptr))))
    return out


def _only(node: dict, types: tuple) -> bool:
    """Whether node's `type` admits values of `types` only (integer counts as number)."""
    ty = node.get("type")
    names = [ty] if isinstance(ty, str) else ty if isinstance(ty, list) else None
    return bool(names) and all(("number" if t == "integer" else t) in types for t in names)


def _number_bounds(node: dict) -> str | None:
    """'minimum 5 > maximum 3' where node's bounds leave no number (no integer, for an
    integer type), else None."""
    def num(k):
        v = node.get(k)
        return v if type(v) in (int, float) else None
    lows = [(k, num(k)) for k in ("minimum", "exclusiveMinimum") if num(k) is not None]
    highs = [(k, num(k)) for k in ("maximum", "exclusiveMaximum") if num(k) is not None]
    for lk, lo in lows:
        for hk, hi in highs:
            if lo > hi or (lo == hi and "exclusive" in lk + hk):
                return f"{lk} {lo} {'>' if lo > hi else '='} {hk} {hi}"
            if node.get("type") == "integer":
                first = math.floor(lo) + 1 if lk.startswith("exclusive") else math.ceil(lo)
                last = math.ceil(hi) - 1 if hk.startswith("exclusive") else math.floor(hi)
                if first > last:
                    return f"no integer between {lk} {lo} and {hk} {hi}"
    return None


def contradictions(root) -> list[str]:
    """Keywords of one schema that no value satisfies together, each with the schema's
    JSON pointer (`minimum 5 > maximum 3 at #/properties/age`): what an empty constraint
    names when it is refused (TokenAutomaton.require_output). Local to one schema
    object; contradictions across `allOf` branches or `$ref`s are not traced."""
    out, todo, seen = [], [(root, "#")], set()
    if root is False:
        return ["the schema is false at #"]
    while todo:
        node, ptr = todo.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        found = []
        if node.get("not") is True or node.get("not") == {}:
            found.append(f"not {json_text(node['not'])} excludes every value")
        if _only(node, ("number",)) and (b := _number_bounds(node)):
            found.append(b)
        for lo_k, hi_k, ty in (("minLength", "maxLength", "string"), ("minItems", "maxItems", "array"),
                               ("minContains", "maxContains", "array"),
                               ("minProperties", "maxProperties", "object")):
            lo, hi = node.get(lo_k), node.get(hi_k)
            if _only(node, (ty,)) and _is_count(lo) and _is_count(hi) and lo > hi:
                found.append(f"{lo_k} {lo} > {hi_k} {hi}")
        req = node.get("required")
        if _only(node, ("object",)) and isinstance(req, list):
            props, pats = node.get("properties") or {}, node.get("patternProperties") or {}
            for k in req:
                if not isinstance(k, str):
                    continue
                if props.get(k) is False:
                    found.append(f"required key {k!r} has the schema false in properties")
                elif node.get("additionalProperties") is False and k not in props and not _pattern_hits(pats, k):
                    found.append(f"required key {k!r} not allowed by additionalProperties: false")
            mx = node.get("maxProperties")
            if _is_count(mx) and len(set(req)) > mx:
                found.append(f"{len(set(req))} required keys > maxProperties {mx}")
        for kw in ("const", "enum"):
            if kw in node and isinstance(node.get("type"), (str, list)):
                values = [node[kw]] if kw == "const" else node[kw] if isinstance(node[kw], list) else None
                if values is not None and not any(_of_type(v, node["type"]) for v in values):
                    what = f"const {json_text(node[kw])} is not" if kw == "const" else "no value of enum is"
                    found.append(f"{what} of type {json_text(node['type'])}")
        if (clash := _types_apart(node)) is not None:
            found.append(clash)
        out += [f"{f} at {ptr}" for f in found]
        todo.extend(reversed(list(_subschemas(node, ptr))))
    return out


def _types_apart(node: dict) -> str | None:
    """'type "string" and allOf/1's type "integer" have no value in common', where node's
    `type` and its allOf branches' leave no type (integer within number)."""
    def names(ty):
        ts = {ty} if isinstance(ty, str) else set(ty) if isinstance(ty, list) else None
        return None if ts is None else ts | ({"integer"} if "number" in ts else set())
    said = [("type", node["type"])] if "type" in node else []
    if isinstance(node.get("allOf"), list):
        said += [(f"allOf/{i}'s type", b["type"]) for i, b in enumerate(node["allOf"])
                 if isinstance(b, dict) and "type" in b]
    sets = [(w, t, names(t)) for w, t in said]
    sets = [x for x in sets if x[2] is not None]
    if len(sets) < 2 or set.intersection(*(x[2] for x in sets)):
        return None
    return " and ".join(f"{w} {json_text(t)}" for w, t, _ in sets) + " have no value in common"


def json_text(v) -> str:
    return json.dumps(v, ensure_ascii=False)[:80]


def _pattern_hits(pats: dict, key: str) -> bool:
    """Whether a patternProperties pattern may match key (an unreadable one may)."""
    for p in pats:
        try:
            if re.search(p, key):
                return True
        except (re.error, TypeError):
            return True
    return False


def _of_type(v, ty) -> bool:
    names = [ty] if isinstance(ty, str) else ty
    kinds = {"null": v is None, "boolean": type(v) is bool, "object": isinstance(v, dict),
             "array": isinstance(v, list), "string": isinstance(v, str),
             "number": type(v) in (int, float), "integer": type(v) is int or (type(v) is float and v.is_integer())}
    return any(kinds.get(t, True) for t in names if isinstance(t, str))
