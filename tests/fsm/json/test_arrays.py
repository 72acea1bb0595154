"""JSON arrays: prefixItems, items, contains (counted place by place, or holding no item),
and uniqueItems over a finite domain (compiled into the automaton; the tracker's
uniqueItems: test_unique_items.py, test_unique_masks.py)."""
from __future__ import annotations

import jsonschema
import pytest
from oracles import compiled, valid
from oracles import stepped_along as _stepped_along

from structgen.fsm.json.schema import SchemaError, canonical_json, schema_to_term


def test_arrays_prefix_items_contains():
    schema = {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": {"type": "boolean"},
              "minItems": 1, "maxItems": 4, "contains": {"const": True}, "maxContains": 1}
    acc, _ = compiled(schema)
    for inst in [[], ["a"], ["a", 1], ["a", 1, True], ["a", 1, True, True], ["a", 1, False, True], [1],
                 ["a", 1, True, False, False]]:
        assert acc(canonical_json(inst, [])) == valid(schema, inst), inst


@pytest.mark.parametrize("array, holds", [
    # no item can hold the contains: types apart, or each item's intersection empty
    ({"type": "array", "items": {"type": "object"}, "contains": {"const": 0}}, False),
    ({"type": "array", "items": {"type": "object", "properties": {"d": {}}, "required": ["d"],
                                 "additionalProperties": False}, "contains": {"enum": [True, {"k": 1}]}}, False),
    ({"type": "array", "items": {"type": "object"}, "contains": {"const": 0}, "minContains": 0, "maxContains": 1},
     True),
    # more contained items than the array may hold
    ({"type": "array", "items": {}, "maxItems": 1, "contains": {"enum": [True, 1]}, "minContains": 2}, False),
    # only a prefix item can hold it (_Compiler._prefix_count_list)
    ({"type": "array", "prefixItems": [{"type": ["null", "string"]}, {}], "items": {
        "type": "object", "properties": {"d": {}}, "required": ["d"], "additionalProperties": False},
      "contains": {"enum": [True, {"k": 1}, "a"]}, "maxContains": 1}, False),
])
def test_contains_no_item_can_hold(array, holds):
    """`contains` that no item can hold, or more contained items than maxItems: the array
    is nothing where minContains asks for one (every array where it does not); one that
    only prefix items can hold is counted over them alone. Decided when compiling
    (_Compiler._holders). As an optional property's schema, the first mask where its
    key may come (or, for the prefix, a mask past it) used to search every array of
    objects for an item that holds it: TooLargeError (after ~20 s at the default
    max_states, ~2 s at the 20k given here). Instances agree with jsonschema."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "arr": array}, "required": ["n"]}
    cs = schema_to_term(schema)
    dfa = cs.dfa(max_states=20_000)
    check = jsonschema.Draft202012Validator(schema)
    pool = [{"n": 1}, {"n": 1, "arr": []}, {"n": 1, "arr": [{}]}, {"n": 1, "arr": [{"d": 1}, {"d": 2}]},
            {"n": 1, "arr": [0]}, {"n": 1, "arr": [True, 1]}, {"n": "x"}, {"n": 1, "arr": ["a", {"d": 1}]},
            {"n": 1, "arr": [None, {"d": 1}]}, {"n": 1, "arr": ["a"]}, {"n": 1, "arr": ["b", True, {"d": 1}]},
            {"n": 1, "arr": ["a", True]}, {"n": 1, "arr": [None, True, {"d": 2}, {"d": 3}]}]
    for inst in pool:
        assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), inst
    assert cs.accepts(cs.canonical({"n": 1, "arr": [{}]}), dfa) == holds
    for text in (b'{"n":1,"arr":', b'{"n":1,"arr":[null,{"d":1},'):
        _stepped_along(dfa, text)


def test_contains_in_a_short_array_counts_place_by_place():
    """An array of at most CONTAINS_COUNTED_PLACES items counts `contains` place by
    place: once an object begun as no `{"k": 1}` leaves no place for one, the state is
    nothing at once. Before, deciding it searched every object that item could still
    become (TooLargeError mid-output, ~1 s at the 20k given here). Instances agree with
    jsonschema."""
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}, "e": {
        "type": "array", "items": {"type": "object"}, "maxItems": 2, "contains": {"enum": [{"k": 1}]},
        "minContains": 1, "maxContains": 1}}}
    cs = schema_to_term(schema)
    dfa = cs.dfa(max_states=20_000)
    check = jsonschema.Draft202012Validator(schema)
    for inst in [{"n": 1}, {"n": 1, "e": []}, {"n": 1, "e": [{"k": 1}]}, {"n": 1, "e": [{"x": 1}]},
                 {"n": 1, "e": [{"x": 1}, {"k": 1}]}, {"n": 1, "e": [{"k": 1}, {"k": 1}]}, {"n": 1, "e": [{"k": 2}]},
                 {"n": 1, "e": [{"k": 1}, {}]}]:
        assert cs.accepts(cs.canonical(inst), dfa) == check.is_valid(inst), inst
    for text, alive in ((b'{"n":1,"e":[{"x', True), (b'{"n":1,"e":[{"x":1},{"y', False), (b'{"n":1,"e":[{"k":1', True)):
        assert (_stepped_along(dfa, text) != 0) == alive, text


def test_unique_items_finite_domain_exact():
    schema = {"type": "array", "items": {"enum": ["a", "b", 1]}, "uniqueItems": True}
    acc, _ = compiled(schema)
    for inst in [[], ["a"], ["a", "b", 1], ["a", "a"], [1, "b", 1], ["b", "a"]]:
        assert acc(canonical_json(inst, [])) == valid(schema, inst), inst
    with pytest.raises(SchemaError, match="uniqueItems"):
        schema_to_term({"type": "array", "items": {"type": "number", "maximum": 9}, "uniqueItems": True})
