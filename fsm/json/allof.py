"""allOf merged into one schema where the compiler can, instead of an intersection.

AllOfMerges is a part of _Compiler (its base class), kept here: the merges read and fill
the compiler's memos, resolve its $refs and compile subschemas (`self.value`). An allOf
as one schema (_merged_all_of), a $ref beside other keywords as one more branch
(_conjunction), an object beside an anyOf of objects (_union_distributed), and a recursion
met by types copied per type rather than intersected (_typed_copies, _ref_typed,
_per_type, _typed_union). The plain merges of schema dicts are fsm/json/merge.py's. Why
merges matter: docs/json-schema.md, "How a schema becomes a constraint".
"""
from __future__ import annotations

import collections
import json

from ..core.errors import RegexError
from ..core.terms import AND, NOT, NOTHING, Term
from .disjoint import deref, disjoint, types_of
from .keywords import (
    _ANNOTATIONS,
    _NUMBER_KW,
    _STRING_KW,
    _TYPES,
    _beside_ref,
    _idle_keywords,
    _names_type,
    _schema_keys,
)
from .merge import (
    _common_values,
    _finite_values,
    _has_type,
    _json_type,
    _merged_arrays,
    _merged_scalars,
    _types_meet,
    _well_typed,
    canonical_json,
)
from .strings import encode_string

_SCALAR_TYPES = frozenset(("string", "number", "boolean", "null"))  # (types_of's names)
# keywords that read each other within one schema: two schemas' are not one schema's
_READ_TOGETHER = (frozenset(("properties", "patternProperties", "additionalProperties")),
                  frozenset(("items", "prefixItems", "additionalItems")),
                  frozenset(("contains", "minContains", "maxContains")), frozenset(("if", "then", "else")))


class AllOfMerges:
    """The compiler's allOf merges (the module notes); _Compiler's base class."""

    _MERGEABLE = {"type", "properties", "required", "additionalProperties", "allOf", "title",
                  "description", "$comment", "default", "examples", "$schema", "$id", "id", "$defs",
                  "definitions", "deprecated", "readOnly", "writeOnly", "$anchor", "$dynamicAnchor"}

    # Keywords of one allOf branch that merging carries over as they are (each group in
    # at most one branch): none of them reads another keyword of its schema.
    _CARRIED = (("anyOf",), ("oneOf",), ("not",), ("if", "then", "else"), ("dependentRequired",),
                ("dependentSchemas",), ("dependencies",), ("minProperties",), ("maxProperties",),
                ("propertyNames",))

    def _conjunction(self, node: dict):
        """node's allOf merged into one schema (_merged_all_of), a `$ref` beside other
        keywords taken as one more branch of it (2020-12: both hold): `{"type": "object",
        "properties": {...}, "$ref": "base"}` is one object, not an intersection of two,
        which a recursive base could not be on the grammar path. None where it does not
        merge, and for a $ref with only a type its target has (_typed_ref: the target)."""
        if "$ref" not in node or not _beside_ref(node) or self._typed_ref(node):
            return self._merged_all_of(node) if "allOf" in node else None
        wrapped = self._ref_branch.get(id(node))
        if wrapped is None:
            ref = {"$ref": node["$ref"]}
            wrapped = {k: v for k, v in node.items() if k != "$ref"}
            wrapped["allOf"] = list(node.get("allOf", ())) + [ref]
            self._adopt(wrapped, node)
            self._adopt(ref, node)
            self._ref_branch[id(node)] = wrapped
            self._keep.append(wrapped)
        merged = self._merged_all_of(wrapped)
        return merged if merged is not None else self._typed_copies(node)

    def _typed_copies(self, node: dict):
        """{type: T, $ref: R, other keywords K} where R does not merge with T (R holds
        if/then, oneOf...), as anyOf, for each type t of T, R with its type narrowed to t
        and K beside it: the same instances as the intersection, R's keywords compiled
        once per type, where R met with T is an intersection that the grammar path cannot
        take when R recurses (`type: [integer, object]` beside a $ref to an untyped
        schema whose if/then branches recurse). R may be a
        $ref with a type itself (the types meet). None for other nodes."""
        if id(node) in self._copies:
            return self._copies[id(node)]
        out = None
        if "type" in node and _well_typed(node["type"]):
            types, _, target = self._ref_chain(node, node["type"])
            if isinstance(target, dict) and "$ref" not in target and _well_typed(target.get("type")):
                both = _types_meet(types, target.get("type", _TYPES))
                out = {"anyOf": [self._typed_copy(node, target, t) for t in both]
                       or [False]}  # (no type in common: no value holds both)
                self._adopt(out, node)
                self._ref_targets.add(id(node))  # (its recursion runs through the copies)
                self._keep.append(out)
        self._copies[id(node)] = out
        return out

    def _typed_copy(self, node: dict, target: dict, t: str) -> dict:
        """_typed_copies' schema for type t: target's keywords (none where it asserts
        nothing of t: an integer beside an object schema), type t, and node's own
        keywords that assert something of t."""
        idle = _idle_keywords({t})
        own = {k: node[k] for k in _beside_ref(node) - {"type"} - idle}
        if self._idle_of(target, t):
            v = {**own, "type": t}
        else:
            v = {k: x for k, x in target.items() if k not in _ANNOTATIONS}
            v["type"] = t
            if own:
                v["allOf"] = list(target.get("allOf", ())) + [own]
                self._adopt(own, node)
        self._adopt(v, target)
        return v

    def _ref_chain(self, node: dict, types) -> tuple:
        """node's $ref target, through targets that are a $ref with a type at most beside
        it themselves: (`types` met with theirs, the schema of the last $ref, the target)."""
        holder, target, hops = node, self._resolve(node, node["$ref"]), 0
        while isinstance(target, dict) and "$ref" in target and _beside_ref(target) <= {"type"} \
                and _well_typed(target.get("type")) and hops < 64:
            types = _types_meet(types, target.get("type", _TYPES))
            holder, target, hops = target, self._resolve(target, target["$ref"]), hops + 1
        return types, holder, target

    def _one_ref(self, node: dict):
        """allOf (beside notes only) whose branches are each a $ref with a type at most
        beside it, all to one schema R (through such $refs): `{type: the types they all
        name, $ref: R}` (_typed_copies takes it), not an intersection of R with itself,
        which the grammar path cannot take where R recurses (a recursive property
        declared in two branches); one plain $ref beside branches of
        notes only: that branch. None for other nodes."""
        if _beside_ref(node) != {"allOf"} or not isinstance(node["allOf"], list):
            return None
        asserting = [b for b in node["allOf"]
                     if b is not True and not (isinstance(b, dict) and _schema_keys(b) <= _ANNOTATIONS)]
        if len(asserting) == 1 and "$ref" not in node and isinstance(b := asserting[0], dict) and "$ref" in b \
                and not _beside_ref(b):
            return b  # (a $ref beside notes, whose target's if/then may recurse)
        if not any(isinstance(b, dict) and "type" in b for b in node["allOf"]):  # (no type: a plain merge)
            return None
        types, ends = _TYPES, []
        for b in node["allOf"]:
            if not (isinstance(b, dict) and "$ref" in b and _beside_ref(b) <= {"type"} and _well_typed(b.get("type"))):
                return None
            types, holder, x = self._ref_chain(b, _types_meet(types, b.get("type", _TYPES)))
            ends.append((b, holder, x))
        if not types:
            return False
        if any(x is not ends[0][2] for _, _, x in ends):
            return self._per_type(node, types, ends)
        out = {"type": types, "$ref": ends[-1][1]["$ref"]}
        self._adopt(out, ends[-1][1])  # (its $ref resolves from there)
        self._keep.append(out)
        return out

    def _per_type(self, node: dict, types: list, ends: list):
        """_one_ref's allOf whose $refs reach different schemas (`ends`: each branch, the
        last $ref of its chain, that schema), none a $ref and each typed, as anyOf, for
        each type t they all name, of the allOf of their copies for t (_typed_copy): a
        value that is an integer range or a number provider, each recursive. None where
        a target is not such a schema."""
        if not all(isinstance(x, dict) and "$ref" not in x and _well_typed(x.get("type")) for _, _, x in ends):
            return None
        out = {"anyOf": []}
        for t in types:
            parts = []
            for b, _, x in ends:  # (a copy's allOf beside the others: its value conditions seen)
                c = self._typed_copy(b, x, t)
                if isinstance(c.get("allOf"), list):
                    parts += c["allOf"]
                    c = {k: v for k, v in c.items() if k != "allOf"}
                    self._adopt(c, x)
                parts.append(c)
            each = {"allOf": parts}
            self._adopt(each, node)
            out["anyOf"].append(each)
        self._adopt(out, node)
        self._ref_targets.add(id(node))  # (its recursion runs through the copies)
        self._keep.append(out)
        return out

    def _idle_of(self, s, t: str, seen: frozenset = frozenset()) -> bool:
        """Whether schema s asserts nothing of values of type t (every one is valid): its
        keywords are notes, another type's or a `type` that names t, its allOf branches
        and if/then/else outcomes (whatever the `if`) are such schemas too, and so is
        one of its anyOf branches, its `not` holds no value of type t, one oneOf branch
        is and no other holds one, through $refs (False on a cycle: unknown)."""
        if s is True:
            return True
        if not isinstance(s, dict) or id(s) in seen:
            return False
        if seen:
            return self._idle_walk(s, t, seen | {id(s)})
        k = (id(s), t)  # (remembered from the top: asked per pair of a oneOf's branches, hadolint's 100)
        got = self._idle_memo.get(k)
        if got is None:  # (s kept beside its verdict: its id is not reused)
            got = self._idle_memo[k] = (s, self._idle_walk(s, t, frozenset((id(s),))))
        return got[1]

    def _idle_walk(self, s: dict, t: str, seen: frozenset) -> bool:
        """_idle_of of a schema object s, `seen` holding it."""
        idle = _idle_keywords({t})
        for k in _schema_keys(s) - _ANNOTATIONS - idle:
            if k == "$ref":
                ok = self._idle_of(self._resolve(s, s["$ref"]), t, seen)
            elif k == "type":
                ok = _well_typed(s[k]) and _types_meet([t], s[k]) == [t]
            elif k == "allOf" and isinstance(s[k], list):
                ok = all(self._idle_of(b, t, seen) for b in s[k])
            elif k == "anyOf" and isinstance(s[k], list):
                ok = any(self._idle_of(b, t, seen) for b in s[k])
            elif k == "not":
                ok = self._holds_none(s[k], t)
            elif k == "oneOf" and isinstance(s[k], list):  # (one branch takes them all, no other any)
                idle = [b for b in s[k] if self._idle_of(b, t, seen)]
                ok = len(idle) == 1 and all(b is idle[0] or self._holds_none(b, t) for b in s[k])
            elif k == "if":
                ok = all(self._idle_of(s.get(x, True), t, seen) for x in ("then", "else"))
            else:
                ok = k in ("then", "else") and "if" in s  # (read with the if)
            if not ok:
                return False
        return True

    def _holds_none(self, s, t: str) -> bool:
        """Whether schema s holds no value of type t, by its types (disjoint.types_of)."""
        held = types_of(self, s)
        return held is not None and ("number" if t == "integer" else t) not in held

    def _merged_all_of(self, node: dict):
        """allOf of plain object schemas (properties / required / additionalProperties /
        type object, and keywords carried over from one branch) or of plain array schemas
        (items / min-maxItems / uniqueItems / type array) merged into one schema: the same
        language as the intersection, but one object or array term instead of an AND of
        several (faster masks; an object's presence parts and value conditions then
        become variants). Nested allOf are flattened. None if not mergeable."""
        if id(node) in self._merged:
            return self._merged[id(node)]
        one = self._merged[id(node)] = self._one_ref(node)
        if one is not None:
            return one
        branches, todo, via_ref, seen = [], collections.deque([node]), False, set()
        while todo:
            first = todo.popleft()
            b = deref(self, first)
            via_ref |= b is not first
            if b is True or id(b) in seen:  # (a branch twice is once: types that inherit
                continue  # through allOf chains that meet would otherwise make thousands of branches)
            seen.add(id(b))
            if not isinstance(b, dict) or not isinstance(b.get("allOf", []), list):
                branches = None
                break
            branches.append({k: v for k, v in b.items() if k != "allOf"} if "allOf" in b else b)
            todo += b.get("allOf", [])
        typed = self._ref_typed(branches) if branches is not None else None
        if typed is not None:
            if via_ref:
                self._ref_targets.add(id(node))
            self._merged[id(node)] = typed
            return typed
        merged = None
        if branches is not None:
            merged = (self._distributed(branches, node) or self._merge_branches(branches)
                      or self._type_split(branches, node))
        if merged is not None:
            self._adopt(merged, node)
            if via_ref:  # unrolled, a recursion through the merged $ref counts here
                self._ref_targets.add(id(node))
        self._merged[id(node)] = merged
        self._keep.append(merged)
        return merged

    def _ref_typed(self, branches: list):
        """allOf branches of which one, R, holds a $ref beside other keywords (or is an
        anyOf of that one: `anyOf: [{$ref: common}]`), and the others keywords R
        does not hold (or, without a $ref, R holds a union and the others only types:
        _typed_union narrows it): R with them and the types they all name (`{type:
        [integer, object], $ref: numberProvider, properties: ...}` beside `{type:
        integer}`; an array's `additionalItems` beside an untyped recursive `common`),
        which _typed_copies compiles as R's target once per type, each with the keywords
        that assert something of it, where an intersection with the target could not be
        taken when it recurses. False where no type is in
        them all; None for other branches. Remembered, so that a recursion through it
        meets the same schema."""
        said = [b["anyOf"][0] if _schema_keys(b) - _ANNOTATIONS == {"anyOf"} and isinstance(b["anyOf"], list)
                and len(b["anyOf"]) == 1 and isinstance(b["anyOf"][0], dict) else b
                for b in branches if _schema_keys(b) - _ANNOTATIONS]
        refs = [b for b in said if "$ref" in b]
        if not refs:  # (else one union beside types only: web-types' string `name` beside a recursive oneOf)
            refs = [b for b in said if "anyOf" in b or "oneOf" in b]
            if len(refs) == 1 and any(b is not refs[0] and _schema_keys(b) - _ANNOTATIONS != {"type"} for b in said):
                return None
        if len(refs) != 1 or len(said) == 1 or id(refs[0]) not in self.base_of:  # (not a copy without its allOf)
            return None
        r, extra, types = refs[0], {}, list(_TYPES)
        for b in said:
            if not _well_typed(b.get("type")):
                return None
            types = _types_meet(types, b.get("type", _TYPES))
            if b is not r:
                for k in _schema_keys(b) - _ANNOTATIONS - {"type"}:
                    if k in extra or k in r or k == "allOf":
                        return None
                    extra[k] = b[k]
        if any(r.keys() & g and extra.keys() & g for g in _READ_TOGETHER) \
                or not (r.keys() | extra.keys()).isdisjoint(("unevaluatedProperties", "unevaluatedItems")):
            return None  # (one's additionalProperties beside the other's properties: not one schema)
        if not types:
            return False
        typed = any("type" in b for b in said)  # (else no type list of all six for _typed_copies to split)
        key = (id(r), tuple(types) if typed else None, tuple(sorted((k, id(v)) for k, v in extra.items())))
        out = self._ref_typings.get(key)
        if out is None:
            out = self._ref_typings[key] = {**r, **extra, **({"type": types} if typed else {})}
            self._adopt(out, r)  # (its $ref resolves from there)
            self._keep.append(out)
        return out

    def _merge_branches(self, branches: list):
        return (self._merged_values(branches) or _merged_scalars(branches) or self._merged_objects(branches)
                or _merged_arrays(branches))

    def _merged_values(self, branches: list) -> dict | None:
        """allOf branches of which some list their values (const, enum, an anyOf of such)
        and the others hold string and number keywords only (a `type`, a `pattern`) as
        one enum: the values in every list that the others accept (scalars matched
        against their term, containers by type: the only keyword of those that reads
        them): `{"enum": [...], "$ref": "#/definitions/string"}`, or an anyOf of hundreds
        of enums beside `{"pattern": "^PowerShell@2$"}`. None where a branch says more."""
        said = [b for b in branches if not _schema_keys(b) <= _ANNOTATIONS]
        lists = [self._listed_values(b) for b in said]
        others = [b for b, vs in zip(said, lists) if vs is None]
        lists = [vs for vs in lists if vs is not None]
        scalars = _merged_scalars(others) if others else {}
        if not lists:
            return None
        _, vals, listed, trie = self._listed_common(lists)
        if scalars is None:  # (others of more keywords: where they narrow to scalars, their term)
            check = self._scalars_of(others, vals)
            if check is None:
                return None
            scalars = {}
        else:
            check = self._scalar_check(scalars) if scalars else None
        if check is not None:
            held = {id(listed[i]) for i in self._accepted(check, trie, len(listed))}
            vals = [v for v in vals if (_has_type(v, scalars.get("type")) if isinstance(v, (dict, list))
                                        else id(v) in held)]
        if self._draft4 and "type" in scalars:  # (a listed 2 is also written 2.0, which is no integer there)
            return {"enum": list(vals), "type": scalars["type"]}
        return {"enum": list(vals)}

    def _listed_common(self, lists: list) -> tuple:
        """(lists, the values common to them, their scalars, a trie of the scalars'
        canonical texts), remembered per lists (held here, so that their ids stay
        theirs): each of hundreds of merges may list the same hundreds of names
        (Azure Pipelines' task names beside each task's own pattern)."""
        key = tuple(map(id, lists))
        got = self._commons.get(key)
        if got is None:
            vals = _common_values(lists)
            scalars = [v for v in vals if not isinstance(v, (dict, list))]
            trie: dict = {}  # byte -> child; -1 -> the indexes (in scalars) of the texts ending here
            for i, v in enumerate(scalars):
                node = trie
                for b in canonical_json(int(v) if self._draft4 and type(v) is float and v.is_integer() else v,
                                        None).encode():
                    node = node.setdefault(b, {})
                node.setdefault(-1, []).append(i)
            got = self._commons[key] = (lists, vals, scalars, trie)
        return got

    def _accepted(self, t: Term, trie: dict, n: int) -> set:
        """The indexes (of n) of the texts in `trie` that term t accepts (tb.matches of
        each): derivatives down the trie, none below a prefix t refuses. Hundreds of
        names beside a pattern that takes one of them cost a step for each first byte,
        not a walk for each name."""
        if t.kind == AND:  # (its parts apart, as tb.matches: no intersection of derivatives built)
            return set.intersection(*(self._accepted(x, trie, n) for x in t.args))
        if t.kind == NOT:
            return set(range(n)) - self._accepted(t.args[0], trie, n)
        derive, out, todo = self.tb.derive, set(), [(trie, t)]
        while todo:
            node, x = todo.pop()
            for b, child in node.items():
                if b < 0:
                    if x.nullable:
                        out.update(child)
                elif (y := derive(x, b)).kind != NOTHING:
                    todo.append((child, y))
        return out

    def _scalars_of(self, others: list, values: list) -> Term | None:
        """The term of allOf branches `others` beside lists of the scalars `values`,
        each branch's oneOf/anyOf kept to the branches that take a type of those values
        (a listed "3.0" beside a pattern's value: a oneOf of strings, numbers and
        recursive objects, of which the string is left). None where a value
        is a container, or a branch says more than scalar keywords and unions of scalar
        schemas (it might reach a recursion, which has no term to match against)."""
        if self._draft4 or any(isinstance(v, (dict, list)) for v in values):
            return None
        types = {_json_type(v) for v in values}
        allowed = {"oneOf", "anyOf", "type", "enum", "const", *_STRING_KW, *_NUMBER_KW}
        terms = []
        for o in others:
            o = deref(self, o)
            if not isinstance(o, dict) or not _schema_keys(o) - _ANNOTATIONS <= allowed:
                return None
            n = dict(o)
            for kw in ("oneOf", "anyOf"):
                if kw not in o:
                    continue
                kept = []
                for b in o[kw]:
                    t = types_of(self, b)
                    if t is not None and not t & types:
                        continue  # (takes none of the values)
                    if t is None or not t <= _SCALAR_TYPES or not isinstance(x := deref(self, b), dict) \
                            or "$ref" in x:
                        return None
                    kept.append(b)
                n[kw] = kept or [False]
            self._adopt(n, o)
            self._keep.append(n)
            terms.append(self.value(n, 0))
        return self.tb.intersect(terms)

    def _scalar_check(self, scalars: dict) -> Term:
        """The term of a merged scalar schema (_merged_scalars' dict), built once per
        text: the dict stays alive (memo keys are ids), and hundreds of listed names
        beside the same patterns compile each pattern once."""
        text = json.dumps(scalars, sort_keys=True)
        got = self._scalar_checks.get(text)
        if got is None:
            got = self._scalar_checks[text] = self.value(scalars, 0)
            self._keep.append(scalars)
        return got

    def _listed_values(self, s) -> list | None:
        """The values schema s (dereferenced) lists: _finite_values, or an anyOf whose
        branches each list theirs; None for others."""
        s = deref(self, s)
        if not (isinstance(s, dict) and isinstance(s.get("anyOf"), list) and s["anyOf"]
                and _schema_keys(s) - _ANNOTATIONS == {"anyOf"}):
            return _finite_values(s)
        if id(s) not in self._listed:
            lists = [self._listed_values(b) for b in s["anyOf"]]
            self._listed[id(s)] = None if None in lists else _common_values([[v for vs in lists for v in vs]])
        return self._listed[id(s)]

    MAX_DISTRIBUTED = 8

    def _distributed(self, branches: list, node: dict, most: int = MAX_DISTRIBUTED):
        """allOf [A, B, anyOf [C1, C2]] as anyOf [merged A B C1, merged A B C2] where
        each of those merges (a root of several objects and an anyOf of a few); one
        anyOf branch of at most MAX_DISTRIBUTED alternatives. A union of plain objects,
        not an object beside an anyOf (which intersect and meet: _meets); None
        otherwise."""
        alts = [b for b in branches if isinstance(b.get("anyOf"), list) and _schema_keys(b) - _ANNOTATIONS == {"anyOf"}]
        if len(alts) != 1 or not 1 < len(alts[0]["anyOf"]) <= most:
            return None
        rest = [b for b in branches if b is not alts[0]]
        parts = []
        for a in alts[0]["anyOf"]:
            a = deref(self, a)
            if not isinstance(a, dict) or "allOf" in a:
                return None
            m = self._merge_branches(rest + [a])
            if m is None:
                return None
            self._adopt(m, node)
            parts.append(m)
        return {"anyOf": parts}

    def _key_schemas(self, node: dict, key: str, matched: list) -> dict:
        """`{allOf: [node's property key, the patternProperties it matches]}`, once per
        set of those schemas (its id keys the merge's memo: where a merged object holds
        the same key again, one level down, the merge is the same schema, whose
        recursion is then seen, not unrolled with a new copy per level, which would not
        end in reasonable time)."""
        props = node.get("properties", {})
        parts = ([props[key]] if key in props else []) + matched
        memo = tuple(map(id, parts))
        out = self._key_merges.get(memo)
        if out is None:
            out = self._key_merges[memo] = {"allOf": parts}
            self._adopt(out, node)
            self._keep.append(out)
        return out

    def _type_split(self, branches: list, node: dict):
        """allOf branches one of which lists several types as anyOf [their merge for each
        of the types], each branch without the keywords that assert nothing of that type:
        `type: [boolean, object]` beside a $ref to an untyped schema of object keywords
        that recurses is a boolean or that object
        (no intersection of the two). None where a merge fails."""
        listed = [i for i, b in enumerate(branches) if isinstance(b.get("type"), list) and len(b["type"]) > 1]
        if len(listed) != 1 or not _well_typed(branches[listed[0]]["type"]):
            return None
        parts = []
        for t in branches[listed[0]]["type"]:
            idle = _idle_keywords({t})
            each = [{k: v for k, v in b.items() if k not in idle} for b in branches]
            each[listed[0]]["type"] = t
            self._keep.append(each)
            m = self._merge_branches(each)
            if m is None:
                return None
            self._adopt(m, node)
            parts.append(m)
        return {"anyOf": parts}

    def _narrowed(self, node: dict, subs: list) -> list:
        """The allOf branches `subs` of node, each that may hold more types than the
        branches (and node's `type`) have in common taken with those types where that
        merges into one schema: `{"pattern": p}` beside a string enum is a string
        pattern, not also the universe of every other type (under an intersection, an
        open object slotting every key of the document). None where they have no type in
        common: no value holds them all (objects of strings beside `$ref: "#"`, merged:
        every property of the root, each also a string)."""
        if id(node) in self._narrowing:
            return subs
        types = [types_of(self, s) for s in subs]
        known = [t for t in types + ([types_of(self, {"type": node["type"]})] if "type" in node else [])
                 if t is not None]
        common = frozenset(set.intersection(*known)) if known else None
        if common is None:
            return subs
        if not common:
            return None
        out = []
        for s, t in zip(subs, types):
            if t is not None and t <= common:
                out.append(s)
                continue
            key = (id(s), common)
            w = self._narrow_memo.get(key, False)
            if w is False:
                w = self._typed_wrap(s, common, node)
                if self._merged_all_of(w) is None:
                    w = None
                self._narrow_memo[key] = w
            out.append(s if w is None else w)
        return out

    def _typed_wrap(self, s, types: frozenset, node: dict) -> dict:
        """`{type: types, allOf: [s]}` (s a subschema of node), one per (s, types): a
        branch narrowed to types (_narrowed, _typed_union), which _narrowed does not
        narrow again."""
        key = (id(s), types)
        w = self._wraps.get(key)
        if w is None:
            w = self._wraps[key] = {"type": sorted(types), "allOf": [s]}
            self._adopt(w, s if isinstance(s, dict) else node)
            self._narrowing.add(id(w))
            self._keep.append(w)
        return w

    def _typed_union(self, node: dict):
        """node, whose `type` names fewer types than some anyOf/oneOf branches hold, with
        those branches narrowed to its types: left out where they hold none of them,
        else `{type: the types both name, allOf: [branch]}` (which merges, and narrows
        its own unions so). An instance of node's types matches a branch exactly when it
        matches the narrowed one, so oneOf's count is unchanged; a recursive branch of
        other types no longer meets node's type (web-types' `name`, a string, whose key
        a pattern gives a oneOf of strings, numbers and recursive objects). None where
        nothing narrows."""
        if "type" not in node or not _well_typed(node["type"]) or not ("anyOf" in node or "oneOf" in node):
            return None
        if id(node) in self._unions_typed:
            return self._unions_typed[id(node)]
        own = types_of(self, {"type": node["type"]})
        out, changed = dict(node), False
        for kw in ("anyOf", "oneOf"):
            if not isinstance(node.get(kw), list):
                continue
            kept = []
            for b in node[kw]:
                t = types_of(self, b)
                if t is None or t <= own:
                    kept.append(b)
                    continue
                changed = True
                if t & own:
                    kept.append(self._typed_wrap(b, frozenset(t & own), node))
            out[kw] = kept or [False]
        out = out if changed else None
        if out is not None:
            self._adopt(out, node)
            self._keep.append(out)
        self._unions_typed[id(node)] = out
        return out

    MAX_UNION_DISTRIBUTED = 1024
    MAX_UNION_SLOTS = 65536  # branches x properties copied into them: above, intersected as before

    def _union_distributed(self, node: dict):
        """node = {keywords K, anyOf: [B1, ...]} (or a oneOf whose branches are disjoint)
        as anyOf [K merged with B1, ...] where each merges (_distributed): a union of plain
        schemas instead of K intersected with a union. An object beside an anyOf of
        hundreds of objects, one per name: intersected, every object below would slot
        every key of the document (meets), far too dear to compile; distributed, each
        object has its own keys. None for other schemas."""
        if "anyOf" not in node and "oneOf" not in node:  # (most schemas: at once)
            return None
        kws = [k for k in ("anyOf", "oneOf") if isinstance(node.get(k), list)]
        props = node.get("properties")
        if len(kws) != 1 or not 1 < len(node[kws[0]]) <= self.MAX_UNION_DISTRIBUTED \
                or len(node[kws[0]]) * len(props if isinstance(props, dict) else ()) > self.MAX_UNION_SLOTS \
                or not {"allOf", "$ref", "not", "if", "anyOf", "oneOf"}.isdisjoint(node.keys() - {kws[0]}):
            return None
        mk = (id(node), self._negated > 0)
        if mk in self._unions:
            return self._unions[mk]
        out = None
        rest = {k: v for k, v in node.items() if k != kws[0]}
        alts = [deref(self, a) for a in node[kws[0]]]  # (no union inside: a $ref back to node, nested anyOf)
        if types_of(self, rest) == {"object"}:
            alts = [self._absent_keys(a, node) for a in alts]
        if all(isinstance(a, dict) and {"anyOf", "oneOf", "allOf"}.isdisjoint(a) for a in alts) \
                and _schema_keys(rest) - _ANNOTATIONS \
                and (kws[0] == "anyOf" or disjoint(self, node, alts)):
            self._adopt(rest, node)
            out = self._distributed([rest, {"anyOf": alts}], node, self.MAX_UNION_DISTRIBUTED)
            if out is not None:
                self._adopt(out, node)
                self._keep += [rest, out]
        self._unions[mk] = out
        return out

    def _absent_keys(self, a, node: dict):
        """Branch a of a union beside object keywords, its `not: {required: [k]}` (k is
        absent: mutually exclusive keys, CKAN's `download` and `kind`) written as
        `properties: {k: false}`, the same on objects, which merges where a `not` would
        not; a as it is otherwise."""
        if not (isinstance(a, dict) and isinstance(a.get("not"), dict) and set(a["not"]) == {"required"}
                and isinstance(a["not"]["required"], list) and len(a["not"]["required"]) == 1
                and isinstance(a.get("properties", {}), dict)):
            return a
        out = {k: v for k, v in a.items() if k != "not"}
        out["properties"] = {**a.get("properties", {}), a["not"]["required"][0]: False}
        self._adopt(out, a if id(a) in self.base_of else node)
        self._keep.append(out)
        return out

    def _merged_objects(self, branches: list):
        """_merged_all_of for object schemas; None where they are not all of that kind.
        patternProperties may stand in one branch where the others take any other key
        (an open object with `^_` patterns, and one with a property): the
        merged object keeps them, and that branch's additionalProperties meets a key
        another branch declares only where no pattern of it matches the key."""
        carried = {}
        patterned = [b for b in branches if "patternProperties" in b]
        pb = patterned[0] if patterned else None
        opened = self.allow_extra or self._negated > 0  # (what a missing additionalProperties means)
        if len(patterned) > 1 or (pb is not None and any(
                b.get("additionalProperties", opened) is not True for b in branches if b is not pb)):
            return None
        try:
            pats = [self.st.search(p) for p in (pb or {}).get("patternProperties", ())]
        except RegexError:
            return None  # (refused where the object is compiled, naming the pattern)
        for b in branches:
            for group in self._CARRIED:
                if group[0] in b or group[-1] in b:
                    if group[0] in carried:
                        return None
                    carried.update((k, b[k]) for k in group if k in b)
                    carried.setdefault(group[0], None)
            keys = self._MERGEABLE | set(carried) | ({"patternProperties"} if b is pb else set())
            if _names_type(b.get("type"), "object"):  # (other types' keywords assert nothing: `items`)
                keys = keys | _idle_keywords({"object"})
            if not _schema_keys(b) <= keys or not _names_type(b.get("type", "object"), "object"):
                return None  # (other keys are vendor annotations, which the compiler ignores)
        props: dict = {}
        for b in branches:
            for k in b.get("properties", {}):
                props.setdefault(k, [])
        for k, vals in props.items():
            for b in branches:
                if k in b.get("properties", {}):
                    vals.append(b["properties"][k])
                elif b.get("additionalProperties", True) is not True and not (
                        b is pb and any(self._matches(t, encode_string(k)) for t in pats)):
                    vals.append(b["additionalProperties"])
        addl = [b["additionalProperties"] for b in branches if b.get("additionalProperties", True) is not True]
        merged = {"properties": {k: (v[0] if len(v) == 1 else {"allOf": v}) if v else True
                                 for k, v in props.items()},
                  "required": sorted({r for b in branches for r in b.get("required", [])})}
        if any("type" in b for b in branches):
            merged["type"] = "object"
        if addl:
            merged["additionalProperties"] = False if False in addl else (
                addl[0] if len(addl) == 1 else {"allOf": addl})
        if pb is not None:
            merged["patternProperties"] = pb["patternProperties"]
        merged.update((k, v) for k, v in carried.items() if v is not None)
        return merged
