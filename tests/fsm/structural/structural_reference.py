"""An independent reference for structural tags: a backtracking matcher over the
document, written from XGrammar's documented semantics, with Python's `re.fullmatch` for
regexes, `json.loads` + jsonschema for JSON values and lark's parser for grammars. Slow (tries every split), for short
texts only. It knows only what the tests use: JSON values are read strictly (objects'
keys in declared order, no duplicates, no exponents, no whitespace around the value)."""
from __future__ import annotations

import json
import re
from functools import cache

import jsonschema

_NUMBER_EXTRAS = re.compile(r"[0-9][eE]|\\u")  # (exponents, \\u escapes)


def accepts(fmt: dict, text: str) -> bool:
    """Whether `text` matches the format node `fmt` (XGrammar's semantics)."""
    @cache
    def ends(node_json: str, i: int, stops: tuple) -> frozenset:
        return frozenset(_ends(json.loads(node_json), text, i, stops, ends))
    return len(text) in ends(_key(fmt), 0, ())


def _key(node) -> str:
    return json.dumps(node)  # (not sorted: properties keep their order)


def _free_ends(text: str, i: int, avoid) -> list:
    """Ends j of free text text[i:j] that contains none of `avoid`."""
    out = []
    for j in range(i, len(text) + 1):
        if any(a in text[i:j] for a in avoid):
            break
        out.append(j)
    return out


def _first_stop(text: str, i: int, stops) -> list:
    """(start, end) of the first occurrence at or after i of any of `stops` (each stop
    that begins there)."""
    best = None
    for s in stops:
        k = text.find(s, i)
        if k >= 0 and (best is None or k < best):
            best = k
    return [] if best is None else [(best, best + len(s)) for s in stops if text.startswith(s, best)]


def _tag_ends(tag: dict, text: str, i: int, rec) -> list:
    begin = tag["begin"]
    if not text.startswith(begin, i):
        return []
    i += len(begin)
    ends_ = tag["end"] if isinstance(tag["end"], list) else [tag["end"]]
    content = tag["content"]
    if content["type"] == "any_text":  # text without an end string, then an end
        avoid = [e for e in ends_ if e] + list(content.get("excludes", []))
        return [k + len(e) for k in _free_ends(text, i, avoid) for e in ends_ if text.startswith(e, k)]
    out = []
    for j in rec(_key(content), i, tuple(ends_)):
        out += [j + len(e) for e in ends_ if text.startswith(e, j)]
    return out


def _ends(node: dict, text: str, i: int, stops: tuple, rec) -> list:
    kind = node["type"]
    if kind == "const_string":
        v = node["value"]
        return [i + len(v)] if text.startswith(v, i) else []
    if kind == "any_text":
        return _free_ends(text, i, list(node.get("excludes", [])) + list(stops))
    if kind == "regex":
        return [j for j in range(i, len(text) + 1) if re.fullmatch(node["pattern"], text[i:j], re.DOTALL)]
    if kind == "json_schema":
        out = []
        for j in range(i + 1, len(text) + 1):
            part = text[i:j]
            if part != part.strip() or _NUMBER_EXTRAS.search(part):
                continue
            try:
                value = json.loads(part, object_pairs_hook=_ordered_pairs(node["json_schema"]))
            except (ValueError, _OutOfOrder):
                continue
            if jsonschema.Draft202012Validator(_closed(node["json_schema"])).is_valid(value):
                out.append(j)
        return out
    if kind == "grammar":  # lark's own parser (Earley: the grammar's language, any lexing)
        import lark
        parser = _lark(node["grammar"])
        out = []
        for j in range(i, len(text) + 1):
            try:
                parser.parse(text[i:j])
                out.append(j)
            except lark.exceptions.LarkError:
                pass
        return out
    if kind in ("optional", "plus", "star", "repeat"):
        lo, hi = {"optional": (0, 1), "plus": (1, None), "star": (0, None)}.get(kind, (node.get("min"), node.get("max")))
        hi = None if hi == -1 else hi
        at, seen, n = {i}, set(), 0
        out = {i} if lo == 0 else set()
        while at and (hi is None or n < hi):
            at = {j for k in at for j in rec(_key(node["content"]), k, stops)}
            n += 1
            if n >= lo:
                out |= at
            at -= seen
            seen |= at
        return sorted(out)
    if kind == "sequence":
        at = {i}
        for el in node["elements"]:
            at = {j for k in at for j in rec(_key(el), k, stops)}
        return sorted(at)
    if kind == "or":
        return sorted({j for el in node["elements"] for j in rec(_key(el), i, stops)})
    if kind == "tag":
        return _tag_ends(node, text, i, rec)
    if kind == "triggered_tags":
        return _triggered(node, text, i, stops, rec)
    if kind == "tags_with_separator":
        def one(k):
            return {j for t in node["tags"] for j in _tag_ends(t, text, k, rec)}
        first = one(i)
        if node.get("stop_after_first"):
            return sorted(first | (set() if node.get("at_least_one") else {i}))
        out, todo = set(first), list(first)
        while todo:
            k = todo.pop()
            sep = node["separator"]
            if text.startswith(sep, k):
                for j in one(k + len(sep)) - out:
                    out.add(j)
                    todo.append(j)
        return sorted(out | (set() if node.get("at_least_one") else {i}))
    raise NotImplementedError(kind)


def _triggered(node, text, i, stops, rec) -> list:
    trig, tags = node["triggers"], node["tags"]
    avoid = list(trig) + list(node.get("excludes", [])) + list(stops)

    def tag_at(k):
        return {j for t in tags for j in _tag_ends(t, text, k, rec)}

    def free_then_tag(k):  # free text up to the first trigger, then a tag that begins there
        out = set()
        for s, _ in _first_stop(text, k, trig):
            if not any(x in text[k:s] for x in avoid):
                out |= tag_at(s)
        return out

    def free(k):
        return set(_free_ends(text, k, avoid))
    if node.get("stop_after_first"):
        if node.get("at_least_one"):
            return sorted(tag_at(i))
        return sorted(free(i) | free_then_tag(i))
    starts = tag_at(i) if node.get("at_least_one") else {i}
    seen, todo = set(starts), list(starts)
    while todo:
        k = todo.pop()
        for j in free_then_tag(k) - seen:
            seen.add(j)
            todo.append(j)
    return sorted({j for k in seen for j in free(k)})


@cache
def _lark(grammar: str):
    import lark
    return lark.Lark(grammar, parser="earley", lexer="dynamic")


def _closed(schema):
    """XGrammar's strict reading: an object schema with properties (and no word on other
    keys) takes no other keys, at every depth."""
    if isinstance(schema, list):
        return [_closed(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in ("enum", "const", "required") else _closed(v)) for k, v in schema.items()}
    if "properties" in schema:
        out["properties"] = {k: _closed(v) for k, v in schema["properties"].items()}
        if not {"additionalProperties", "patternProperties", "unevaluatedProperties"} & set(schema):
            out["additionalProperties"] = False
    return out


class _OutOfOrder(Exception):
    pass


def _ordered_pairs(schema):
    """json.loads' object_pairs_hook: keys unique and, where an object's keys are all
    declared properties of some object in the schema, in their declared order."""
    orders = []

    def collect(s):
        if isinstance(s, dict):
            if isinstance(s.get("properties"), dict):
                orders.append(list(s["properties"]))
            for v in s.values():
                collect(v)
        elif isinstance(s, list):
            for v in s:
                collect(v)
    collect(schema)

    def hook(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise _OutOfOrder
        for order in orders:
            if set(keys) <= set(order):
                idx = [order.index(k) for k in keys]
                if idx != sorted(idx):
                    raise _OutOfOrder
                break
        return dict(pairs)
    return hook
