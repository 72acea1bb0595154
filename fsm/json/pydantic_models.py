"""Pydantic sources (docs/json-schema.md, "Pydantic sources"): the JSON Schema generator
that writes what Pydantic's validators take where Pydantic's own schema says less
(_pydantic_generator, decimal_json_schema), and the compile options' defaults for a
Pydantic source (JsonOptions.for_source). Pydantic is imported only for a Pydantic source."""
from __future__ import annotations

import functools
from decimal import Decimal

from ..core.errors import SchemaError


@functools.cache
def _pydantic_generator():
    """Pydantic's JSON Schema generator, but where Pydantic's schema is wider than what
    its validators take (the model would not parse the output back):
    - Decimal: any number or any string, without max_digits and decimal_places; here
      the numbers it takes (`decimal_json_schema`);
    - URL types: format uri, without their allowed schemes, and wider than the URL
      parser reads (ports past 65535, an http host `a.1`); here format `url:SCHEMES:HOST`
      (fsm/json/formats.py `_pydantic_url`);
    - NaiveDatetime: format date-time, which has an offset; here naive-date-time;
      datetime (naive or aware): format date-time too; here any-date-time (an
      optional offset), as Pydantic reads both;
    - dict keys of int, float, bool or Decimal: any string; here their text;
    - bytes with max_length: Pydantic counts the UTF-8 bytes of the string, JSON Schema
      its characters; here ASCII characters only, one byte each;
    - refused (SchemaError): dates and times with bounds or relative to now (PastDate,
      FutureDatetime...), a fixed-offset datetime, `Json[...]` (a string of JSON
      text), and keys of other types with constraints."""
    from pydantic.json_schema import GenerateJsonSchema

    class Generator(GenerateJsonSchema):
        def decimal_schema(self, schema):
            return decimal_json_schema(schema.get("max_digits"), schema.get("decimal_places"),
                                       {k: schema[k] for k in ("ge", "gt", "le", "lt", "multiple_of")
                                        if schema.get(k) is not None})

        def url_schema(self, schema):
            out = {"type": "string", "format": "url:" + ",".join(schema.get("allowed_schemes") or ())
                   + ":" + str(int(bool(schema.get("host_required"))))}
            if schema.get("max_length") is not None:
                out["maxLength"] = schema["max_length"]
            return out

        def datetime_schema(self, schema):
            _no_time_bounds(schema, "datetime")
            tz = schema.get("tz_constraint")
            if tz == "naive":
                return {"type": "string", "format": "naive-date-time"}
            if tz is None:  # (a plain datetime: Pydantic reads naive timestamps too)
                return {"type": "string", "format": "any-date-time"}
            if tz not in (None, "aware"):
                raise SchemaError(f"a datetime with the fixed UTC offset {tz} s cannot be enforced", "format")
            return super().datetime_schema(schema)

        def date_schema(self, schema):
            _no_time_bounds(schema, "date")
            return super().date_schema(schema)

        def time_schema(self, schema):
            _no_time_bounds(schema, "time")
            return super().time_schema(schema)

        def timedelta_schema(self, schema):
            _no_time_bounds(schema, "timedelta")
            return super().timedelta_schema(schema)

        def bytes_schema(self, schema):
            out = super().bytes_schema(schema)
            if schema.get("max_length") is not None:  # (counted in UTF-8 bytes: ASCII keeps it exact)
                out["pattern"] = "^[\\x00-\\x7f]*$"
            return out

        def json_schema(self, schema):
            raise SchemaError("Json[...] (a string holding JSON text) cannot be enforced: use the "
                              "type itself", "contentSchema")

        def dict_schema(self, schema):
            out = super().dict_schema(schema)
            keys = schema.get("keys_schema") or {}
            text = _KEY_TEXT.get(keys.get("type"))
            if text is not None:
                if any(keys.get(k) is not None for k in ("ge", "gt", "le", "lt", "multiple_of",
                                                          "max_digits", "decimal_places")):
                    raise SchemaError(f"dict keys of type {keys['type']} with constraints cannot be "
                                      "enforced", "propertyNames")
                out["propertyNames"] = text
            return out
    return Generator


# plain decimal text, as a pattern (a string's content)
_DECIMAL_TEXT = "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?$"
# dict key types Pydantic parses from a JSON object's key strings: their plain text
_KEY_TEXT = {"int": {"pattern": "^-?(0|[1-9][0-9]*)$"}, "float": {"pattern": _DECIMAL_TEXT},
             "decimal": {"pattern": _DECIMAL_TEXT}, "bool": {"enum": ["true", "false"]}}


def _no_time_bounds(schema: dict, kind: str) -> None:
    """SchemaError for a Pydantic date/time/timedelta whose validator checks what its JSON
    Schema does not say: bounds (Field(gt=...)) or now (PastDate, FutureDatetime)."""
    bounds = [k for k in ("ge", "gt", "le", "lt") if schema.get(k) is not None]
    if bounds or schema.get("now_op"):
        what = f"bounds ({', '.join(bounds)})" if bounds else f"a {schema['now_op']} constraint (relative to now)"
        raise SchemaError(f"a {kind} with {what} cannot be enforced: Pydantic's schema does not "
                          "carry it", "format")


def decimal_json_schema(max_digits: int | None, decimal_places: int | None, bounds: dict) -> dict:
    """The JSON Schema of a Pydantic Decimal field's values: a number with at most
    `max_digits - decimal_places` digits before the point (|x| < 10^that) and a multiple
    of 10^-decimal_places, within `bounds` (Pydantic's ge/gt/le/lt/multiple_of); or,
    without bounds, the same as a string of plain decimal text (`-12.50`, what Pydantic
    writes a Decimal as). Pydantic counts digits after dropping trailing zeros (1.500
    has one decimal place); the string pattern counts the zeros written, a narrower
    language. max_digits without decimal_places limits the digits of both parts
    together, which no number keyword says: only the string, so not with bounds.

        >>> print(decimal_json_schema(4, 2, {})["anyOf"][1]["pattern"])
        ^-?(0|[1-9][0-9]{0,1})(\\.[0-9]{1,2})?$
    """
    m, d = max_digits, decimal_places
    whole = None if m is None else m if d is None else m - d
    if whole is not None and (whole < 0 or whole == 0 and not d):
        raise SchemaError(f"a Decimal with max_digits={m} and decimal_places={d} has no value",
                          "max_digits")
    if m is not None and d is None:  # digits of both parts together: a branch per integer length
        if bounds:
            raise SchemaError(f"a Decimal with max_digits={m} and bounds but no decimal_places cannot "
                              "be enforced exactly (no number keyword counts digits, a string takes no "
                              "bounds): give decimal_places too", "max_digits")
        return {"type": "string", "pattern": f"^-?(0(\\.[0-9]{{1,{m}}})?" + "".join(
            f"|[1-9][0-9]{{{i - 1}}}" + (f"(\\.[0-9]{{1,{m - i}}})?" if i < m else "")
            for i in range(1, m + 1)) + ")$"}
    if whole is None and d is None:
        pattern = _DECIMAL_TEXT
    elif whole == 0:  # a point and decimals: Pydantic counts a zero's "0" as one digit before it
        pattern = f"^-?0\\.[0-9]{{1,{d}}}$"
    else:
        head = "[0-9]*" if whole is None else f"[0-9]{{0,{whole - 1}}}"
        pattern = f"^-?(0|[1-9]{head})" + ("$" if d == 0 else f"(\\.[0-9]{{1,{d}}})?$")
    text = {"type": "string", "pattern": pattern}
    parts = [{"type": "number"}]
    for k, key in (("ge", "minimum"), ("gt", "exclusiveMinimum"), ("le", "maximum"),
                   ("lt", "exclusiveMaximum"), ("multiple_of", "multipleOf")):
        if k in bounds:
            parts.append({key: _decimal_value(bounds[k])})
    if d is not None:
        parts.append({"multipleOf": _decimal_value(Decimal(1).scaleb(-d))})
    if whole is not None:
        limit = _decimal_value(Decimal(1).scaleb(whole))
        parts.append({"exclusiveMinimum": -limit, "exclusiveMaximum": limit})
    if whole == 0:  # (Pydantic reads the number 0, or 0.0, as one digit before the point)
        parts.append({"not": {"const": 0}})
    number = parts[0] if len(parts) == 1 else {"allOf": parts}
    return number if bounds else {"anyOf": [number, text]}


def _decimal_value(v):
    """A Decimal bound as the JSON number it is (an int where it is whole)."""
    v = Decimal(v)
    return int(v) if v == v.to_integral_value() else float(v)
