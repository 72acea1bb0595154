"""allOf branches merged into one schema (their common values, the tightest string and
number bounds, array items: _merged_scalars, _merged_arrays), the values a schema lists
(_finite_values), and the tests on JSON values they read: a value's type, membership of
a `type`, equality as JSON Schema compares values; a value's canonical text
(canonical_json). Plain functions of schema dicts and values; the merges that read the
compiler are fsm/json/allof.py's.
"""
from __future__ import annotations

import json
from decimal import Decimal

from .keywords import (
    _ANNOTATIONS,
    _FAMILIES,
    _KEYWORDS,
    _NUMBER_KW,
    _STRING_KW,
    _TYPED_KW,
    _TYPES,
    _names_type,
    _schema_keys,
)
from .numbers import to_decimal

# keywords that may stand beside `type` and `enum` for the enum to be filtered by type
_SCALAR_KW = frozenset(_STRING_KW + _NUMBER_KW + ("type", "format"))
_TYPED_ENUM_KEYS = {"type", "enum", "title", "description", "$comment", "default", "examples",
                    "deprecated", "readOnly", "writeOnly"}


def _well_typed(types) -> bool:
    """A `type` value fsm/json/schema.py reads (absent, a type name, a list of them)."""
    names = [types] if isinstance(types, str) else types if isinstance(types, list) else None
    return types is None or (bool(names) and all(t in _TYPES or t == "integer" for t in names))


def _types_meet(a, b) -> list:
    """The JSON types that both `type` values (a name or a list) name, in a's order:
    integer where one says number and the other integer."""
    a, b = ([x] if isinstance(x, str) else list(x) for x in (a, b))
    return [t if t in b else "integer" for t in a if t in b or {t} | {"integer", "number"} <= set(b) | {t}]


def _has_type(v, types) -> bool:
    """v is an instance of the (well-typed) schema `type` value `types` (None: any)."""
    if types is None:
        return True
    for t in [types] if isinstance(types, str) else types:
        if t == "integer":
            if type(v) is int:
                return True
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and \
                    v not in (float("inf"), float("-inf")) and to_decimal(v) == to_decimal(v).to_integral_value():
                return True
        elif t in _TYPES and _json_type(v) == t:
            return True
    return False


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _scalar_key(v):
    """A hashable key of a scalar JSON value, equal for values JSON Schema compares
    equal (1 and 1.0); None for arrays and objects."""
    if v is None or isinstance(v, (bool, str)):
        return (type(v).__name__, v)
    if isinstance(v, (int, float)):
        return ("number", to_decimal(v).normalize()) if v == v and v not in (float("inf"), float("-inf")) else None
    return None


def _common_values(lists: list) -> list:
    """The values of lists[0] that every other list holds too (JSON equality), each once."""
    keys = [{_scalar_key(v) for v in vs} for vs in lists[1:]]
    out, seen = [], set()
    for v in lists[0]:
        k = _scalar_key(v)
        if k is None:  # (containers: compared one by one, rare)
            if all(any(_json_equal(v, w) for w in o) for o in lists[1:]) and not any(_json_equal(v, w) for w in out):
                out.append(v)
        elif k not in seen and all(k in ks for ks in keys):
            seen.add(k)
            out.append(v)
    return out


def _json_equal(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


_ARRAY_MERGEABLE = frozenset(("type", "items", "minItems", "maxItems", "uniqueItems")) | _ANNOTATIONS


def _merged_arrays(branches: list) -> dict | None:
    """allOf branches of array keywords (items as one schema) as one array schema: the
    items' allOf, the tightest min/maxItems; None where some branch says more."""
    if not all(_schema_keys(b) <= _ARRAY_MERGEABLE and not isinstance(b.get("items"), list)
               and _names_type(b.get("type", "array"), "array") for b in branches):
        return None
    items = [b["items"] for b in branches if "items" in b]
    return {k: v for k, v in (
        ("type", "array" if any("type" in b for b in branches) else None),
        ("items", (items[0] if len(items) == 1 else {"allOf": items}) if items else None),
        ("minItems", max((b["minItems"] for b in branches if "minItems" in b), default=None)),
        ("maxItems", min((b["maxItems"] for b in branches if "maxItems" in b), default=None)),
        ("uniqueItems", any(b.get("uniqueItems") is True for b in branches) or None))
        if v is not None}


def _merged_scalars(branches: list) -> dict | None:
    """allOf branches of string / number keywords as one schema holding them all:
    {"type": "integer"} and {"maximum": 1}. A keyword in several branches must have the
    same value, or be a bound (the tightest is kept)."""
    out: dict = {}
    for b in branches:
        for k, v in b.items():
            if k in _ANNOTATIONS or k not in _KEYWORDS:  # (vendor keys assert nothing)
                continue
            if k not in _SCALAR_KW or (k.startswith("exclusiveM") and type(v) is bool):
                return None  # (draft-04's flag applies to its own branch's bound)
            if k in out and not _json_equal(out[k], v):
                tighter = _TIGHTER.get(k)
                if tighter is None or not all(type(x) in (int, float) for x in (v, out[k])):
                    return None
                v = tighter(out[k], v)
            out[k] = v
    return out or None


_TIGHTER = {"minimum": max, "exclusiveMinimum": max, "minLength": max,
            "maximum": min, "exclusiveMaximum": min, "maxLength": min}


def _finite_values(s) -> list | None:
    """The values a schema (dereferenced) accepts when it lists them: const, enum
    (beside `type` at most, and keywords of types none of them has: `additionalItems`
    beside an enum of strings) or the type boolean / null; None for
    any other schema."""
    if not isinstance(s, dict):
        return None
    stray = _schema_keys(s) - _TYPED_ENUM_KEYS - {"const"}
    if stray and not ("const" in s or "enum" in s) or not stray <= _TYPED_KW:
        return None
    ty = s.get("type")
    if not _well_typed(ty):
        return None
    if "const" in s:
        vals = [s["const"]] if "enum" not in s else [v for v in s["enum"] if _json_equal(v, s["const"])]
    elif isinstance(s.get("enum"), list):
        vals = s["enum"]
    elif ty is not None and set([ty] if isinstance(ty, str) else ty) <= {"boolean", "null"}:
        vals = [True, False, None]
    else:
        return None
    vals = [v for v in vals if _has_type(v, ty)]
    if any(k in _FAMILIES[_json_type(v)] for v in vals if _json_type(v) in _FAMILIES for k in stray):
        return None
    return vals


def _number_text(v) -> str:
    if isinstance(v, int):
        return str(v)
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError("NaN and infinity are not JSON")
    if v.is_integer():  # (an integral value is written as an integer: the one text every
        # term that takes it accepts; -0.0 is 0, as JSON Schema compares numbers mathematically)
        return str(int(v))
    return format(Decimal(repr(v)), "f")


def canonical_json(value, key_order, indent: int | None = None) -> str:
    """The canonical text of a JSON value with object keys in `key_order` (None: as
    they are; see docs/json-schema.md, and CompiledSchema.canonical);
    indent gives a flexible-whitespace variant (json.dumps-like indentation)."""
    order = {k: i for i, k in enumerate(key_order or ())}
    return _canonical(value, 0, None if key_order is None else order, len(order), indent)


def _canonical(v, level: int, order: dict | None, big: int, indent: int | None) -> str:
    """canonical_json's work (a function of the module, not a closure: a recursive
    closure is a reference cycle, and enum checks make tens of thousands per compile:
    hundreds of thousands of objects of cyclic garbage for a large schema)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return _number_text(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    nl = "" if indent is None else "\n" + " " * (indent * (level + 1))
    end = "" if indent is None else "\n" + " " * (indent * level)
    colon = ":" if indent is None else ": "
    if isinstance(v, list):
        if not v:
            return "[]"
        return "[" + ",".join(nl + _canonical(x, level + 1, order, big, indent) for x in v) + end + "]"
    keys = list(v) if order is None else sorted(v, key=lambda k: order.get(k, big))
    if not keys:
        return "{}"
    return "{" + ",".join(nl + json.dumps(k, ensure_ascii=False) + colon
                          + _canonical(v[k], level + 1, order, big, indent) for k in keys) + end + "}"
