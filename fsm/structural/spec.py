"""Read an XGrammar structural-tag document into typed nodes, checking every field.

The format is XGrammar's (`{"type": "structural_tag", "format": F}`, and the legacy
`{"type": "structural_tag", "structures": [...], "triggers": [...]}`); what it does not
support here is refused by name, with the path of the node (docs/structural-tags.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..core.errors import ConstraintError


class StructuralTagError(ConstraintError):
    """A structural-tag document that is malformed or asks for what is not supported;
    the message names the node by its path (`format.tags[2].content`)."""


@dataclass(frozen=True)
class Const:
    value: str


@dataclass(frozen=True)
class AnyText:
    excludes: tuple[str, ...]


@dataclass(frozen=True)
class JsonSchema:
    schema: object
    max_whitespace: int | None
    path: str


@dataclass(frozen=True)
class Regex:
    pattern: str
    path: str


@dataclass(frozen=True)
class Grammar:
    grammar: str
    path: str


@dataclass(frozen=True)
class Sequence:
    elements: tuple


@dataclass(frozen=True)
class Or:
    elements: tuple


@dataclass(frozen=True)
class Repeat:
    content: object
    lo: int
    hi: int | None


@dataclass(frozen=True)
class Tag:
    begin: str
    content: object
    ends: tuple[str, ...]


@dataclass(frozen=True)
class TriggeredTags:
    triggers: tuple[str, ...]
    tags: tuple[Tag, ...]
    at_least_one: bool
    stop_after_first: bool
    excludes: tuple[str, ...]


@dataclass(frozen=True)
class TagsWithSeparator:
    tags: tuple[Tag, ...]
    separator: str
    at_least_one: bool
    stop_after_first: bool


# XGrammar formats that depend on token ids or on model-specific XML styles
NOT_SUPPORTED = {
    "token": "it names a token, not text",
    "exclude_token": "it names tokens, not text",
    "any_tokens": "it names tokens, not text",
    "token_triggered_tags": "its triggers are token ids (use triggered_tags with text triggers)",
    "token_dispatch": "its rules are token ids",
    "dispatch": "not implemented here (use triggered_tags)",
    "qwen_xml_parameter": "the XML argument styles are not implemented here (use json_schema)",
}


def load_spec(spec) -> object:
    """The root format node of a structural-tag document (dict or JSON text)."""
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except ValueError as e:
            raise StructuralTagError(f"structural tag: not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise StructuralTagError(f"structural tag must be a JSON object, not {type(spec).__name__}")
    if spec.get("type") != "structural_tag":
        raise StructuralTagError(f"structural tag: 'type' must be \"structural_tag\", not {spec.get('type')!r}")
    if "format" in spec:
        _fields(spec, "structural tag", {"type", "format"})
        return _format(spec["format"], "format")
    if "structures" in spec:  # XGrammar's legacy document: triggered JSON tags
        _fields(spec, "structural tag", {"type", "structures", "triggers"})
        items = _list(spec, "structures", "structural tag")
        tags = []
        for i, item in enumerate(items):
            path = f"structures[{i}]"
            if not isinstance(item, dict):
                raise StructuralTagError(f"{path}: must be an object with begin, schema and end")
            _fields(item, path, {"begin", "schema", "end"})
            schema = item.get("schema")
            if isinstance(schema, str):
                try:
                    schema = json.loads(schema)
                except ValueError as e:
                    raise StructuralTagError(f"{path}.schema: not valid JSON: {e}") from None
            tags.append({"type": "tag", "begin": item.get("begin"), "end": item.get("end"),
                         "content": {"type": "json_schema", "json_schema": schema}})
        fmt = {"type": "triggered_tags", "triggers": spec.get("triggers"), "tags": tags}
        return _format(fmt, "structural tag")
    raise StructuralTagError("structural tag: needs 'format' (or the legacy 'structures' and 'triggers')")


def _fields(node: dict, path: str, allowed: set, required: tuple = ()) -> None:
    unknown = sorted(set(node) - allowed)
    if unknown:
        raise StructuralTagError(f"{path}: unknown field(s) {', '.join(map(repr, unknown))}; "
                                 f"{node.get('type', 'it')!s} takes {', '.join(sorted(allowed))}")
    for name in required:
        if name not in node:
            raise StructuralTagError(f"{path}: missing field {name!r}")


def _str(node: dict, name: str, path: str, default=None) -> str:
    v = node.get(name, default)
    if not isinstance(v, str):
        raise StructuralTagError(f"{path}.{name}: must be a string, not {type(v).__name__}")
    return v


def _strs(node: dict, name: str, path: str) -> tuple[str, ...]:
    v = node.get(name, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise StructuralTagError(f"{path}.{name}: must be a list of non-empty strings")
    return tuple(v)


def _list(node: dict, name: str, path: str) -> list:
    v = node.get(name)
    if not isinstance(v, list):
        raise StructuralTagError(f"{path}.{name}: must be a list")
    return v


def _bool(node: dict, name: str, path: str) -> bool:
    v = node.get(name, False)
    if not isinstance(v, bool):
        raise StructuralTagError(f"{path}.{name}: must be true or false")
    return v


def _count(node: dict, name: str, path: str, allow_minus_one: bool = False) -> int | None:
    v = node.get(name)
    if v is None and not allow_minus_one:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < (-1 if allow_minus_one else 0):
        raise StructuralTagError(f"{path}.{name}: must be a non-negative integer, not {v!r}")
    return v


def _format(node, path: str):
    if not isinstance(node, dict):
        raise StructuralTagError(f"{path}: a format must be an object with a 'type', not {type(node).__name__}")
    kind = node.get("type")
    if kind in NOT_SUPPORTED:
        raise StructuralTagError(f"{path}: format type {kind!r} is not supported: {NOT_SUPPORTED[kind]}")
    read = _READERS.get(kind)
    if read is None:
        raise StructuralTagError(f"{path}: unknown format type {kind!r} (one of {', '.join(sorted(_READERS))})")
    return read(node, path)


def _const(node, path):
    _fields(node, path, {"type", "value"}, ("value",))
    return Const(_str(node, "value", path))


def _any_text(node, path):
    _fields(node, path, {"type", "excludes", "max_chars", "max_tokens"})
    for name in ("max_chars", "max_tokens"):
        if node.get(name) is not None:
            raise StructuralTagError(f"{path}.{name}: not supported (a bound on free text is not enforced here)")
    return AnyText(_strs(node, "excludes", path))


def _json_schema(node, path):
    _fields(node, path, {"type", "json_schema", "style", "any_order", "max_whitespace_cnt", "excludes"},
            ("json_schema",))
    if node.get("style", "json") != "json":
        raise StructuralTagError(f"{path}.style: {node['style']!r} is not supported (only \"json\")")
    if node.get("any_order", False) is not False:
        raise StructuralTagError(f"{path}.any_order: not supported (properties come in their declared order)")
    if node.get("excludes"):
        raise StructuralTagError(f"{path}.excludes: not supported inside JSON values")
    schema = node["json_schema"]
    if not isinstance(schema, (dict, bool)):
        raise StructuralTagError(f"{path}.json_schema: must be a schema object or a boolean")
    return JsonSchema(schema, _count(node, "max_whitespace_cnt", path), path)


def _regex(node, path):
    _fields(node, path, {"type", "pattern"}, ("pattern",))
    return Regex(_str(node, "pattern", path), path)


def _grammar(node, path):
    _fields(node, path, {"type", "grammar", "syntax"}, ("grammar",))
    syntax = node.get("syntax", "lark")
    if syntax != "lark":
        raise StructuralTagError(f"{path}.syntax: {syntax!r} is not supported: grammars are Lark text here "
                                 "(\"syntax\": \"lark\", the default here; XGrammar's default is \"ebnf\")")
    return Grammar(_str(node, "grammar", path), path)


def _elements(node, path):
    _fields(node, path, {"type", "elements"}, ("elements",))
    items = _list(node, "elements", path)
    if not items:
        raise StructuralTagError(f"{path}.elements: must not be empty")
    return tuple(_format(x, f"{path}.elements[{i}]") for i, x in enumerate(items))


def _repeat(node, path):
    kind = node["type"]
    extra = {"min", "max"} if kind == "repeat" else set()
    _fields(node, path, {"type", "content"} | extra, ("content",) + tuple(sorted(extra)))
    content = _format(node["content"], f"{path}.content")
    if kind == "repeat":
        lo, hi = _count(node, "min", path), _count(node, "max", path, allow_minus_one=True)
        hi = None if hi == -1 else hi
        if hi is not None and hi < lo:
            raise StructuralTagError(f"{path}: max {hi} is below min {lo}")
        return Repeat(content, lo, hi)
    return Repeat(content, *{"optional": (0, 1), "plus": (1, None), "star": (0, None)}[kind])


def _tag(node, path):
    if not isinstance(node, dict) or node.get("type", "tag") != "tag":
        raise StructuralTagError(f"{path}: must be a tag (an object with begin, content and end)")
    _fields(node, path, {"type", "begin", "content", "end"}, ("begin", "content", "end"))
    if isinstance(node["begin"], dict) or isinstance(node["end"], dict):
        raise StructuralTagError(f"{path}: token begin/end (TokenFormat) is not supported: use strings")
    begin = _str(node, "begin", path)
    end = node["end"]
    ends = (end,) if isinstance(end, str) else end
    if not isinstance(ends, list | tuple) or not ends or not all(isinstance(e, str) for e in ends):
        raise StructuralTagError(f"{path}.end: must be a string or a non-empty list of strings")
    content = _format(node["content"], f"{path}.content")
    if isinstance(content, AnyText) and not any(ends):
        raise StructuralTagError(f"{path}.end: free text (any_text) inside a tag needs a non-empty end, "
                                 "which is where the text stops")
    return Tag(begin, content, tuple(dict.fromkeys(ends)))


def _tags(node, path) -> tuple[Tag, ...]:
    items = _list(node, "tags", path)
    if not items:
        raise StructuralTagError(f"{path}.tags: must not be empty")
    return tuple(_tag(x, f"{path}.tags[{i}]") for i, x in enumerate(items))


def _triggered(node, path):
    _fields(node, path, {"type", "triggers", "tags", "at_least_one", "stop_after_first", "excludes"},
            ("triggers", "tags"))
    triggers = _strs(node, "triggers", path)
    if not triggers:
        raise StructuralTagError(f"{path}.triggers: must not be empty")
    tags = _tags(node, path)
    for i, t in enumerate(tags):
        hits = [x for x in triggers if t.begin.startswith(x)]
        if len(hits) != 1:
            why = "no trigger" if not hits else f"several triggers ({', '.join(map(repr, hits))})"
            raise StructuralTagError(f"{path}.tags[{i}]: its begin {t.begin!r} starts with {why}; each tag's "
                                     "begin must start with exactly one of the triggers")
    return TriggeredTags(triggers, tags, _bool(node, "at_least_one", path), _bool(node, "stop_after_first", path),
                         _strs(node, "excludes", path))


def _separated(node, path):
    _fields(node, path, {"type", "tags", "separator", "at_least_one", "stop_after_first"}, ("tags", "separator"))
    return TagsWithSeparator(_tags(node, path), _str(node, "separator", path), _bool(node, "at_least_one", path),
                             _bool(node, "stop_after_first", path))


_READERS = {"const_string": _const, "any_text": _any_text, "json_schema": _json_schema, "regex": _regex,
            "grammar": _grammar, "sequence": lambda n, p: Sequence(_elements(n, p)),
            "or": lambda n, p: Or(_elements(n, p)), "tag": _tag, "triggered_tags": _triggered,
            "tags_with_separator": _separated, "optional": _repeat, "plus": _repeat, "star": _repeat,
            "repeat": _repeat}
