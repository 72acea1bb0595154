"""`$dynamicRef` (draft 2020-12), resolved before compiling.

The schemas that reach a dynamic reference are copied once per dynamic scope that
matters, each with plain `$ref`s to its targets, so the compiler, the key-order analyses
and the canonical writer see no dynamic reference at all. Copies keep the base URI and
JSON pointer of the schema they copy (errors name the original place). The resolution
rule: docs/json-schema.md, "$dynamicRef".
"""
from __future__ import annotations

from urllib.parse import urldefrag, urljoin

from ..core.errors import SchemaError
from .keywords import _SUB_LIST, _SUB_MAP, _SUB_ONE

_NOT_EVALUATED = ("$defs", "definitions")  # kept as they are: places to refer to, not applied
SYNTHETIC = "urn:structgen:dynamic:"  # the URIs of the copies, resources of the compiler


def join_uri(base: str, ref: str) -> str:
    """urljoin that also handles non-hierarchical bases (urn:...) for fragment refs."""
    if not base:
        return ref
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    joined = urljoin(base, ref)
    return joined


class DynamicRefs:
    """The copies of one document's schemas with their dynamic references resolved.

    `comp` is the _Compiler whose indexes (base_of, ptr_of, resources, dynamic_anchors)
    they use and extend; `entry(root)` is the root to compile."""

    def __init__(self, comp):
        self.comp = comp
        self.bases = {base for base, _ in comp.dynamic_anchors}  # resources with dynamic anchors
        self._copies: dict[tuple, dict] = {}  # (id(schema), scope) -> its copy
        self._reaching: set[int] = set()  # ids of schemas from which a $dynamicRef is reachable

    def entry(self, root):
        self._reaching = self._reach(root)
        return self._copy(root, ())

    # -- which schemas need copies ----------------------------------------------------
    def _edges(self, node: dict) -> list:
        """The schemas that evaluating node applies: subschemas, and the targets of its
        references (a dynamic one: its static target and every schema that could take
        its place)."""
        comp, out = self.comp, []
        for k, v in node.items():
            if k in _SUB_ONE or k == "items" and not isinstance(v, list):
                out.append(v)
            elif k == "items" or k in _SUB_LIST and isinstance(v, list):
                out.extend(v)
            elif k in _SUB_MAP and k not in _NOT_EVALUATED and isinstance(v, dict):
                out.extend(s for s in v.values() if not isinstance(s, list))
            elif k == "$ref" and isinstance(v, str):
                out.append(comp._resolve(node, v))
            elif k == "$dynamicRef":
                target, name = self._static_target(node)
                out.append(target)
                out.extend(s for (_, a), s in comp.dynamic_anchors.items() if a == name)
        return [s for s in out if isinstance(s, dict)]

    def _reach(self, root) -> set[int]:
        """Ids of the schemas (reachable from root) from which evaluation can reach a
        $dynamicRef: only those are copied."""
        if not isinstance(root, dict):
            return set()
        seen, order, stack, into = {id(root): root}, [], [root], {}
        while stack:
            node = stack.pop()
            order.append(node)
            for s in self._edges(node):
                into.setdefault(id(s), []).append(node)
                if id(s) not in seen:
                    seen[id(s)] = s
                    stack.append(s)
        out = set()
        todo = [n for n in order if "$dynamicRef" in n]
        while todo:
            n = todo.pop()
            if id(n) not in out:
                out.add(id(n))
                todo.extend(into.get(id(n), ()))
        return out

    # -- resolution ---------------------------------------------------------------------
    def _static_target(self, node: dict) -> tuple:
        """(the schema node's $dynamicRef resolves to as a $ref would, the fragment of
        its URI: an anchor's name, a pointer or "")."""
        ref = node["$dynamicRef"]
        if not isinstance(ref, str):
            raise SchemaError(f"$dynamicRef must be a string, not {ref!r:.60}", "$dynamicRef", self.comp.ptr(node))
        return self.comp._resolve(node, ref), urldefrag(join_uri(self.comp.base_of.get(id(node), ""), ref))[1]

    def _dynamic_target(self, node: dict, scope: tuple):
        """The schema node's $dynamicRef goes to, where `scope` is the dynamic scope's
        resources with dynamic anchors, outermost first."""
        target, name = self._static_target(node)
        if isinstance(target, dict) and name and not name.startswith("/") \
                and target.get("$dynamicAnchor") == name:  # ("bookended": else a plain $ref)
            for base in scope:
                hit = self.comp.dynamic_anchors.get((base, name))
                if hit is not None:
                    return hit
        return target

    def _copy(self, node, scope: tuple):
        """node as evaluated within `scope`: node itself where it reaches no dynamic
        reference, else its copy for the scope (made once; a cycle meets the copy being
        made)."""
        if not isinstance(node, dict) or id(node) not in self._reaching:
            return node
        comp = self.comp
        base = comp.base_of.get(id(node), "")
        if base in self.bases and base not in scope:
            scope = scope + (base,)
        key = (id(node), scope)
        out = self._copies.get(key)
        if out is not None:
            return out
        out = self._copies[key] = {}
        comp.base_of[id(out)] = base
        comp.ptr_of[id(out)] = comp.ptr(node)
        for k, v in node.items():
            if k == "$dynamicRef":
                continue  # (below: a $ref to its target in this scope)
            if k in _NOT_EVALUATED:
                out[k] = v
            elif k in _SUB_ONE or k == "items" and not isinstance(v, list):
                out[k] = self._copy(v, scope)
            elif k == "items" or k in _SUB_LIST and isinstance(v, list):
                out[k] = [self._copy(s, scope) for s in v]
            elif k in _SUB_MAP and isinstance(v, dict):
                out[k] = {name: self._copy(s, scope) for name, s in v.items()}
            elif k == "$ref" and isinstance(v, str):
                target = comp._resolve(node, v)
                moved = self._copy(target, scope)
                out[k] = v if moved is target else self._uri(moved)
            else:
                out[k] = v
        if "$dynamicRef" in node:
            uri = self._uri(self._copy(self._dynamic_target(node, scope), scope))
            if "$ref" in out:  # (both: each applies)
                ref = {"$ref": uri}
                comp.base_of[id(ref)], comp.ptr_of[id(ref)] = base, comp.ptr(node)
                out["allOf"] = list(out.get("allOf", ())) + [ref]
            else:
                out["$ref"] = uri
        return out

    def _uri(self, schema) -> str:
        """A URI the compiler resolves to `schema` (a copy, or a schema as it is)."""
        uri = f"{SYNTHETIC}{id(schema)}"
        self.comp.resources[uri] = schema
        self.comp._keep.append(schema)
        return uri
