"""uniqueItems over arrays of open strings, checked while decoding (fsm/json_unique.py,
fsm/unique_matcher.py). Oracles: jsonschema for whole texts; for masks, a recursive
partial-JSON reader written here, which finds the finished items of each unique array
in a text cut anywhere."""
from __future__ import annotations

import itertools
import json
import random
import re
from decimal import Decimal

import jsonschema
import numpy as np
import pytest

from structgen.fsm.core.errors import ConstraintError, SchemaError
from structgen.fsm.json.schema import SchemaWarning, canonical_json, compile_json_schema, schema_to_term
from structgen.fsm.core.matcher import TokenMatcher
from structgen.fsm.json.keys import KeyMatcher
from structgen.fsm.json.unique_matcher import UniqueMatcher

from .conftest import distinct_keys, exact_validator, small_vocab

STRINGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
TAGGED = {"type": "object", "properties": {
    "tags": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string", "minLength": 1},
                                            "uniqueItems": True, "maxItems": 5}, {"type": "null"}]},
    "n": {"type": "integer"}, "free": {"type": "array", "items": {"type": "string"}}},
    "required": ["tags"]}
# a oneOf of object variants that both keep `labels` unique; keys by pattern
VARIANTS = {"oneOf": [
    {"type": "object", "properties": {"kind": {"const": "a"}, "labels": {"$ref": "#/$defs/set"}},
     "required": ["kind"], "additionalProperties": False},
    {"type": "object", "properties": {"kind": {"const": "b"}, "labels": {"$ref": "#/$defs/set"}},
     "required": ["kind"], "patternProperties": {"^x-": {"$ref": "#/$defs/set"}}, "additionalProperties": {
         "type": "array", "items": {"type": "string"}}}],
    "$defs": {"set": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}
TREE = {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["tags"]}}}
SHORT_TREE = json.loads(json.dumps(TREE).replace('"items": {"type": "string"}', '"items": {"type": "string", "maxLength": 2}'))
OPEN_THEN_SHORT = {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "string", "maxLength": 2},
                   "uniqueItems": True}
TUPLE = {"type": "array", "prefixItems": [{"type": "integer"}, STRINGS], "items": STRINGS}
# bounded strings: the tracker also drops the tokens after which the item can only end
# as an earlier one
SHORT = {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True}
NAMES = {"type": "object", "properties": {"who": {"oneOf": [
    {"$ref": "#/$defs/name"}, {"type": "array", "items": {"$ref": "#/$defs/name"}, "uniqueItems": True}]},
    "when": {"type": "array", "items": {"type": "string", "format": "date"}, "uniqueItems": True}}, "$defs": {
    "name": {"type": "string", "maxLength": 39, "pattern": "^[a-zA-Z0-9](-?[a-zA-Z0-9])*$"}}}


INTS = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
NUMS = {"type": "array", "items": {"type": "number"}, "uniqueItems": True}
# winget's success codes: integers but for a few that a `not` lists
INTS_BUT = {"type": "array", "items": {"type": "integer", "not": {"enum": [0, 1, 10]}}, "uniqueItems": True}
# a lower bound of 0 or more leaves them endless (set[conint(ge=0)], PositiveInt)
NATURALS = {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True}
POSITIVE = {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0.5}, "uniqueItems": True}
# compose-spec's `expose`: strings and numbers, kept apart ("1" is not 1)
PORTS = {"type": "object", "properties": {"expose": {"type": "array", "items": {"type": ["string", "integer"]},
                                                     "uniqueItems": True}, "n": {"type": "number"}}}
NUM_TREE = json.loads(json.dumps(TREE).replace('"items": {"type": "string"}', '"items": {"type": "integer"}'))
TUPLE_NUMS = {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "uniqueItems": True}
# gitlab-ci's hidden jobs: `anyOf: [job, {}]` always holds, so its unique exit codes do
# not bind there (they do under other keys); an anyOf with a `true` branch
JOB = {"type": "object", "properties": {"exit_codes": INTS, "tags": STRINGS}}
HIDDEN = {"type": "object", "patternProperties": {"^[.]": {"anyOf": [JOB, {"title": "anything"}]}},
          "additionalProperties": JOB, "properties": {"v": {"anyOf": [True, STRINGS]}}}
# JSON-stat's links: keys are 77 link relation names, one pattern, whose DFA passes 256
# states (the tracker's table of it was capped there: the unique notes below were
# read as maybe applying, and refused); here 80 names of 8 random characters
_rng = random.Random(5)
RELATIONS = ["edit-form", "self"] + ["".join(_rng.choice("abcdefghijklmnopqrstuvwxyz-") for _ in range(8))
                                     for _ in range(78)]
LINKS = {"type": "object", "properties": {"note": STRINGS, "link": {"type": "object", "patternProperties": {
    "^(" + "|".join(RELATIONS) + ")$": {"type": "array", "items": {"type": "object", "properties": {
        "href": {"type": "string"}, "note": STRINGS}}}}}}}
BOUNDED_CODES = {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True}  # (refused)
# localazy's upload files: an untyped `{items: ...}` branch takes every object, so the
# unique features of an upload object bind nothing at `files` (they do inside its list)
UPLOAD = {"type": "object", "properties": {"features": STRINGS}}
FILES = {"type": "object", "properties": {"files": {"type": ["string", "array", "object"], "anyOf": [
    {"type": "string"}, UPLOAD, {"items": {"anyOf": [{"type": "string"}, UPLOAD]}}]}}}
# listed strings (an enum): once every value came, the comma that would begin another
# item is refused too
LETTERS = ["a", "ab", "b", "ba", "c"]
LISTED = {"type": "array", "items": {"enum": LETTERS}, "uniqueItems": True, "minItems": 1}
# and strings of fewer than 65536 values, counted (citation's languages: ^[a-z]{2,3}$)
PAIRED = ["a", "b", "aa", "ab", "ba", "bb"]
COUNTED = {"type": "array", "items": {"type": "string", "pattern": "^[ab]{1,2}$"}, "uniqueItems": True}
# travis' osx_image: a value or a unique array of them, through a $ref (20 values: more
# than the compiler's own finite sets take)
XCODES = [f"xcode{i}" for i in range(20)]
# gitlab-ci's stages: strings or lists of strings (a list repeats by its values)
STAGES = {"type": "object", "properties": {"stages": {"type": "array", "items": {"anyOf": [
    {"type": "string"}, {"type": "array", "items": {"type": "string"}}]}, "uniqueItems": True, "minItems": 1}}}
# compose's ports: numbers, strings, or objects that take `x-` keys with any value
SPEC = {"type": "object", "properties": {"ports": {"type": "array", "items": {"oneOf": [
    {"type": "number"}, {"type": "string"}, {"type": "object", "properties": {
        "name": {"type": "string"}, "target": {"type": ["integer", "string"]}, "bind": {"type": "object", "properties": {
            "create": {"type": "boolean"}}, "additionalProperties": False}},
        "additionalProperties": False, "patternProperties": {"^x-": {}}}]}, "uniqueItems": True}}}
# closed objects (travis' {"secure": ...}, citation's authors): the tracker also drops the
# tokens after which the item can only end as an earlier one
SECURE = {"type": "object", "properties": {"env": {"type": "array", "uniqueItems": True, "items": {"oneOf": [
    {"type": "string"}, {"type": "object", "properties": {"secure": {"type": "string"}},
                         "additionalProperties": False}]}}}}
PAIRS = {"type": "array", "uniqueItems": True, "items": {"type": "object", "additionalProperties": False,
         "required": ["s", "n"], "properties": {"s": {"type": "string", "maxLength": 1},
                                                "n": {"type": "integer", "minimum": 0, "maximum": 2}}}}
AUTHORS = {"type": "array", "uniqueItems": True, "minItems": 1, "items": {"anyOf": [
    {"type": "object", "additionalProperties": False, "properties": {
        "family": {"type": "string", "minLength": 1}, "given": {"type": "string"},
        "email": {"type": "string", "format": "email"}, "age": {"type": "number", "minimum": 0},
        "alias": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "additionalProperties": False, "required": ["name"], "properties": {
        "name": {"type": "string"}, "email": {"type": "string", "format": "email"}, "tags": {
            "type": "array", "items": {"type": "object", "properties": {"k": {"type": "boolean"}},
                                       "additionalProperties": False}}}}]}}
# github-issue-forms: items whose `type` decides, through if/then, whether their options
# are unique (dropdown, checks) or not (textarea); `tag` before `type` in the key order
FORM_ITEM = {"type": "object", "properties": {"tag": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                                              "type": {"enum": ["dropdown", "textarea", "checks"]},
                                              "id": {"type": "string"}}, "allOf": [
    {"if": {"properties": {"type": {"const": "dropdown"}}}, "then": {"properties": {
        "tag": True, "type": True, "id": True, "options": {"type": "array", "items": {"type": "string"},
                                                          "uniqueItems": True}}, "additionalProperties": False}},
    {"if": {"properties": {"type": {"const": "textarea"}}}, "then": {"properties": {
        "tag": True, "type": True, "id": True, "options": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": False}},
    {"if": {"properties": {"type": {"const": "checks"}}, "required": ["type"]}, "then": {"properties": {
        "options": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}},
     "else": {"properties": {"id": {"maxLength": 5}}}}]}
FORMS = {"type": "array", "items": FORM_ITEM | {"required": ["type"]}}
LOOSE_FORMS = {"type": "array", "items": FORM_ITEM}  # (type may be absent: dropdown's `then` holds)
# compose's volumes: open objects as items, with a unique list of labels below
VOLUMES = {"type": "object", "properties": {"volumes": {"type": "array", "uniqueItems": True, "items": {"oneOf": [
    {"type": "string"}, {"type": "object", "required": ["type"], "additionalProperties": False,
                         "patternProperties": {"^x-": {}}, "properties": {
        "type": {"enum": ["bind", "volume"]}, "volume": {"type": "object", "additionalProperties": False,
                                                      "properties": {"labels": {"oneOf": [
                                                          {"type": "object", "additionalProperties": {"type": "string"}},
                                                          {"type": "array", "items": {"type": "string"},
                                                           "uniqueItems": True}]}}}}}]}}}}
# closed objects that hold a unique array (travis' notifications, citation's references):
# read with their frames, walked on both levels; `t` of two listed values, so an item
# {"n":"x","t":["a"... may only go on as `]` once {"n":"x","t":["a","b"]} came
CAPS = {"type": "array", "uniqueItems": True, "items": {"type": "object", "additionalProperties": False, "properties": {
    "n": {"type": "string", "maxLength": 1}, "t": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}}}}
# travis' shape: a notification object (reached by a pointer through a key that is no
# keyword) or a unique array of them, whose rooms are a unique array of patterned strings
# or closed {"secure": ...} objects
NOTIFY = {"definitions": {"room": {"oneOf": [{"type": "string", "pattern": ".+:.+"}, {
    "type": "object", "additionalProperties": False, "properties": {"secure": {"type": "string", "minLength": 1}}}]},
    "notification": {"slack": {"type": "object", "additionalProperties": False, "properties": {
        "enabled": {"type": "boolean"}, "rooms": {"type": "array", "uniqueItems": True, "minItems": 1,
                                                  "items": {"$ref": "#/definitions/room"}},
        "on": {"enum": ["always", "never"]}}}}},
    "type": "object", "properties": {"slack": {"oneOf": [{"$ref": "#/definitions/notification/slack"}, {
        "type": "array", "uniqueItems": True, "minItems": 1, "items": {"$ref": "#/definitions/notification/slack"}}]}}}
# any values (the test suite's uniqueItems): literals by their first byte, lists and
# objects whole, as values; two booleans first, then anything; literals beside strings
ANY = {"uniqueItems": True}
FLAGS_FIRST = {"prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "uniqueItems": True}
MIXED = {"type": "array", "items": {"type": ["boolean", "string", "null"]}, "uniqueItems": True}
# stylelint's rule pairs: a literal narrowed (an enum of one) beside open objects
NARROWED_LITERALS = {"type": "array", "maxItems": 3, "uniqueItems": True, "items": {
    "type": ["boolean", "object"], "anyOf": [{"type": "boolean", "enum": [True, {}]},
                                             {"type": "object", "properties": {"m": {"type": "string"}}}]}}
OPEN_ITEMS = {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}},
              "uniqueItems": True}
XCODE = {"type": "object", "properties": {"osx": {"oneOf": [{"$ref": "#/$defs/v"}, {
    "type": "array", "items": {"$ref": "#/$defs/v"}, "uniqueItems": True, "minItems": 1}]}},
    "$defs": {"v": {"enum": XCODES}}}


def valid(schema, inst) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(inst)


@pytest.mark.parametrize("schema, instances", [
    (STRINGS, [[], ["a"], ["a", "b"], ["a", "a"], ["a", "b", "a"], ["é", "e"], ["é", "é"], ["", ""],
               ["😀", "x", "😀"], ["a\"b", "a\\b", "a\"b"]]),
    (TAGGED, [{"tags": ["x", "y"]}, {"tags": ["x", "x"]}, {"tags": "x"}, {"tags": None},
              {"tags": ["x"], "free": ["a", "a"]}, {"tags": ["a", "b", "c", "b"], "n": 1}]),
    (VARIANTS, [{"kind": "a", "labels": ["p", "q"]}, {"kind": "a", "labels": ["p", "p"]},
                {"kind": "b", "labels": ["p", "p"]}, {"kind": "b", "x-y": ["s", "s"]},
                {"kind": "b", "x-y": ["s", "t"], "other": ["s", "s"]}, {"kind": "b", "ax-": ["s", "s"]}]),
    (TREE, [{"tags": ["a"], "kids": [{"tags": ["a", "b"]}, {"tags": ["c", "c"]}]},
            {"tags": ["a"], "kids": [{"tags": ["a", "b"], "kids": [{"tags": []}]}]},
            {"tags": ["a", "a"]}]),
    (TUPLE, [[1, ["a", "a"]], [1, ["a"], ["b", "b"]], [1, ["a"], ["b"], ["a", "b"]], [1, [], ["x", "y", "x"]]]),
    (SHORT, [["a", "ab", "b"], ["ab", "ab"], ["é", "e", "é"], ["", "a", ""]]),
    ({"type": "array", "items": {"type": "string", "pattern": "^x"}, "uniqueItems": True},
     [["xa", "xb"], ["xa", "x", "xa"], ["x"]]),
    ({"type": "array", "items": {"type": "string", "pattern": "^x*$"}, "uniqueItems": True},  # (one text a length:
     [["", "x", "xx"], ["xx", "x", "xx"]]),  # counted past the lengths, endless by its cycle)
    (NAMES, [{"who": ["ada", "bob"]}, {"who": ["ada", "ada"]}, {"who": "ada"}, {"who": ["a-b", "a-b-c", "a-b"]},
             {"when": ["2024-01-01", "2024-01-02"]}, {"when": ["2024-01-01", "2024-01-01"]}]),
    (INTS, [[1, 2], [1, 1], [0, 10, 1], [-1, 1], [-1, -1], [0, 0], [12, 3, 123, 12]]),
    (NUMS, [[1.5, 1.05], [1.5, 1.5], [0.1, 0.01, 0], [-2.5, 2.5, -2.5], [0, 0.5, 0]]),
    (PORTS, [{"expose": ["1", 1]}, {"expose": [1, "1", 1]}, {"expose": ["a", 2, "a"]}, {"expose": [80, 443], "n": 1},
             {"expose": [80, 8080, 80]}]),
    (TUPLE_NUMS, [["a", 1, 2], ["a", 1, 1], ["1", 1], ["a", 2, 3, 2]]),
    (HIDDEN, [{".a": {"exit_codes": [1, 1]}}, {"b": {"exit_codes": [1, 1]}}, {"b": {"exit_codes": [1, 2]}},
              {".a": {"tags": ["x", "x"]}, "b": {"tags": ["x", "y", "x"]}}, {".a": 5, "b": {"tags": ["x"]}},
              {"v": ["x", "x"]}, {"v": 3, "c": {"exit_codes": [0, 0]}}]),
    (LINKS, [{"note": ["a", "a"]}, {"link": {"edit-form": [{"note": ["a", "b"]}, {"note": ["b"]}]}},
             {"link": {"edit-form": [{"note": ["a", "a"]}]}}, {"link": {"edit-forms": [{"note": ["a", "a"]}]}},
             {"link": {"self": [{"href": "x", "note": ["x", "y", "x"]}], "x": {"note": ["a", "a"]}}},
             {"link": {"self": [{"href": "x", "note": ["x", "y"]}], "x": {"note": ["a", "a"]}}}]),
    (FILES, [{"files": {"features": ["a", "a"]}}, {"files": ["x", {"features": ["a", "a"]}]},
             {"files": ["x", {"features": ["a", "b"]}, {"features": ["b"]}]}, {"files": [["a"], "b"]}]),
    ({"properties": {"t": STRINGS, "c": {"anyOf": [BOUNDED_CODES, {}]}}},  # (c's anyOf read as absent)
     [{"t": ["a"], "c": [1, 1]}, {"t": ["a", "a"], "c": [1, 2]}, {"c": [0, 0, 0]}]),
    (STAGES, [{"stages": ["a", ["a"]]}, {"stages": [["a"], ["a"]]}, {"stages": [["a", "b"], ["b", "a"]]},
              {"stages": [[], []]}, {"stages": [["x"], "x", ["x"]]}, {"stages": ["b", ["]"], ["]"]]},
              {"stages": [["a\"]"], ["a\"]"]]}, {"stages": [["é"], ["e"], ["é", "e"]]}]),
    (SPEC, [{"ports": [{"name": "a"}, {"name": "a"}]}, {"ports": [{"name": "a"}, {"name": "b"}, "a", 1]},
            {"ports": [{"target": 80}, {"target": "80"}]}, {"ports": [{"x-a": 1, "x-b": 2}, {"x-b": 2, "x-a": 1}]},
            {"ports": [{"x-a": {"k": [1, True]}}, {"x-a": {"k": [1, 1]}}]}, {"ports": [{}, {}]},
            {"ports": [{"name": "}"}, {"name": "}"}]}, {"ports": [{"bind": {"create": True}}, {"bind": {}}]},
            {"ports": [{"bind": {"create": False}}, {"bind": {"create": False}}]}, {"ports": [{}, "{}", 1, "1"]}]),
    (LISTED, [["a"], LETTERS, LETTERS[::-1], ["a", "a"], ["c", "b", "c"], LETTERS + ["a"], ["ab", "a", "ba"], []]),
    (XCODE, [{"osx": "xcode1"}, {"osx": ["xcode1", "xcode12"]}, {"osx": ["xcode1", "xcode1"]}, {"osx": XCODES},
             {"osx": XCODES + ["xcode7"]}, {"osx": []}]),
    (COUNTED, [PAIRED, PAIRED[::-1], ["a", "a"], PAIRED + ["ab"], ["ab", "a", "b"], []]),
    ({"type": "array", "items": {"type": "string", "pattern": "^[a-c]{1,9}$"}, "uniqueItems": True, "minItems": 2},
     [["a", "b"], ["a", "a"], ["abc", "cba", "abc"], ["a"]]),
    (SECURE, [{"env": [{"secure": "a"}, {"secure": "a"}]}, {"env": [{"secure": "a"}, "a", {"secure": "b"}]},
              {"env": [{}, {}]}, {"env": [{}, "{}"]}, {"env": [{"secure": "}"}, {"secure": "}"}]}]),
    (FORMS, [[{"type": "dropdown", "options": ["a", "a"]}], [{"type": "dropdown", "options": ["a", "b"]}],
             [{"type": "textarea", "options": ["a", "a"]}], [{"type": "checks", "options": [1, 1]}],
             [{"type": "checks", "options": [1, 2], "x": ["a", "a"]}], [{"type": "dropdown", "id": "abcdef"}],
             [{"tag": ["x", "x"], "type": "textarea"}], [{"tag": ["x", "y"], "type": "checks", "id": "abcdef"}],
             [{"type": "textarea", "id": "a", "options": ["b", "b"]}, {"type": "dropdown", "options": ["b", "b"]}]]),
    # an `if` on a key's value holds for an array (then applies), even where it requires the key
    ({"type": "array", "items": {"type": "string"}, "if": {"properties": {"k": {"const": "x"}}},
      "then": {"uniqueItems": True}}, [["a", "a"], ["a", "b"]]),
    ({"type": ["array", "object"], "items": {"type": "string"}, "if": {"properties": {"k": {"const": "x"}},
                                                                       "required": ["k"]},
      "then": {"uniqueItems": True}}, [["a", "a"], ["a", "b"], {"k": "y"}]),
    (VOLUMES, [{"volumes": [{"type": "bind"}, {"type": "bind"}]}, {"volumes": [{"type": "volume", "volume": {
        "labels": ["a", "a"]}}]}, {"volumes": [{"type": "volume", "volume": {"labels": ["a", "b"]}}, {
            "type": "volume", "volume": {"labels": ["b", "a"]}}]}, {"volumes": [{"type": "volume", "volume": {
                "labels": {"a": "x"}}}, {"type": "volume", "volume": {"labels": {"a": "x"}}}]},
        {"volumes": [{"type": "bind", "x-a": {"k": [1, 1]}}, {"type": "bind", "x-a": {"k": [1, 1]}}]},
        {"volumes": [{"type": "bind", "x-a": ["]"]}, "a", {"type": "bind", "x-a": ["}"]}]}]),
    ({"type": "array", "items": {"type": "object", "patternProperties": {"^x-": {}}, "properties": {"t": STRINGS}},
      "uniqueItems": True}, [[{"t": ["a"]}, {"t": ["a"]}], [{"t": ["a", "a"]}], [{"t": ["a", "b"]}, {"t": ["b", "a"]}],
                             [{"t": []}, {"t": [], "x-": 1}]]),
    (LOOSE_FORMS, [[{"options": ["a", "a"]}], [{"options": ["a", "b"]}], [{"id": "a", "options": ["a", "a"]}],
                   [{"tag": ["x"], "options": ["a", "a"]}], [{"id": "abcdef"}]]),
    (PAIRS, [[{"s": "a", "n": 1}, {"s": "a", "n": 1}], [{"s": "a", "n": 1}, {"s": "a", "n": 2}],
             [{"s": "", "n": 0}, {"s": "", "n": 0}], [{"s": "é", "n": 0}, {"s": "e", "n": 0}]]),
    (ANY, [[True, False, None, 0, "", [], {}], [True, True], [False, 0], [1, True], [None, "null", None],
           [[True], [True]], [[1], [1.0]], [{"a": [1, 2]}, {"a": [1, 2]}], [{"a": 1, "b": 2}, {"b": 2, "a": 1}],
           [[], {}], [{}, {}], "x", 5, {"a": [1, 1]}, [[["a"]], [["a"]]], [["a", True], ["a", "true"]],
           [False, [False], {"f": False}, "false", False]]),
    (FLAGS_FIRST, [[True, False], [True, True], [False, True, 1, "a"], [True, False, True], [True, False, [], []]]),
    (MIXED, [[True, "true", None, "null"], [True, "a", True], [None, None], ["", False, ""]]),
    (CAPS, [[{"n": "x", "t": ["a"]}, {"n": "x", "t": ["a"]}], [{"n": "x", "t": ["a", "b"]}, {"n": "x", "t": ["b", "a"]}],
            [{"n": "x", "t": ["a", "a"]}], [{"t": []}, {}, {"t": []}], [{"n": "x"}, {"n": "y"}, {"n": "x", "t": []}]]),
    (NOTIFY, [{"slack": [{"rooms": ["a:b"]}, {"rooms": ["a:b"]}]}, {"slack": [{"rooms": ["a:b", "a:b"]}]},
              {"slack": {"rooms": ["a:b", "a:b"]}}, {"slack": {"rooms": ["a:b", {"secure": "a:b"}]}},
              {"slack": [{"rooms": [{"secure": "x"}], "on": "never"}, {"rooms": [{"secure": "x"}], "on": "always"}]},
              {"slack": [{"enabled": True, "rooms": [{"secure": "x"}, {"secure": "x"}]}]},
              {"slack": [{"enabled": True}, {"enabled": True}]}]),
    (OPEN_ITEMS, [[{"a": 1}, {"a": 1}], [{"a": 1}, {"a": 1, "b": True}], [{"b": [1]}, {"b": [1.0]}], [{}, {}]]),
    (AUTHORS, [[{"family": "x", "age": 1}, {"family": "x", "age": 1}], [{"family": "x"}, {"name": "x"}],
               [{"name": "x", "tags": [{"k": True}]}, {"name": "x", "tags": [{"k": True}]}],
               [{"name": "x", "tags": [{"k": True}]}, {"name": "x", "tags": [{"k": False}]}],
               [{"alias": ["a", "b"]}, {"alias": ["b", "a"]}], [{}, {"given": ""}, {}]]),
])
def test_texts_agree_with_jsonschema(schema, instances):
    """A text is accepted exactly when the instance is valid, written compactly and with
    flexible whitespace."""
    flexible = schema_to_term(schema, whitespace="flexible")
    cs = schema_to_term(schema)
    assert cs.unique is not None and not cs.relaxed
    for inst in instances:
        text = canonical_json(inst, cs.key_order)
        assert cs.accepts(text) == valid(schema, inst), text
        assert flexible.accepts(canonical_json(inst, cs.key_order, indent=1)) == valid(schema, inst), text


@pytest.mark.parametrize("schema, texts", [
    (INTS, ['[1,1.0]', '[5.0,5]', '[0,0.00]', '[10,1.0,10.0]', '[1,2.0]', '[-3,-3.0]']),
    (INTS_BUT, ['[2,2.0]', '[2,3]', '[0,2]', '[2,1]', '[100,10]', '[100,100.0]', '[-1,-1]', '[11,101]']),
    (NATURALS, ['[0,0]', '[0,0.0]', '[0,1]', '[12,3,12]', '[5,5.0]', '[1,10,100]']),
    (POSITIVE, ['[1,1.0]', '[0.6,0.60]', '[0.6,0.61]', '[1.5,15]', '[0.51,0.510]']),
    (NUMS, ['[1.5,1.50]', '[2,2.0]', '[0.10,0.1]', '[1.05,1.5]', '[0,0.0]', '[-0.5,-0.50]']),
    (PORTS, ['{"expose":[1,"1",1.0]}', '{"expose":["1.0",1]}', '{"expose":[8,"8",8.00]}']),
    (PAIRS, ['[{"s":"a","n":1},{"s":"a","n":1.0}]', '[{"s":"a","n":1.00},{"s":"a","n":1}]',
             '[{"s":"a","n":1.0},{"s":"a","n":2.0}]']),
    (AUTHORS, ['[{"age":1.50},{"age":1.5}]', '[{"age":10},{"age":1.0}]', '[{"age":0.0},{"age":0}]']),
])
def test_numbers_repeat_by_value(schema, texts):
    """Number items are values: every text of one (1, 1.0) repeats it; a string never
    repeats a number."""
    cs = schema_to_term(schema)
    for text in texts:
        assert cs.accepts(text) == valid(schema, json.loads(text)), text


def test_escaped_repeat_is_refused():
    """The automaton writes each string one way (only the escapes JSON needs), but the
    check reads items as values: an escaped repeat is one too."""
    plan = schema_to_term(STRINGS).unique
    for text in ['["a","\\u0061"]', '["é","\\u00e9"]', '["\\u00e9","é"]', '["😀","\\ud83d\\ude00"]',
                 '["\\/","/"]', '["\\n","\\u000a"]']:
        assert not plan.accepts(text), text
        assert valid(STRINGS, json.loads(text)) is False
    for text in ['["\\ud83d","\\ude00"]', '["a","\\u0062"]', '["\\"","\\\\"]']:  # (two halves of a pair...)
        assert plan.accepts(text), text
        assert valid(STRINGS, json.loads(text))


# -- masks ---------------------------------------------------------------------------------
def _frozen(v):
    """A JSON value (numbers as Decimals) as a hashable one that equals exactly the equal
    values: objects in any key order, numbers by value, true never 1."""
    if isinstance(v, dict):
        return frozenset((k, _frozen(x)) for k, x in v.items())
    if isinstance(v, list):
        return tuple(_frozen(x) for x in v)
    return ("n", v) if isinstance(v, Decimal) else ("c", repr(v))


def _items(text: str, unique_at, unfinished=None):
    """The finished string, number and list items of the arrays at paths where
    `unique_at(path)`, in a JSON text cut anywhere (recursive descent: independent of
    the tracker's machine), as ("s", the string), ("n", the Decimal) or ("v", a list,
    an object or a literal, which its first character finishes: _frozen); `unfinished` (a
    list) gets (the items before, the raw text, "s" or "n") of an item cut short, or
    (the items before, "", ",") where the text ends after a comma."""
    out, i = [], 0

    def ws():
        nonlocal i
        while i < len(text) and text[i] in " \t\n\r":
            i += 1

    def string():  # -> the decoded string, or None where the text ends inside it
        nonlocal i
        j = i + 1
        while j < len(text):
            if text[j] == "\\":
                j += 2
                continue
            if text[j] == '"':
                s = json.loads(text[i:j + 1])
                i = j + 1
                return s
            j += 1
        i = len(text)
        return None

    def value(path):
        nonlocal i
        ws()
        if i >= len(text):
            return
        c = text[i]
        if c == '"':
            string()
        elif c == "{":
            i += 1
            while True:
                ws()
                if i >= len(text) or text[i] == "}":
                    i += 1
                    return
                if text[i] == ",":
                    i += 1
                    ws()
                if i >= len(text):
                    return
                key = string()
                if key is None:
                    return
                ws()
                i += 1  # :
                value(path + (key,))
                if i >= len(text):
                    return
        elif c == "[":
            i += 1
            seen = [] if unique_at(path) else None
            if seen is not None:
                out.append(seen)
            k = 0
            while True:
                ws()
                if i >= len(text) or text[i] == "]":
                    i += 1
                    return
                comma = text[i] == ","
                if comma:
                    i += 1
                    k += 1
                    ws()
                if i >= len(text):
                    if comma and seen is not None and unfinished is not None:
                        unfinished.append((list(seen), "", ","))  # (an item must begin)
                    return
                if seen is not None and text[i] == '"':
                    at = i
                    s = string()
                    if s is not None:
                        seen.append(("s", s))
                    elif unfinished is not None:
                        unfinished.append((list(seen), text[at + 1:], "s"))
                elif seen is not None and text[i] in "[{":  # (a list or an object, read whole: STAGES, SPEC)
                    at, depth = i, 0
                    while i < len(text):
                        if text[i] == '"':
                            if string() is None:
                                break
                            continue
                        depth += 1 if text[i] in "[{" else -1 if text[i] in "]}" else 0
                        i += 1
                        if not depth:
                            seen.append(("v", _frozen(json.loads(text[at:i], parse_int=Decimal, parse_float=Decimal))))
                            break
                    else:
                        depth = -1
                    if depth and unfinished is not None:  # (cut short)
                        unfinished.append((list(seen), text[at:], "o"))
                    # (the unique arrays inside it: compose's volume labels)
                    out.extend(_items(text[at:i], lambda p, k=k: unique_at(path + (k,) + p), unfinished))
                elif seen is not None and text[i] in "tfn":  # (a literal: its first character says which)
                    seen.append(("v", _frozen({"t": True, "f": False, "n": None}[text[i]])))
                    while i < len(text) and text[i].isalpha():
                        i += 1
                elif seen is not None and text[i] in "-0123456789":
                    j = re.compile(r"[0-9.eE+-]*").match(text, i).end()
                    if j < len(text):
                        seen.append(("n", Decimal(text[i:j])))
                    elif unfinished is not None:
                        unfinished.append((list(seen), text[i:], "n"))
                    i = j
                else:
                    value(path + (k,))
                if i >= len(text):
                    return
        else:
            while i < len(text) and text[i] not in ",]}":
                i += 1

    value(())
    return out


_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _repeats(text: str, unique_at, max_length=None, integers=False, listed=None, cornered=None) -> bool:
    """Whether a unique array repeats a finished item, or its unfinished item can only
    end as an earlier one: a string of at most max_length code points as long as that
    and an earlier item; one of the `listed` strings whose every listed ending came
    before (after a comma: every listed value did); an integer (`integers`) whose every
    ending in JSON (up to two more characters) is an earlier item; an object item
    whose every ending is one, as `cornered(before, raw)` tells (_pairs_cornered,
    _caps_cornered)."""
    if any(len(set(s)) < len(s) for s in _items(text, unique_at)):
        return True
    cut: list = []
    _items(text, unique_at, cut)
    if not cut:
        return False
    before, raw, kind = cut[0]
    if kind == "o":
        return cornered is not None and cornered(before, raw)
    if listed is not None:
        if kind == ",":
            return all(("s", v) in before for v in listed)
        partial = json.loads('"' + raw + '"')  # (the listed values need no escapes)
        return all(("s", v) in before for v in listed if v.startswith(partial))
    if kind == ",":
        return False
    if kind == "n":
        if not integers:
            return False
        ends = [raw + "".join(x) for k in range(3) for x in itertools.product("0123456789.", repeat=k)]
        values = {Decimal(e) for e in ends if _JSON_NUMBER.fullmatch(e) and Decimal(e) == Decimal(e).to_integral_value()}
        return bool(values) and all(("n", v) in before for v in values)
    if max_length is None or "\ufffd" in raw or re.search(r'(^|[^\\])(\\\\)*\\$', raw):
        return False  # (a character or an escape cut short: many ways on)
    try:
        partial = json.loads('"' + raw + '"')
    except ValueError:  # (a \u escape cut short)
        return False
    return len(partial) == max_length and ("s", partial) in before


def _pairs_cornered(before: list, raw: str) -> bool:
    """Whether a PAIRS item cut short (`raw`: compact, from its `{`; keys s then n, both
    required) can only end as an earlier item: its s is known (closed, or one whole
    character: maxLength 1) and every n in 0..2 with a text (1, 1.0, 1.00...) that
    begins what came of it is an earlier item's with that s. Whitespace outside strings
    is read past."""
    raw = _compact(raw)
    head = '{"s":"'
    if not raw.startswith(head):
        return False
    body, end = raw[len(head):], None
    k = 0
    while k < len(body):
        if body[k] == "\\":
            k += 2
        elif body[k] == '"':
            end = k
            break
        else:
            k += 1
    try:
        s = json.loads('"' + body[:end] + '"')
    except ValueError:  # (an escape cut short)
        return False
    if end is None and len(s) != 1:  # (s may still be any string)
        return False
    after = body[end + 1:] if end is not None else ""
    t = after[len(',"n":'):]
    ns = [n for n in range(3) if any(x.startswith(t) for x in [str(n)] + [f"{n}." + "0" * z for z in range(1, len(t) + 2)])]
    return all(("v", _frozen({"s": s, "n": Decimal(n)})) in before for n in ns)


def _caps_cornered(before: list, raw: str) -> bool:
    """Whether a CAPS item cut short (`raw`, from its `{`) can only end as an earlier
    item, or not at all: every completion of it (n: absent, or the character begun, or
    any other; t: absent, or a list of distinct values of a and b) whose compact text
    begins what came of it (whitespace outside strings read past; more than the flexible
    mode's 20 after a bracket are those before its closing one too: it comes next) is
    an earlier item."""
    run = re.search(r"([\[{])[ \t\n\r]{21,}$", raw)
    raw = _compact(raw) + ("" if run is None else "}" if run.group(1) == "{" else "]")
    names = [None, "", "\u2603"]  # (absent, empty, one no earlier item has)
    begun = re.match(r'\{"n":"((?:[^"\\]|\\.)*)', raw)
    if begun:
        if raw[begun.end():begun.end() + 1] == "\\":  # (an escape cut short: many characters on)
            return False
        names.append(json.loads('"' + begun.group(1) + '"'))
    lists = [None, [], ["a"], ["b"], ["a", "b"], ["b", "a"]]
    ends = [{k: v for k, v in (("n", n), ("t", t)) if v is not None} for n in names for t in lists
            if n is None or len(n) <= 1]
    fits = [e for e in ends if json.dumps(e, separators=(",", ":"), ensure_ascii=False).startswith(raw)]
    return all(("v", _frozen(e)) in before for e in fits)


def _compact(raw: str) -> str:
    """A JSON text cut anywhere, without whitespace outside its strings."""
    return "".join(part if part.startswith('"') else re.sub(r"[ \t\n\r]", "", part)
                   for part in re.findall(r'"(?:[^"\\]|\\.)*(?:"|\\?$)|[^"]+', raw))


def _walk_masks(auto, vocab, unique_at, rng, start=(), steps=40, quote_bias=0.6, max_length=None, numbers=None,
                listed=None, cornered=None):
    """A random token walk; at each step the unique mask must be the automaton's mask less
    exactly the tokens that finish a repeated item (checked on every token the mask
    allows where it allows few, else on every token with a quote and a sample of the
    others). The walk often starts an item by copying an earlier one (`numbers`
    "number" or "integer": a number too, in another of its texts), token by token, so
    that it meets repeats. Returns (the text, whether it ended, how many tokens were
    dropped)."""
    m = auto.matcher()
    m = m.inner if isinstance(m, KeyMatcher) else m  # (the keys' tracker: tests/test_json_keys.py)
    assert isinstance(m, UniqueMatcher) and m.accept_tokens(start)
    plain = TokenMatcher(auto)
    row, base = np.zeros(vocab.num_words, dtype=np.int32), np.zeros(vocab.num_words, dtype=np.int32)
    data = vocab.token_bytes
    quoted = [t for t, b in enumerate(data) if b and b'"' in b]
    quoted_set = set(quoted)
    text, dropped, echo = b"".join(data[t] for t in start), 0, None
    for _ in range(steps):
        m.fill_next_token_bitmask(row)
        plain.state = m.state
        plain.fill_next_token_bitmask(base)
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab.size]
        base_bits = np.unpackbits(base.view(np.uint8), bitorder="little")[:vocab.size]
        assert not (bits & ~base_bits).any()
        assert bits.any(), text  # never a dead end
        allowed = np.flatnonzero(base_bits).tolist()
        sample = allowed if len(allowed) <= 400 else quoted + rng.sample(range(len(data)), 200)
        for t in sample:
            if base_bits[t] and data[t]:
                after = (text + data[t]).decode("utf-8", "replace")
                assert bool(bits[t]) == (not _repeats(after, unique_at, max_length, numbers == "integer", listed,
                                                      cornered)), \
                    (text, data[t])
                dropped += not bits[t]
        ids = np.flatnonzero(bits)
        if echo is None and rng.random() < 0.7 and text.endswith((b'["', b',"')):
            earlier = re.findall(rb'[\[,]"([^"\\]*")', text[:-1])  # (repeat an earlier item)
            echo = rng.choice(earlier) if earlier else None
        elif echo is None and rng.random() < 0.7 and text.endswith((b"[[", b",[")):
            earlier = re.findall(rb'[\[,]\[((?:"[^"\\]*"(?:,"[^"\\]*")*)?\])', text[:-1])  # (an earlier list)
            echo = rng.choice(earlier) if earlier else None
        elif echo is None and rng.random() < 0.7 and text.endswith((b"[{", b",{")):
            earlier = re.findall(rb'[\[,]\{([^{}]*\})', text[:-1])  # (an earlier flat object)
            echo = rng.choice(earlier) if earlier else None
        elif numbers and echo is None and rng.random() < 0.7 and text.rstrip().endswith((b"[", b",")):
            earlier = re.findall(rb"[\[,]\s*(-?[0-9][0-9.]*)(?=\s*[,\]])", text)
            if earlier:
                echo = rng.choice(earlier)
                echo += rng.choice([b"", b"0"] if b"." in echo else [b"", b".", b".0"])  # (the same value)
        fits = [t for t in ids.tolist() if data[t] and echo.startswith(data[t])] if echo else []
        if fits:
            t = max(fits, key=lambda t: len(data[t]))
            echo = echo[len(data[t]):] or None
        else:
            echo = None
            opening = [t for t in ids.tolist() if data[t] and b"[" in data[t]] if rng.random() < 0.3 else []
            closing = [t for t in ids.tolist() if t in quoted_set or (numbers and (data[t] or b"")[:1] == b",")] \
                if rng.random() < quote_bias else []
            solid = [t for t in ids.tolist() if (data[t] or b"x").strip()] if rng.random() < 0.9 else []
            t = rng.choice(opening or closing or solid) if opening or closing or solid else int(rng.choice(ids))
        assert m.accept_token(t)
        if m.is_terminated():
            return text, True, dropped
        text += data[t]
    return text, False, dropped


@pytest.mark.parametrize("schema, unique_at, start, max_length", [
    (STRINGS, lambda p: p == (), "", None),
    (TAGGED, lambda p: p == ("tags",), '{"tags":[', None),
    (VARIANTS, lambda p: len(p) == 1 and (p[0] == "labels" or p[0].startswith("x-")), '{"kind":"b","x-a":[', None),
    (TREE, lambda p: p and p[-1] == "tags", '{"tags":["a"],"kids":[{"tags":[', None),
    (SHORT, lambda p: p == (), "", 2),
    (SHORT_TREE, lambda p: p and p[-1] == "tags", '{"tags":["a"],"kids":[{"tags":[', 2),  # (the grammar path)
    (OPEN_THEN_SHORT, lambda p: p == (), "", 2),  # (a bounded slot after an open one: still bounded)
])
def test_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab, schema, unique_at, start, max_length):
    _check_walks(smol_tokenizer, smol_vocab, schema, unique_at, start, max_length=max_length)


@pytest.mark.parametrize("schema, unique_at, start, numbers, whitespace", [
    (INTS, lambda p: p == (), "[", "integer", "compact"),
    (INTS, lambda p: p == (), "[", "integer", "flexible"),
    (INTS_BUT, lambda p: p == (), "[", "integer", "compact"),
    (NATURALS, lambda p: p == (), "[", "integer", "compact"),
    (POSITIVE, lambda p: p == (), "[", "number", "flexible"),
    (NUMS, lambda p: p == (), "[", "number", "compact"),
    (PORTS, lambda p: p == ("expose",), '{"expose":[', "integer", "compact"),
    (TUPLE_NUMS, lambda p: p == (), '["a",', "integer", "flexible"),
    (NUM_TREE, lambda p: p and p[-1] == "tags", '{"tags":[1],"kids":[{"tags":[', "integer", "compact"),  # (grammar)
])
def test_number_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab, schema, unique_at, start, numbers,
                                                whitespace):
    """As above, for number items: the tokens that close a repeat of a value (in any of
    its texts), and for integers those after which the item can only end as an earlier
    value ("0" once 0 came, "5." once 5 did)."""
    _check_walks(smol_tokenizer, smol_vocab, schema, unique_at, start, numbers=numbers, whitespace=whitespace)


@pytest.mark.parametrize("schema, unique_at, start, listed, whitespace", [
    (LISTED, lambda p: p == (), "", LETTERS, "compact"),
    (LISTED, lambda p: p == (), "", LETTERS, "flexible"),
    (XCODE, lambda p: p == ("osx",), '{"osx":[', XCODES, "compact"),
    (COUNTED, lambda p: p == (), "", PAIRED, "compact"),
    (COUNTED, lambda p: p == (), "", PAIRED, "flexible"),
])
def test_listed_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab, schema, unique_at, start, listed,
                                               whitespace):
    """As above, for listed strings: the tokens that close a repeat, those after which
    the item can only end as an earlier value, and once every value came, those with
    the comma that would begin another item."""
    _check_walks(smol_tokenizer, smol_vocab, schema, unique_at, start, whitespace=whitespace, listed=listed)


def test_list_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Lists of strings as items (gitlab-ci's stages): the tokens that close a list equal
    to an earlier one are dropped, and only those."""
    _check_walks(smol_tokenizer, smol_vocab, STAGES, lambda p: p == ("stages",), '{"stages":[["a"],')


def test_object_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Open objects as items (compose's ports): the tokens that close an object equal to
    an earlier one (as values: keys in any order, numbers by value) are dropped, and only
    those."""
    _check_walks(smol_tokenizer, smol_vocab, SPEC, lambda p: p == ("ports",), '{"ports":[{"name":"a"},')


@pytest.mark.parametrize("schema, start, whitespace", [
    (ANY, "[true,", "compact"),
    (ANY, "[null, [1], ", "flexible"),
    (FLAGS_FIRST, "[false,", "compact"),
    (MIXED, "[", "compact"),
    (NARROWED_LITERALS, "[true,", "compact"),
])
def test_literal_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab, schema, start, whitespace):
    """Any values as items: the tokens that begin a literal that came before (true,
    false, null), or close a list, an object, a string or a number equal to an earlier
    one, are dropped, and only those; literals narrowed beside an endless kind too."""
    _check_walks(smol_tokenizer, smol_vocab, schema, lambda p: p == (), start, whitespace=whitespace, numbers="number")


def test_literal_repeat_beginning(smol_tokenizer, smol_vocab):
    """A literal that came is refused at its first byte, from between items and with a
    comma; the others stay; the second of two booleans can only be the other one."""
    data = smol_vocab.token_bytes
    auto = compile_json_schema(ANY, smol_vocab)
    _check_closings(auto, data, [("[true,", b"t", False), ("[true,", b"true", False), ("[true,", b"f", True),
                                 ('[null,"a"', b",", True), ("[null,1", b"0", True), ("[null,[null", b"]", True),
                                 ("[null,[null],[null", b"]", False), ("[null,false,true,", b"n", False),
                                 ("[null,false,true,", b"[", True)])
    _check_closings(compile_json_schema(FLAGS_FIRST, smol_vocab), data, [("[true,", b"t", False),
                                                                          ("[true,", b"f", True)])


def _allowed_after(auto, data, before: str, token: bytes) -> tuple[bool, bool]:
    """(Whether the mask allows `token` after the text `before`, spelt one byte a
    token; whether accept_token takes it)."""
    m = auto.matcher()
    assert m.accept_tokens([data.index(bytes([c])) for c in before.encode()]), before
    t = data.index(token)
    bits = np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")
    return bool(bits[t]), m.accept_token(t)


def _check_closings(auto, data, cases) -> None:
    """For each (text before, token, ok): the mask allows the token after the text, and
    accept_token takes it, exactly where ok (_allowed_after)."""
    for before, token, ok in cases:
        assert _allowed_after(auto, data, before, token) == (ok, ok), (before, token)


def test_closed_object_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Closed objects as items: the tokens that close an object equal to an earlier one
    are dropped, and those after which it can only end as one (its s known and every n
    it may still take came with that s), and only those."""
    for whitespace in ("compact", "flexible"):
        _check_walks(smol_tokenizer, smol_vocab, PAIRS, lambda p: p == (), '[{"s":"a","n":1},{"s":"a","n":0},',
                     whitespace, cornered=_pairs_cornered, quote_bias=0.3)


def test_captured_closed_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Closed objects with a unique list below as items: the tokens that close an object
    or a list item equal to an earlier one are dropped, and those after which the object
    can only end as an earlier one or not at all (its list's comma once
    {"n":"x","t":["a","b"]} came: "b" alone is left, which ends it as that one), and only
    those."""
    for whitespace in ("compact", "flexible"):
        _check_walks(smol_tokenizer, smol_vocab, CAPS, lambda p: p == () or p[1:] == ("t",),
                     '[{"n":"x","t":["a","b"]},{"n":"x","t":["b"]},', whitespace, cornered=_caps_cornered,
                     quote_bias=0.3)
    _check_closings(compile_json_schema(CAPS, smol_vocab), smol_vocab.token_bytes, [
        ('[{"n":"x","t":["a","b"]},{"n":"x","t":["a"', b",", False), ('[{"n":"x","t":["a","b"]},{"n":"x","t":["a"', b"]", True),
        ('[{"n":"x","t":["a","b"]},{"n":"y","t":["a"', b",", True), ('[{"n":"x","t":["a"]},{"n":"x","t":["a"', b"]", False),
        ('[{"n":"x","t":["a"]},{"n":"x","t":["a"', b",", True), ('[{"n":"x"},{"n":"x"', b"}", False),
        ('[{"n":"x","t":["a"]},{"n":"x","t":["a","', b"a", False)])
    _check_closings(compile_json_schema(NOTIFY, smol_vocab), smol_vocab.token_bytes, [
        ('{"slack":[{"rooms":["a:b"]},{"rooms":["a:b"]', b"}", False),
        ('{"slack":[{"rooms":["a:b"]},{"rooms":["a:b"]', b",", True),
        ('{"slack":[{"rooms":[{"secure":"x"}]},{"rooms":[{"secure":"x"}]', b"}", False),
        ('{"slack":[{"rooms":[{"secure":"x"}]},{"rooms":[{"secure":"x"}]', b",", True),
        ('{"slack":[{"rooms":[{"secure":"x"}]},{"rooms":[{"secure":"x"}', b"]", True),  # (then "on")
        ('{"slack":[{"rooms":[{"secure":"x"},"a:b"]},{"rooms":[{"secure":"x"},"a:b"', b"]}", False),
        ('{"slack":[{"rooms":[{"secure":"x"},"a:b"]},{"rooms":[{"secure":"x"},{"secure":"x', b'"}', False)])


def test_discriminated_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Where an item's `type` decides that its options are unique (if/then), the mask drops
    their repeats, and only where it does: a textarea's may repeat."""
    _check_walks(smol_tokenizer, smol_vocab, FORMS["items"], lambda p: p == ("options",),
                 '{"type":"dropdown","options":["a",')
    _check_closings(compile_json_schema(FORMS, smol_vocab), smol_vocab.token_bytes, [
        ('[{"type":"dropdown","options":["a","a', b'"', False), ('[{"type":"textarea","options":["a","a', b'"', True),
        ('[{"tag":["x"],"type":"dropdown","id":"q","options":["a","a', b'"', False),
        ('[{"type":"checks","options":[1,1', b"]", False)])


def test_nested_unique_masks_drop_exactly_the_repeats(smol_tokenizer, smol_vocab):
    """Open objects as items with a unique list below (compose's volumes): the tokens
    that close an object equal to an earlier one, or a label equal to an earlier one of
    its list, are dropped, and only those."""
    _check_walks(smol_tokenizer, smol_vocab, VOLUMES, lambda p: p == ("volumes",) or p[-1:] == ("labels",),
                 '{"volumes":[{"type":"volume","volume":{"labels":["a"]}},{"type":"volume","volume":{"labels":["a",')
    _check_closings(compile_json_schema(VOLUMES, smol_vocab), smol_vocab.token_bytes, [
        ('{"volumes":[{"type":"bind"},{"type":"bind"', b"}", False),
        ('{"volumes":[{"type":"bind"},{"type":"bind","x-a":[1', b"]}", True),
        ('{"volumes":[{"type":"bind","x-a":[1]},{"type":"bind","x-a":[1', b"]}", False),
        ('{"volumes":[{"type":"bind","x-a":"]"},{"type":"bind","x-a":"]', b'"}', False),
        ('{"volumes":[{"type":"volume","volume":{}},{"type":"volume","volume":{', b"}}", False),
        ('{"volumes":[{"type":"volume","volume":{}},{"type":"volume","volume":{', b"}", True)])


def test_object_repeat_closing(smol_tokenizer, smol_vocab):
    """The `}` that would close a repeated object is refused (another key goes on), and
    a nested object's `}` is not."""
    auto = compile_json_schema(SPEC, smol_vocab)
    cases = [('{"ports":[{"target":8},{"target":8', b"}", False), ('{"ports":[{"target":8},{"target":8.0', b"}", False),
             ('{"ports":[{"target":8},{"target":9', b"}", True), ('{"ports":[{"bind":{}},{"bind":{}', b"}", False),
             ('{"ports":[{"bind":{}},{"bind":{', b"}", True)]
    _check_closings(auto, smol_vocab.token_bytes, cases)
    for before, _, ok in cases:
        if not ok:  # (another key goes on)
            m = auto.matcher()
            assert m.accept_tokens(smol_tokenizer.encode(before + ',"x-1":0}', add_special_tokens=False)), before


def test_closed_object_number_endings(smol_tokenizer, smol_vocab):
    """In a closed object item, a number's dot or trailing zeros may leave it no way on
    but an earlier value (`{"n":1.` after {"n":1}, for integers: only 1.0...), and the
    tokens that make them are dropped; a digit that makes a new value is not."""
    items = {"type": "object", "required": ["n"], "additionalProperties": False,
             "properties": {"n": {"type": "integer"}, "m": {"type": "number", "maximum": 1}}}
    only_n = {"type": "array", "uniqueItems": True, "items": items | {"properties": {"n": {"type": "integer"}}}}
    n_and_m = {"type": "array", "uniqueItems": True, "items": items}
    data = smol_vocab.token_bytes
    _check_closings(compile_json_schema(only_n, smol_vocab), data, [
        ('[{"n":1},{"n":1', b".", False), ('[{"n":1},{"n":1', b"0", True), ('[{"n":1},{"n":1', b"}", False)])
    _check_closings(compile_json_schema(n_and_m, smol_vocab), data, [
        ('[{"n":1},{"n":1', b".", True), ('[{"n":1},{"n":1', b",", True),
        ('[{"n":1,"m":1},{"n":1,"m":', b"1", False), ('[{"n":1,"m":1},{"n":1,"m":', b"0", True),
        ('[{"n":1,"m":0},{"n":1,"m":0', b".", True), ('[{"n":1,"m":0.5},{"n":1,"m":0.5', b"0", True),
        ('[{"n":1,"m":0.5},{"n":1,"m":0.5', b"1", True), ('[{"n":1,"m":0.5},{"n":1,"m":0.5', b"}", False)])


def test_list_repeat_closing(smol_tokenizer, smol_vocab):
    """The `]` that would close a repeated list is refused, from outside a string and
    from inside one; another item goes on."""
    auto = compile_json_schema(STAGES, smol_vocab)
    data = smol_vocab.token_bytes
    for before, closing in [('{"stages":[["a","b"],["a","b"', b"]"), ('{"stages":[["a","b"],["a","b', b'"]')]:
        m = auto.matcher()
        assert m.accept_tokens([data.index(bytes([c])) for c in before.encode()])
        t = data.index(closing)
        bits = np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")
        assert not bits[t] and not m.accept_token(t), before
        assert m.accept_tokens(smol_tokenizer.encode('c"]' if before.endswith("b") else ',"c"]',
                                                     add_special_tokens=False)), before


def test_listed_values_used_up(smol_tokenizer, smol_vocab):
    """Every listed value came: the mask allows `]` and no token with a comma (the
    array ends, it cannot dead-end); before that, a comma is allowed."""
    auto = compile_json_schema(LISTED, smol_vocab)
    data = smol_vocab.token_bytes
    commas = [t for t, b in enumerate(data) if b and b"," in b]
    close, comma = data.index(b"]"), data.index(b",")
    m = auto.matcher()
    assert m.accept_tokens(smol_tokenizer.encode('["a","ab","b","ba"', add_special_tokens=False))
    bits = np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")
    assert bits[comma] and bits[close]
    assert m.accept_tokens(smol_tokenizer.encode(',"c"', add_special_tokens=False))
    bits = np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")
    assert bits[close] and not bits[commas].any()
    assert not m.accept_token(comma)
    assert m.accept_token(close) and m.is_accepting()


def test_unlisted_items_have_no_limit():
    """Only listed values run out: an array of open strings takes a comma after any
    number of items (65536 of them too, the bound on bounded strings' domains)."""
    plan = schema_to_term(STRINGS).unique
    assert not plan.limits
    seen = tuple(sorted(str(i).encode() for i in range(1 << 16)))
    state = ((("a", 0, len(seen) - 1, seen, None),), 0, 0, b"")
    assert plan.feed(state, b',"x"') is not None and not plan.used_up(state)


def test_listed_below_min_items():
    """minItems above the number of listed values: after the last one the tracker would
    leave no way on, so the compiler's own finite set takes it (no array is valid)."""
    schema = {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 3, "uniqueItems": True}
    cs = schema_to_term(schema)
    assert cs.unique is None
    assert not any(cs.accepts(t) for t in ['["a","b"]', '["a","b","a"]', '["b","a","c"]'])


def _check_walks(tokenizer, vocab, schema, unique_at, start, whitespace="compact", **walk):
    auto = compile_json_schema(schema, vocab, whitespace=whitespace)
    rng = random.Random(3)
    ended = dropped = 0
    start = tokenizer.encode(start, add_special_tokens=False)
    for _ in range(12):
        text, done, d = _walk_masks(auto, vocab, unique_at, rng, start, **walk)
        dropped += d
        if done:
            ended += 1
            assert valid(schema, json.loads(text)), text
    assert dropped > 0  # (the walks met repeats to drop)


@pytest.mark.parametrize("max_length", [None, 2])
def test_tokens_of_several_items(max_length):
    """A vocabulary whose tokens close one item and make more (`1,1`, `,"a"`, `",0`):
    the mask still drops exactly the repeats (every token the mask allows is checked)."""
    many = [b"1,1", b',"a"', b',"1"', b'"1",1', b'",1,', b'",0', b'",0]', b"1.", b"0]", b",-1,", b"5,", b",5",
            b", 5,", b'"a","a"', b'1,"1"', b',"1",', b",0", b"2,2]", b'a","a', b"0.0,0", b"7,7.0", b"-1]", b'1,",5,']
    vocab = small_vocab([bytes([b]) for b in range(32, 127)] + many)
    items = {"type": ["string", "integer"]} | ({"maxLength": max_length} if max_length else {})
    schema = {"type": "array", "items": items, "uniqueItems": True}
    auto = compile_json_schema(schema, vocab)
    index = {b: t for t, b in enumerate(vocab.token_bytes)}
    for before, token, ok in [
            ('["a",5', b',"a"', False), ('["a",5', b',"1"', True), ('[1,"b"', b",-1,", True),
            ('[1,"1",-1', b",-1,", False), ('[0,"x"', b",0", False), ('[1,"x"', b",0", True),
            ('[7,"x"', b"7,7.0", False), ('[0,"x",', b"0.0,0", False), ('["1"', b',"1"', False),
            ('[1,"a"', b',"1",', True), ('[5,"', b'1,",5,', False), ('[6,"', b'1,",5,', True)]:
        m = auto.matcher()
        assert m.accept_tokens([index[bytes([c])] for c in before.encode()])
        t = index[token]
        assert bool(m.next_token_mask().view(np.uint32)[t >> 5] >> (t & 31) & 1) == ok, (before, token)
        assert m.accept_token(t) == ok
    rng, dropped, ended = random.Random(5), 0, 0
    for _ in range(30):
        text, done, d = _walk_masks(auto, vocab, lambda p: p == (), rng, steps=30, max_length=max_length,
                                    numbers="integer")
        dropped += d
        if done:
            ended += 1
            assert valid(schema, json.loads(text)), text
    assert dropped > 0 and ended > 0


def test_matcher_contract(smol_tokenizer, smol_vocab):
    """accept_token refuses a repeat (the escaped one too) and changes nothing; rollback,
    copy and the forced tokens keep the items in step."""
    auto = compile_json_schema(STRINGS, smol_vocab)
    ids = smol_tokenizer.encode('["ab","c","ab"]', add_special_tokens=False)
    m = auto.matcher()
    assert not m.accept_tokens(ids) and m.state == auto.start
    good = smol_tokenizer.encode('["ab","c"', add_special_tokens=False)
    assert m.accept_tokens(good)
    c = m.copy()
    rest = smol_tokenizer.encode(',"ab"]', add_special_tokens=False)
    assert not m.accept_tokens(rest)
    assert m.accept_tokens(smol_tokenizer.encode(',"\\u0061b"', add_special_tokens=False)) is False
    assert m.accept_tokens(smol_tokenizer.encode(',"abc"]', add_special_tokens=False))
    m.rollback(len(smol_tokenizer.encode(',"abc"]', add_special_tokens=False)))
    assert not m.accept_tokens(rest)
    assert c.accept_tokens(smol_tokenizer.encode(',"d"]', add_special_tokens=False)) and c.is_accepting()
    assert c.accept_token(smol_vocab.eos_ids[0]) and c.is_terminated()
    c.rollback(1)
    assert c.is_accepting()


def test_bounded_after_open_slot(smol_tokenizer, smol_vocab):
    """Items of at most 2 characters after an open first one: once an item is "ab" and
    "ab" came before, it can only end as a repeat, so the token that makes it is dropped."""
    auto = compile_json_schema(OPEN_THEN_SHORT, smol_vocab)
    ids = smol_tokenizer.encode('["x","ab","ab', add_special_tokens=False)
    assert smol_vocab.token_bytes[ids[-1]] == b"ab"
    m = auto.matcher()
    assert m.accept_tokens(ids[:-1])
    mask = m.next_token_mask().view(np.uint32)
    assert not mask[ids[-1] >> 5] >> (ids[-1] & 31) & 1 and mask.any()
    assert not m.accept_token(ids[-1])


def test_mask_after_a_backslash(smol_vocab):
    """Right after a backslash in an item, a token may escape a quote and close the item
    with the next one: the mask drops it where that item came before."""
    auto = compile_json_schema(STRINGS, smol_vocab)
    data = smol_vocab.token_bytes
    ids = {b: data.index(b) for b in (b'["', b'\\"', b'",', b'"', b'\\', b'""')}
    m = auto.matcher()
    assert m.accept_tokens([ids[b'["'], ids[b'\\"'], ids[b'",'], ids[b'"'], ids[b'\\']])  # ["\"","\\
    t = ids[b'""']
    assert not m.next_token_mask().view(np.uint32)[t >> 5] >> (t & 31) & 1
    assert not m.accept_token(t) and m.accept_token(ids[b'",'])


@pytest.mark.parametrize("schema", [
    {"not": STRINGS},
    {"type": "array", "items": {"type": "string", "pattern": "^[ab]$"}, "uniqueItems": True, "minItems": 3},
    {"type": "array", "items": {"anyOf": [{"type": "string", "pattern": "^[ab]$"}, {"type": "string", "maxLength": 0}]},
     "uniqueItems": True},  # (a union of few strings: not counted)
    # literals that a maybe schema may narrow; a third boolean (the first two may take both)
    {"type": "array", "items": {"type": ["string", "boolean"], "not": {"const": "a"}}, "uniqueItems": True},
    # few strings beside numbers (the numbers alone were checked: after ["a","b", an item
    # `"a` was allowed, with no way on)
    {"type": "array", "items": {"type": ["string", "number"], "pattern": "^[ab]$"}, "uniqueItems": True},
    # a kind that the items cannot be, read as endless (after [true,false the comma was
    # allowed, with no item on): a not, an overlapping oneOf (read as anyOf), a then false
    {"type": "array", "items": {"type": ["boolean", "string"], "not": {"type": "string"}}, "uniqueItems": True},
    {"type": "array", "items": {"oneOf": [{"type": ["boolean", "string"]}, {"type": "string"}]}, "uniqueItems": True},
    {"type": "array", "items": {"oneOf": [{"type": ["integer", "boolean"]}, {"type": "integer"}]}, "uniqueItems": True},
    {"type": "array", "items": {"type": ["boolean", "string"], "if": {"type": "string"}, "then": False},
     "uniqueItems": True},
    # listed strings beside arrays (the arrays went unchecked: [[],[]] was accepted)
    {"type": "array", "items": {"anyOf": [{"type": "array", "items": {"type": "boolean"}}, {"enum": ["b", "c"]}]},
     "uniqueItems": True},
    {"type": "array", "prefixItems": [{"type": "boolean"}] * 3, "uniqueItems": True},
    # bounds that may corner: above -1 an item "-1" has no way on but -1; below 100, "10" but 10 and 100
    {"type": "array", "items": {"type": "integer", "minimum": -1}, "uniqueItems": True},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 100}, "uniqueItems": True},
    {"type": "array", "items": {"type": "number", "exclusiveMaximum": 5}, "uniqueItems": True},
    {"type": "array", "items": {"type": "number", "multipleOf": 0.5}, "uniqueItems": True},
    {"type": "array", "items": {"enum": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "number", "not": {"type": "integer"}}, "uniqueItems": True},
    {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "number"}, "uniqueItems": True},
    {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "contains": {"const": "a"}},
    {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "enum": [["a", "b"]]},
    {"if": {"minItems": 2}, "then": STRINGS},
    # which anyOf branch held decides what unevaluatedProperties sees: {"t": ["a", "a"]}
    # fails the first, so `t` is unevaluated (the anyOf is not read as absent)
    {"properties": {"u": STRINGS}, "anyOf": [{"properties": {"t": STRINGS}}, {}], "unevaluatedProperties": False},
    {"anyOf": [BOUNDED_CODES, {}], "unevaluatedItems": False},
    {"type": "object", "properties": {"a": STRINGS}, "dependentSchemas": {"b": {"properties": {"a": {
        "items": {"maxLength": 2}}}}}},
    # closed objects of fewer than 65536 values (every one may come: no way on), holding an
    # open object (keys in any order: no normal text), beside open objects; objects that
    # an allOf branch closes to the other's extension keys
    {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"enum": [1, 2]}},
                                "additionalProperties": False}, "uniqueItems": True},
    {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "object"}},
                                "additionalProperties": False}, "uniqueItems": True},
    {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "array", "items": {
        "type": "object", "additionalProperties": {"type": "string"}}}}, "additionalProperties": False},
     "uniqueItems": True},
    {"type": "array", "items": {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}},
                                           "additionalProperties": False},
                                          {"type": "object", "patternProperties": {"^x-": {}}}]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}},
                                "additionalProperties": False, "not": {"required": ["a"]}}, "uniqueItems": True},
    # a key met before the one whose value decides whether it is unique (the key order:
    # tag, then type)
    {"type": "object", "properties": {"tag": {"type": "array", "items": {"type": "string"}}, "type": {"type": "string"}},
     "if": {"properties": {"type": {"const": "a"}}}, "then": {"properties": {"tag": {"uniqueItems": True}}}},
    {"type": "array", "items": {"allOf": [
        {"type": "object", "patternProperties": {"^x-": {}}, "additionalProperties": False},
        {"properties": {"a": {}}, "additionalProperties": False}]}, "uniqueItems": True},
    # closed objects holding unique arrays of closed objects that hold unique arrays (a
    # second level of items read with their frames)
    {"type": "array", "uniqueItems": True, "items": {"type": "object", "additionalProperties": False, "properties": {
        "t": {"type": "array", "uniqueItems": True, "items": {"type": "object", "additionalProperties": False,
                                                                "properties": {"u": STRINGS}}}}}},
])
def test_refused_where_not_exact(schema):
    """Where a repeat may be valid, or refusing one may leave no way on, strict mode still
    refuses uniqueItems (SchemaError naming it) and lenient mode drops it with a warning."""
    with pytest.raises(SchemaError, match="uniqueItems"):
        schema_to_term(schema)
    with pytest.warns(SchemaWarning, match="'uniqueItems' at "):
        schema_to_term(schema, strict=False)


@pytest.mark.parametrize("schema, why", [
    ({"type": "array", "items": {"type": ["string", "number"], "pattern": "^[ab]$"}, "uniqueItems": True},
     "its items may be strings of fewer than 65536 values"),
    ({"type": "array", "items": {"type": "integer", "maximum": 100}, "uniqueItems": True},
     "its items may be numbers with an upper or negative bound"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True, "contains": {"const": "a"}},
     "beside contains"),
    ({"type": "array", "items": {"type": "object", "properties": {"a": {"type": "boolean"}},
                                 "additionalProperties": False}, "uniqueItems": True},
     "its items may be objects neither open"),
    ({"type": "array", "items": {"type": "array", "maxItems": 2}, "uniqueItems": True},
     "its items may be arrays other than lists of open strings or of any values"),
    ({"type": "object", "properties": {"a": {"anyOf": [STRINGS, {"type": "array", "items": {"type": "integer"}}]}}},
     "it may or may not apply there"),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "number"}, "uniqueItems": True},
     "its items are integers in one place and any numbers in another"),
])
def test_refusal_says_why(schema, why):
    """The refusal names what keeps that uniqueItems from the tracker (_Planner._no,
    _unread), before the list of what it checks."""
    with pytest.raises(SchemaError, match="uniqueItems") as e:
        schema_to_term(schema)
    assert f"uniqueItems cannot be enforced here: {why}" in str(e.value)


class _RandomUnique:
    """Random schemas of unique arrays whose items mix kinds: strings (open, short,
    patterned), numbers (bounded or not), enums, literals, arrays and objects (open
    or closed, unique ones inside), unions and oneOfs of those; maybe prefixItems,
    min/maxItems, and the array as an object's property."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def item(self, depth: int = 0):
        rng, r = self.rng, self.rng.random()
        if depth < 2 and r < 0.12:
            return {"type": "array", "items": self.item(depth + 1), **({"uniqueItems": True} if rng.random() < 0.5
                                                                       else {}),
                    **({"maxItems": rng.randint(1, 3)} if rng.random() < 0.3 else {})}
        if depth < 2 and r < 0.24:
            props = {k: self.item(depth + 1) for k in rng.sample("abc", rng.randint(1, 2))}
            o = {"type": "object", "properties": props}
            if rng.random() < 0.5:
                o["additionalProperties"] = False
            if rng.random() < 0.3:
                o["required"] = [rng.choice(list(props))]
            return o
        return rng.choice([
            lambda: {"type": "string"}, lambda: {"type": "string", "maxLength": rng.randint(0, 3)},
            lambda: {"type": "string", "pattern": rng.choice(["^[ab]$", "^[a-z]{2}$", "^x", "^[0-9]+$"])},
            lambda: {"type": "integer"}, lambda: {"type": "number"},
            lambda: {"type": "integer", "minimum": rng.choice([-1, 0, 3])},
            lambda: {"type": "integer", "maximum": rng.choice([2, 100])},
            lambda: {"enum": rng.sample(["a", "b", 1, 2, True, None, "c"], rng.randint(1, 4))},
            lambda: {"type": "boolean"}, lambda: {"type": "null"}, lambda: {},
            lambda: {"type": rng.sample(["string", "integer", "number", "boolean", "null"], 2)},
            lambda: {"anyOf": [self.item(depth + 1), self.item(depth + 1)]},
            lambda: {"oneOf": [self.item(depth + 1), self.item(depth + 1)]},
            lambda: {"type": ["boolean", "string"], "not": {"type": "string"}},
        ])()

    def schema(self) -> dict:
        rng = self.rng
        s = {"type": "array", "items": self.item(), "uniqueItems": True}
        if rng.random() < 0.3:
            s["maxItems"] = rng.randint(2, 6)
        if rng.random() < 0.2:
            s["minItems"] = rng.randint(1, 3)
        if rng.random() < 0.2:
            s["prefixItems"] = [self.item(1)]
        if rng.random() < 0.3:
            s = {"type": "object", "properties": {"u": s, "v": {"type": "string"}}, "required": ["u"]}
        return s


@pytest.mark.parametrize("seed", [3, 5])
def test_random_unique_walks_never_corner(smol_vocab, seed):
    """Random unique arrays (_RandomUnique), each compiled strictly where it compiles:
    random walks over the SmolLM2 vocabulary (uniform over the allowed tokens, closing
    ones preferred a third of the time) never meet an empty mask before the end, and
    every text that ends validates with jsonschema (numbers read exactly). Before
    _Planner._exact, both seeds met an empty mask after `[false,true,` (items `{type:
    [boolean, string], not: {type: string}}`: no string to come); the schemas of
    test_refused_where_not_exact show the other shapes it found."""
    gen, rng, compiled = _RandomUnique(seed), random.Random(seed), 0
    closing = np.array([bool(b) and not b.strip(b'"}]') for b in smol_vocab.token_bytes])  # (and EOS)
    closing[list(smol_vocab.eos_ids)] = True
    row, n = np.zeros(smol_vocab.num_words, dtype=np.int32), len(smol_vocab.token_bytes)
    ended = 0
    for _ in range(120):
        schema = gen.schema()
        try:
            auto = compile_json_schema(schema, smol_vocab).require_output()
        except ConstraintError:  # (refused, or no value at all: minItems 2 of null)
            continue
        compiled += 1
        check = exact_validator(schema)
        for _ in range(3):
            m, out = auto.matcher(), []
            for _ in range(80):
                m.fill_next_token_bitmask(row)
                allowed = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[:n])
                assert len(allowed), (schema, b"".join(smol_vocab.token_bytes[t] for t in out))
                if rng.random() < 0.35 and closing[allowed].any():
                    allowed = allowed[closing[allowed]]
                t = int(rng.choice(allowed.tolist()))
                assert m.accept_token(t)
                if m.is_terminated():
                    text = b"".join(smol_vocab.token_bytes[t] for t in out)
                    inst = json.loads(text, parse_float=Decimal, object_pairs_hook=distinct_keys)
                    assert check.is_valid(inst), (schema, text)
                    ended += 1
                    break
                out.append(t)
    assert compiled >= 50 and ended >= 100, (compiled, ended)
