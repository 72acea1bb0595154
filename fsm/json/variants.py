"""The parts of an object schema that fsm/json/schema.py writes as a union of variants,
not as an intersection: presence parts, which only say which of its own keys an object
has (_presence_parts, read as formulas over the keys), and value conditions, an `if`
that tests one property's value (_value_conditions). Found here, on schema dicts;
_Compiler._presence_variants and _condition_variants make the variants.
"""
from __future__ import annotations

import functools

from .keywords import _ANNOTATIONS, _names_type, _schema_keys


def _own_keys(node: dict) -> set:
    """An object schema's own keys: its properties, required and dependentRequired keys
    (the keys that have slots where objects slot their own keys only)."""
    own = set(node.get("properties", {})) | set(node.get("required", []))
    for k, deps in node.get("dependentRequired", {}).items():
        own.add(k)
        own.update(deps)
    return own


# Keywords of a "presence" schema: one that only says which keys an object has
# (`{"required": ["a"]}`, `{"not": {"required": ["b"]}}`, oneOf/anyOf/allOf of such);
# a property listed beside them must allow any value and be required there.
_PRESENCE_KW = frozenset(("required", "allOf", "anyOf", "oneOf", "not", "properties", "title",
                          "description", "$comment"))
PRESENCE_MAX_KEYS = 16  # keys of presence parts written as variants, and
PRESENCE_MAX_VARIANTS = 64  # the sets of them that satisfy the parts, at most (a root of
# exactly one of 8 keys: 8 variants; `anyOf` of 8 `required`, 255, is an intersection)


def _presence(s):
    """s as a formula over which keys an object has: ("req", keys), ("all" | "any" |
    "one", parts), ("not", part); None where s says more than that."""
    if s is True or s == {}:
        return ("all", ())
    if not isinstance(s, dict) or not _schema_keys(s) <= _PRESENCE_KW:  # (vendor keys aside)
        return None
    props, req = s.get("properties", {}), s.get("required", [])
    if not isinstance(props, dict) or not isinstance(req, list) or not all(isinstance(k, str) for k in req):
        return None  # (a malformed one: compiled, and refused by _check_values)
    if any(v is not True and v != {} for v in props.values()) or not set(props) <= set(req):
        return None  # (a property it names otherwise would be a key of its own)
    parts = [("req", frozenset(req))]
    for kw, op in (("allOf", "all"), ("anyOf", "any"), ("oneOf", "one")):
        if kw in s:
            subs = [_presence(x) for x in s[kw]] if isinstance(s[kw], list) and s[kw] else [None]
            if None in subs:
                return None
            parts.append((op, tuple(subs)))
    if "not" in s:
        inner = _presence(s["not"])
        if inner is None:
            return None
        parts.append(("not", inner))
    return ("all", tuple(parts))


def _holds(f, keys: frozenset) -> bool:
    """Whether an object with exactly the keys `keys` (of those f names) satisfies f."""
    op, arg = f
    if op == "req":
        return arg <= keys
    if op == "not":
        return not _holds(arg, keys)
    n = sum(_holds(x, keys) for x in arg)
    return n == len(arg) if op == "all" else n >= 1 if op == "any" else n == 1


def _partial(f, have: frozenset, lack: frozenset):
    """f on an object known to have the keys `have` and to lack those in `lack`: True,
    False, or None where the other keys decide."""
    op, arg = f
    if op == "req":
        return True if arg <= have else False if arg & lack else None
    if op == "not":
        r = _partial(arg, have, lack)
        return None if r is None else not r
    got = [_partial(x, have, lack) for x in arg]
    yes, unknown = got.count(True), got.count(None)
    if op == "all":
        return False if False in got else None if unknown else True
    if op == "any":
        return True if yes else None if unknown else False
    return False if yes > 1 else None if unknown else yes == 1  # one


@functools.lru_cache(maxsize=1024)
def _presence_sets(f, keys: tuple) -> tuple | None:
    """The sets of `keys` (those formula f names, sorted) with which an object satisfies
    f, found depth first and pruned where f is already decided false; None past
    PRESENCE_MAX_VARIANTS of them."""
    out: list = []

    def visit(i: int, have: frozenset, lack: frozenset) -> bool:
        r = _partial(f, have, lack)
        if r is False:
            return True
        if i == len(keys):
            out.append(have)
            return len(out) <= PRESENCE_MAX_VARIANTS
        return visit(i + 1, have, lack | {keys[i]}) and visit(i + 1, have | {keys[i]}, lack)
    return tuple(out) if visit(0, frozenset(), frozenset()) else None


def _required_only(v) -> frozenset | None:
    """The keys a dependency's value (a list of keys, a schema) requires where that is
    all it says (a list, `{required: [...]}`, true); None for any other value. Such a
    dependency is a dependentRequired one (_Compiler._object: unions, no meeting)."""
    if isinstance(v, list):
        return frozenset(v) if all(isinstance(k, str) for k in v) else None
    f = _presence(v)
    return None if f is None or len(f[1]) > 1 else f[1][0][1] if f[1] else frozenset()


def _dependency(v):
    """A dependency's value (a list of keys, a schema) as a formula over which keys the
    object has where its key is present; None where it says more than that, or nothing."""
    if isinstance(v, list):
        return ("req", frozenset(v)) if v and all(isinstance(k, str) for k in v) else None
    f = ("any", ()) if v is False else _presence(v)
    return None if f == ("all", ()) else f


def _named(f) -> set:
    """The keys formula f names."""
    op, arg = f
    if op == "req":
        return set(arg)
    if op == "not":
        return _named(arg)
    return set().union(*(_named(x) for x in arg))


def _presence_parts(node: dict):
    """The parts of an object schema (`type: object`, or no `type`) that only say which
    keys it has (anyOf / oneOf / not / allOf branches that are presence schemas, and
    dependencies that are; at most PRESENCE_MAX_KEYS keys, and PRESENCE_MAX_VARIANTS
    sets of them that satisfy the parts): (those keywords, the formula they make
    together, node without them); None where there are none. _Compiler writes the node
    as the alternation of its variants, one per allowed set of those keys (required /
    forbidden), not as an intersection with complements (`oneOf: [{required:
    [directory]}, {required: [directories]}]`: an emptiness search at each new state)."""
    if not isinstance(node, dict) or not _names_type(node.get("type", "object"), "object") \
            or not ("anyOf" in node or "oneOf" in node or "not" in node or "allOf" in node
                    or "dependentRequired" in node or "dependentSchemas" in node or "dependencies" in node):
        return None
    taken, parts, rest = [], [], dict(node)
    for kw, op in (("anyOf", "any"), ("oneOf", "one")):
        if isinstance(node.get(kw), list):
            subs = [_presence(x) for x in node[kw]]
            if None not in subs:
                taken.append(kw)
                parts.append((op, tuple(subs)))
                del rest[kw]
    if "not" in node and (inner := _presence(node["not"])) is not None:
        taken.append("not")
        parts.append(("not", inner))
        del rest["not"]
    if isinstance(node.get("allOf"), list):
        subs = [_presence(x) for x in node["allOf"]]
        if any(f is not None for f in subs):
            taken.append("allOf")
            parts += [f for f in subs if f is not None]
            others = [x for x, f in zip(node["allOf"], subs) if f is None]
            if others:
                rest["allOf"] = others
            else:
                del rest["allOf"]
    # dependencies that say which keys the object has: "its key absent, or the keys
    # present / the presence schema holding" (rules of `match` without
    # `begin`, `begin` with `end` or `while`...). Lists of keys alone, five keys or fewer,
    # are unions already (_Compiler._object); with more, or beside other presence parts,
    # variants here too
    deps: dict = {}  # kw -> {key: formula}
    for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
        if isinstance(node.get(kw), dict):
            got = {k: _dependency(v) for k, v in node[kw].items()}
            deps[kw] = {k: f for k, f in got.items() if f is not None}
    plain = all(_required_only(node[kw][k]) is not None for kw, d in deps.items() for k in d)
    if not plain or (parts and any(deps.values())) or len({k for d in deps.values() for k in d}) > 5:
        for kw, got in deps.items():
            if got:
                taken.append(kw)
                parts += [("any", (("not", ("req", frozenset([k]))), f)) for k, f in got.items()]
                left = {k: v for k, v in node[kw].items() if k not in got}
                if left:
                    rest[kw] = left
                else:
                    del rest[kw]
    if not parts:
        return None
    f = ("all", tuple(parts))
    keys = _named(f)
    if len(keys) > PRESENCE_MAX_KEYS or _presence_sets(f, tuple(sorted(keys))) is None \
            or node.get("unevaluatedProperties", True) is not True and not keys <= _own_keys(node):
        # (a key of a branch's own, not node's, is evaluated by that branch only)
        return None
    return taken, f, rest


CONDITIONS_MAX = 16  # value conditions of one schema written as variants (16 outcomes at most:
# 2^4 for tests apart, or one per value where they test one required key for values apart)
CONDITIONS_ONE_KEY_MAX = 64  # but tests of one key for values apart: one outcome per test
# (and two more: none holds, and all where the key may be absent), so up to this many


def _condition(part, objects: bool = False):
    """An if/then/else whose `if` tests one property's value: {"if": {"properties": {k:
    test}, "required": [k]?}, "then": ..., "else": ...} -> (k, test, required, then,
    else); None for any other `if`, or none. Where the schema holds objects only
    (`objects`), the `if` may say `type: object` too."""
    c = part.get("if") if isinstance(part, dict) else None
    if isinstance(c, dict) and _schema_keys(c) - _ANNOTATIONS == {"anyOf"}:
        c = _absent_or(c["anyOf"]) or c
    if objects and isinstance(c, dict) and _names_type(c.get("type"), "object"):
        c = {k: v for k, v in c.items() if k != "type"}
    if not isinstance(c, dict) or not ("then" in part or "else" in part) \
            or not _schema_keys(c) <= {"properties", "required"} | _ANNOTATIONS:
        return None
    props, req = c.get("properties"), c.get("required", [])
    if not isinstance(props, dict) or len(props) != 1 or not isinstance(req, list):
        return None
    (key, test), = props.items()
    if not set(req) <= {key}:
        return None
    return key, test, bool(req), part.get("then", True), part.get("else", True)


def _absent_or(branches) -> dict | None:
    """`anyOf: [{not: {required: [k]}}, {required: [k], properties: {k: T}}]` (k absent,
    or its value T: jobs of one type) as what it is, {properties: {k: T}};
    None for other branches."""
    if not isinstance(branches, list) or len(branches) != 2 or not all(isinstance(b, dict) for b in branches):
        return None
    for absent, present in (branches, branches[::-1]):
        inner = absent.get("not")
        if _schema_keys(absent) - _ANNOTATIONS != {"not"} or not isinstance(inner, dict) \
                or _schema_keys(inner) - _ANNOTATIONS != {"required"} or not isinstance(inner["required"], list) \
                or len(inner["required"]) != 1:
            continue
        k = inner["required"][0]
        props = present.get("properties")
        if _schema_keys(present) - _ANNOTATIONS == {"required", "properties"} and present["required"] == [k] \
                and isinstance(props, dict) and list(props) == [k]:
            return {"properties": props}
    return None


def _value_conditions(node: dict):
    """node's if/then/else parts that test one property's value (_condition), its own
    and allOf branches that are only that: (their conditions, node without them); None
    where there are none. _Compiler writes node as the union of one variant per outcome
    of the tests, each holding `then` or `else` and the property's test or its
    negation: no complement of a whole object schema (`if: {properties: {interval:
    {const: cron}}}`: an emptiness search at each new state)."""
    if not isinstance(node, dict) or ("if" not in node and "allOf" not in node):
        return None
    found, rest = [], dict(node)
    objects = _names_type(node.get("type"), "object") or isinstance(node.get("allOf"), list) and any(
        isinstance(b, dict) and _names_type(b.get("type"), "object") for b in node["allOf"])
    if (c := _condition(node, objects)) is not None:
        found.append(c)
        for k in ("if", "then", "else"):
            rest.pop(k, None)
    if isinstance(node.get("allOf"), list):
        keep = []
        for b in node["allOf"]:
            plain = isinstance(b, dict) and _schema_keys(b) <= {"if", "then", "else"} | _ANNOTATIONS
            c = _condition(b, objects) if plain else None
            (keep if c is None else found).append(b if c is None else c)
        if len(keep) < len(node["allOf"]):
            rest["allOf"] = keep
            if not keep:
                del rest["allOf"]
    if not found or len(found) > CONDITIONS_ONE_KEY_MAX:  # (the outcomes are counted by the compiler)
        return None
    return found, rest
