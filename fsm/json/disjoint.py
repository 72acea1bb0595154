"""Whether the branches of a oneOf (or anyOf) can hold together: the reading the
compiler makes before taking complements (docs/json-schema.md, "Emptiness").
Each function takes the compiler (`comp`: its $ref resolution, its memo of listed values
and key matches) and plain schema dicts; nothing here builds terms but `_allows_none`'s
propertyNames.

>>> from structgen.fsm.json.schema import JsonTermBuilder, _Compiler
>>> comp = _Compiler({}, JsonTermBuilder())
>>> disjoint(comp, {}, [{"type": "string"}, {"type": "object", "required": ["a"]}])
True
>>> sorted(types_of(comp, {"anyOf": [{"const": 1}, {"type": "string"}]}))
['number', 'string']
"""
from __future__ import annotations

import json

from ..core.errors import RegexError
from .keywords import _ANNOTATIONS, _OBJECT_KW, _beside_ref, _names_type, _schema_keys
from .merge import _common_values, _json_type, _well_typed
from .source import JsonTermSource
from .strings import encode_string, string_text

# keywords that assert nothing: annotations, and OpenAPI's `discriminator` (a hint that
# names the property telling a oneOf's branches apart; validators ignore it), so that a
# `{discriminator, oneOf}` wrapper reads as its branches
_SILENT = _ANNOTATIONS | {"discriminator"}


def scalar_overlaps(comp, node, subs) -> bool:
    """Whether the oneOf branches that need complements (group_ways) hold no objects or
    arrays, their types known: their complements meet no container, so nothing below
    needs every key slotted."""
    for g, way in group_ways(comp, node, subs):
        types = [types_of(comp, subs[i]) for i in g]
        if way == "complement" and (None in types or {"object", "array"} & set().union(*types)):
            return False
    return True


def group_ways(comp, node, subs) -> list:
    """node's oneOf branches `subs` by type group (overlaps; all in one where a branch's
    types are unknown), each as (indexes, how exactly one of them holds): "union"
    (one branch, or disjoint), "keys" (keys_apart: each narrowed, then a union) or
    "complement". Exactly one branch holds iff exactly one of its group does, so a
    group's way is its own whatever the other groups' (two strings that overlap beside
    recursive objects told apart by their `type`)."""
    out = []
    for g in overlaps(comp, subs) or [list(range(len(subs)))]:
        x = [subs[i] for i in g]
        out.append((g, "union" if len(g) == 1 or disjoint(comp, node, x) else
                    "keys" if keys_apart(comp, x) else "complement"))
    return out


def pairwise_apart(sets) -> bool:
    """Whether no two of `sets` (of types, of listed values) share a member."""
    return sum(map(len, sets)) == len(set().union(*sets))


def keys_apart(comp, subs) -> bool:
    """Whether the branches `subs` are objects that take only keys they name
    (closed_keys) and no key two of them allow: then a value of two is `{}` or a
    non-object (where both are untyped), which the compiler narrows each branch
    against (_Compiler._keys_narrowed), so that the oneOf is a union: items keyed by
    `on ...`, `to ...`, `try` or `else` (patterns), a step or `{as, steps}`."""
    ks = [closed_keys(comp, s) for s in subs]
    if None in ks:
        return False
    src = None
    for i, (da, pa, _, _) in enumerate(ks):
        for db, pb, _, _ in ks[i + 1:]:
            if da & db or any(comp._matches(t, encode_string(k)) for d, ps in ((da, pb), (db, pa))
                              for k in d for t in ps):
                return False
            for p in pa:
                for q in pb:
                    src = src or JsonTermSource(comp.tb)
                    if not src.is_empty(comp.tb.intersect([p, q])):
                        return False
    return True


def closed_keys(comp, s) -> tuple | None:
    """(its declared keys, its key patterns' terms, whether it holds `{}`, whether it
    holds every non-object (untyped)) of a schema of object keywords whose objects take
    no other key (additionalProperties false); None for another schema, or a pattern
    the compiler cannot read (refused where it compiles)."""
    s = deref(comp, s)
    if not isinstance(s, dict) or s.get("additionalProperties") is not False \
            or not _schema_keys(s) - _SILENT <= set(_OBJECT_KW) | {"type"} \
            or s.get("type", "object") not in ("object", ["object"]):
        return None
    props, pats, req = s.get("properties", {}), s.get("patternProperties", {}), s.get("required", [])
    if not isinstance(props, dict) or not isinstance(pats, dict) or not isinstance(req, list):
        return None
    try:
        terms = [comp.st.search(p) for p in pats]
    except RegexError:
        return None
    return ({k for k, v in props.items() if v is not False}, terms, not req and not s.get("minProperties"),
            "type" not in s)


def overlaps(comp, subs) -> list | None:
    """oneOf branches grouped by types in common (connected: a branch of objects
    and strings joins both), as lists of indexes; None where some branch's types are
    unknown. Exactly one branch holds iff exactly one of its group does: two string
    patterns beside an object whose values recurse take complements of the strings
    only."""
    types = [types_of(comp, s) for s in subs]
    if None in types:
        return None
    groups: list = []  # (types, indexes)
    for i, t in enumerate(types):
        joined = [g for g in groups if g[0] & t]
        merged = (set(t).union(*(g[0] for g in joined)), sorted([i] + [j for g in joined for j in g[1]]))
        groups = [g for g in groups if not g[0] & t] + [merged]
    return [g[1] for g in groups]


def deref(comp, s, depth: int = 0):
    while isinstance(s, dict) and "$ref" in s and not _beside_ref(s) and depth < 50:
        s = comp._resolve(s, s["$ref"])
        depth += 1
    return s


def types_of(comp, s, seen: frozenset = frozenset()) -> set | None:
    """The JSON types s's instances may have (integer counts as number), or None
    where unknown: from type, const, enum, $ref, and the branches of anyOf/oneOf
    (their union) and allOf (their intersection), as in a oneOf of oneOfs of strings,
    objects and arrays."""
    s = deref(comp, s)
    if s is False:
        return set()
    if not isinstance(s, dict) or id(s) in seen:  # (a cycle of branches: unknown)
        return None
    seen = seen | {id(s)}
    out = None
    if "type" in s:
        ty = s["type"] if isinstance(s["type"], list) else [s["type"]]
        out = {"number" if t == "integer" else t for t in ty}
    vals = [s["const"]] if "const" in s else s.get("enum") if isinstance(s.get("enum"), list) else None
    if vals is not None:
        vt = {_json_type(v) for v in vals}
        out = vt if out is None else out & vt
    if "$ref" in s:
        r = types_of(comp, comp._resolve(s, s["$ref"]), seen)
        if r is not None:
            out = r if out is None else out & r
    for kw in ("anyOf", "oneOf"):
        if isinstance(s.get(kw), list) and s[kw]:
            ts = [types_of(comp, b, seen) for b in s[kw]]
            if None not in ts:
                r = set().union(*ts)
                out = r if out is None else out & r
    for b in s.get("allOf", []) if isinstance(s.get("allOf"), list) else []:
        r = types_of(comp, b, seen)
        if r is not None:
            out = r if out is None else out & r
    return out


def _disc_values(comp, s, prop, given: bool = False) -> set | None:
    """The values branch s lists for its property `prop`, where its objects have it
    (s requires it, or the schema beside the oneOf does: `given`), else None."""
    s = deref(comp, s)
    if not isinstance(s, dict):
        return None
    if "$ref" in s:
        inner = _disc_values(comp, comp._resolve(s, s["$ref"]), prop, given)
        if inner is not None:
            return inner
    if not given and prop not in s.get("required", []) or not _names_type(s.get("type", "object"), "object"):
        return None
    p = deref(comp, s.get("properties", {}).get(prop))
    if not isinstance(p, dict):
        return None
    if "const" in p:
        return {json.dumps(p["const"], sort_keys=True)}
    if isinstance(p.get("enum"), list):
        return {json.dumps(v, sort_keys=True) for v in p["enum"]}
    return None


def disjoint(comp, node, subs) -> bool:
    """Whether no value holds two of the branches `subs` of node's oneOf (or anyOf):
    their types apart, a discriminator (a property that each branch, or node,
    requires, whose listed values are apart), or pairs apart (_apart). Tests on an
    object's properties hold on every value of another type: they tell branches apart
    only where node, or each branch, holds objects only (an untyped `{required: [k],
    properties: {k: {const: 1}}}` holds on 5)."""
    types = [types_of(comp, s) for s in subs]
    objects = all(t is not None and t <= {"object"} for t in types) or (
        "type" in node and _well_typed(node["type"]) and types_of(comp, {"type": node["type"]}) == {"object"})
    if None not in types and pairwise_apart(types):
        return True
    disc = node.get("discriminator", {}).get("propertyName") if isinstance(node.get("discriminator"), dict) else None
    cands = [disc] if disc else []
    first = deref(comp, subs[0])
    if isinstance(first, dict):
        if "$ref" in first:
            first = comp._resolve(first, first["$ref"])
        if isinstance(first, dict):
            cands += [k for k in first.get("required", []) if k not in cands]
    # (a key the schema beside the oneOf requires: cmake-presets' `version`, whose
    # value picks one of five closed branches)
    given = node.get("required") if isinstance(node.get("required"), list) else []
    given = [k for k in given if isinstance(k, str)]
    cands += [k for k in given if k not in cands]
    for prop in cands if objects else ():
        vals = [_disc_values(comp, s, prop, prop in given) for s in subs]
        if None not in vals and pairwise_apart(vals):
            return True
    info = [[(b, types_of(comp, b), closed_object(comp, b)) for b in _branches(comp, s)] for s in subs]
    return all(_apart(comp, x, y, objects) for i, xs in enumerate(info) for ys in info[i + 1:]
               for x in xs for y in ys)


def _branches(comp, s, depth: int = 0) -> list:
    """s, or where s is only a union (anyOf / oneOf and annotations) its branches', flat:
    a value of s holds one of them, so two schemas are apart where every branch of one
    is apart from every branch of the other (a oneOf of two oneOfs of objects told
    apart by a required `base` that one side allows and the other does not)."""
    s = deref(comp, s)
    if depth < 8 and isinstance(s, dict) and len(kw := _schema_keys(s) - _SILENT) == 1 \
            and (k := next(iter(kw))) in ("oneOf", "anyOf") and isinstance(s[k], list) and s[k]:
        return [b for x in s[k] for b in _branches(comp, x, depth + 1)]
    return [s]


def _apart(comp, x: tuple, y: tuple, objects: bool) -> bool:
    """Whether schemas a and b (x, y: (schema, its types (_types_of), _closed_object))
    hold no value in common: types apart, or a schema that requires a key beside a
    closed object that does not allow it (a closed `{datum}` beside an open
    `{signal}`), or a closed object that holds a key (required, minProperties) beside
    an object schema that allows none of its keys (one operator key, or any keys but
    the operators by propertyNames); where only objects count (`objects`, or a and b
    hold objects only), a required property's listed values or types that the other
    excludes (`when: {enum: [delayed]}` required, or `when: {not: {enum: [delayed]}}`;
    a `val` number or one of three strings)."""
    (a, ta, ca), (b, tb, cb) = x, y
    if ta is not None and tb is not None and not ta & tb:
        return True
    objects = objects or (ta is not None and tb is not None and ta | tb <= {"object"})  # (a value of both is one)
    if ca is not None and any(k not in ca[1] for k in (cb[0] if cb is not None else required_keys(comp, b))) \
            or cb is not None and any(k not in cb[1] for k in (ca[0] if ca is not None else required_keys(comp, a))):
        return True  # (a value of the closed one is an object, without the key)
    if any(c is not None and c[2] and _allows_none(comp, o, c[1]) for c, o in ((ca, b), (cb, a))):
        return True
    return objects and (_values_apart(comp, a, b) or _values_apart(comp, b, a))


def required_keys(comp, s) -> list:
    """The keys schema s requires of its objects (its own `required`, through $refs)."""
    s = deref(comp, s)
    r = s.get("required", []) if isinstance(s, dict) else []
    return r if isinstance(r, list) else []


def _values_apart(comp, a, b) -> bool:
    """Whether an object of a has a required property whose values (listed, or their
    types) b's property excludes: none of them listed by b, all of them under b's `not`,
    none of their types b's, or b's property is false."""
    a, b = deref(comp, a), deref(comp, b)
    if not isinstance(a, dict) or not isinstance(b, dict) or not isinstance(a.get("required", []), list):
        return False
    pa, pb = a.get("properties", {}), b.get("properties", {})
    if not isinstance(pa, dict) or not isinstance(pb, dict):
        return False
    for k in a.get("required", []):
        va, other = comp._listed_values(pa.get(k, True)), deref(comp, pb.get(k, True))
        if other is False:  # (b has no such key)
            return True
        if not isinstance(other, dict):
            continue
        ta, tb = types_of(comp, pa.get(k, True)), types_of(comp, other)
        if ta is not None and tb is not None and not ta & tb:
            return True
        if va is None:
            continue
        if _schema_keys(other) - _SILENT == {"not"}:
            out = comp._listed_values(other["not"])
            if out is not None and len(_common_values([va, out])) == len(_common_values([va])):
                return True  # (every value a allows, b's `not` refuses)
        elif (vb := comp._listed_values(other)) is not None and not _common_values([va, vb]):
            return True
    return False


def _allows_none(comp, s, keys) -> bool:
    """Whether no object of schema s holds any of `keys`: each has properties false,
    fails s's propertyNames, or s is closed without it."""
    s = deref(comp, s)
    if not isinstance(s, dict):
        return False
    props = s.get("properties", {}) if isinstance(s.get("properties", {}), dict) else {}
    closed = closed_object(comp, s)
    names = comp.value(s["propertyNames"], 0) if s.get("propertyNames", True) is not True else None
    return all(props.get(k) is False or (closed is not None and k not in closed[1])
               or (names is not None and not comp._matches(names, string_text(k))) for k in keys)


def closed_object(comp, s) -> tuple | None:
    """(required keys, the only keys allowed, whether each object holds a key) of a
    schema that holds objects only and
    no undeclared key (additionalProperties false, no patternProperties), else None.
    Two such branches are disjoint where one requires a key the other does not
    allow: a oneOf of a job that needs `runs-on` and one that needs `uses`, each
    without the other's key."""
    s = deref(comp, s)
    while isinstance(s, dict) and len(kw := _schema_keys(s) - _SILENT) == 1 \
            and (k := next(iter(kw))) in ("oneOf", "anyOf", "allOf") and isinstance(s[k], list) and len(s[k]) == 1:
        s = deref(comp, s[k][0])  # (a wrapper of one branch)
    if not isinstance(s, dict) or types_of(comp, s) != {"object"} \
            or s.get("additionalProperties") is not False or s.get("patternProperties") \
            or not isinstance(s.get("properties", {}), dict) or not isinstance(s.get("required", []), list):
        return None
    props = s.get("properties", {})
    some = bool(s.get("required")) or s.get("minProperties", 0) >= 1  # (holds a key)
    return s.get("required", []), {k for k, v in props.items() if v is not False}, some
