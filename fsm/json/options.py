"""JsonOptions: how a JSON Schema compiles (docs/json-schema.md explains each choice)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.errors import SchemaError
from ..core.options import documented, option, time_budget_option

_STRUCTURE = '"{}[],:\\'


@documented
@dataclass(frozen=True)
class JsonOptions:
    """Options of compile_json_schema (also accepted as its keywords). The three that
    default to None take their value from the source: a Pydantic model class gets what
    Python parses back (True, True, False), a schema dict or JSON text (False, False, True)."""

    whitespace: str = option("compact", '"compact": no whitespace; "flexible": up to max_whitespace bytes of JSON '
                           "whitespace at each place JSON allows it")
    max_whitespace: int = option(20, "bytes of whitespace allowed at one place under whitespace='flexible'")
    strict: bool = option(True, "True: a keyword that cannot be enforced exactly raises SchemaError; False: it is "
                        "relaxed or dropped with a SchemaWarning (listed in info.relaxed)")
    max_depth: int = option(20, "values the schema leaves free ({}, true, a missing items) are at most this many "
                              "containers deep, counted from where each starts (docs/json-schema.md, Nesting)")
    recursion: str = option("auto", 'recursive $ref: "auto" (exact: lazy terms where exact, else a grammar), '
                          '"grammar" (always the grammar path), "refuse" (SchemaError)')
    max_recursion_depth: int | None = option(None, "N: unroll recursive $refs to depth N instead of enforcing them "
                                           "exactly")
    assert_formats: bool = option(True, "enforce `format` (date, email, uri...); False reads it as an annotation")
    custom_formats: str = option("annotate", 'a format neither the specification nor OpenAPI defines: "annotate": an '
                               'annotation, with a SchemaWarning naming it and its pointer; "ignore": an annotation, '
                               'silently; "refuse": refused (strict) or dropped with a warning')
    allow_extra_properties: bool | None = option(None, "undeclared keys where the schema allows them; False reads a "
                                               "missing additionalProperties as false (outside `not`)")
    python_dates: bool | None = option(None, "dates and formats as Python and Pydantic parse them (no year 0000, no "
                                     "leap seconds, Pydantic's binary/password/path/network/uuidN/base64 formats)")
    python_sets: bool | None = option(None, "uniqueItems that the matcher cannot check is not enforced (a Python set "
                                    "absorbs repeats); False refuses it (strict) or drops it with a warning")
    documents: dict | None = option(None, "{uri: schema}: other documents that $refs reach, relative URIs resolved "
                                  "against the root's base")
    max_states: int | None = option(None, "cap on DFA states (None: 200,000); beyond it TooLargeError")
    time_budget_s: float | None = time_budget_option()
    prefix: str = option("", "literal text the output starts with, before the JSON value (a tool-call marker); "
                       "without JSON's structure characters (the trackers beside the automaton read them)")
    suffix: str = option("", "literal text the output ends with, after the JSON value; as prefix")

    def __post_init__(self):
        for name, allowed in (("whitespace", ("compact", "flexible")),
                              ("custom_formats", ("annotate", "ignore", "refuse")),
                              ("recursion", ("auto", "grammar", "refuse"))):
            value = getattr(self, name)
            if value not in allowed:
                raise SchemaError(f"{name} must be {' or '.join(map(repr, allowed))}, not {value!r}")
        for name in ("max_whitespace", "max_depth", "max_recursion_depth", "max_states"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise SchemaError(f"{name} must be a non-negative integer, not {value!r}")
        for name in ("prefix", "suffix"):  # (the key and item trackers read JSON structure from every byte)
            value = getattr(self, name)
            if not isinstance(value, str) or any(c in value for c in _STRUCTURE):
                raise SchemaError(f"{name} must be a string without any of {_STRUCTURE}, not {value!r}")
        if self.documents is not None and not isinstance(self.documents, dict):
            raise SchemaError(f"documents must be a dict {{uri: schema}}, not {type(self.documents).__name__}")

    def for_source(self, schema) -> JsonOptions:
        """These options with the source-dependent defaults (None) decided for `schema`."""
        pydantic = not isinstance(schema, (dict, bool, str, bytes))
        return replace(self, **{name: value for name, value in (("python_dates", pydantic), ("python_sets", pydantic),
                                                                  ("allow_extra_properties", not pydantic))
                                if getattr(self, name) is None})
