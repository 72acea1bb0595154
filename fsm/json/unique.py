"""uniqueItems over arrays of strings, numbers, lists and objects, checked while decoding.

Distinct items are not a regular language, so a tracker beside the automaton reads the
output's bytes, keeps each unique array's items so far (compared as values: `"\\u0061"`
repeats `"a"`, `1.0` repeats `1`), and the matcher (unique_matcher.py) refuses the token
that would close an item equal to an earlier one. Where the unique arrays are, and which
kinds of items they hold, is a table (UniquePlan) built from the schema before compiling;
those uniqueItems are then dropped from the copy the compiler reads. The kinds taken, and
why refusing never leads into a dead end: docs/json-schema.md, "Unique items".

>>> from structgen.fsm.json.schema import unique_plan_of
>>> plan = unique_plan_of({"type": "array", "items": {"type": "string"}, "uniqueItems": True})
>>> plan.accepts(b'["a","b"]'), plan.accepts(b'["a","\\\\u0061"]')
(True, False)
"""
from __future__ import annotations

import copy
import functools
import json
import operator
import re
from bisect import bisect_left
from decimal import Decimal, InvalidOperation

from ..core.dfa import LazyDFA
from ..core.errors import RegexError, SchemaError, TimeBudgetError, TooLargeError
from .disjoint import disjoint, types_of
from .keywords import (
    _ANNOTATIONS,
    _ARRAY_KW,
    _KEYWORDS,
    _NOTES,
    _NUMBER_KW,
    _OBJECT_KW,
    _STRING_KW,
    _SUB_LIST,
    _SUB_MAP,
    _SUB_ONE,
    _schema_keys,
)
from .merge import _finite_values
from .source import JsonTermSource
from .variants import _condition

MAX_UNIQUE_FRAMES = 4096  # frames of containers read while looking for unique arrays
MAX_ALTERNATIVES = 64  # ways a frame's unions may hold, read one by one (above: together)
MAX_KEY_PATTERNS = 4  # patternProperties of an object frame that the tracker tests keys on
# DFA states of one of those patterns (each state's row is built when planning: an
# alternation of a few dozen names needs some hundreds)
MAX_PATTERN_STATES = 1024
# how an array frame's items are kept distinct (UniquePlan.frames): flags of the kinds
# of items it may hold, 0 where it is not checked
OPEN, BOUNDED = 1, 2  # strings: open ones, bounded ones (docs/json-schema.md)
NUMBERS, INTEGERS = 4, 8  # numbers without bounds: any, or integers only
_NUMBER_KINDS = NUMBERS | INTEGERS
LISTS, OBJECTS = 16, 32  # lists of open strings, open objects (docs/json-schema.md)
CLOSED = 64  # closed objects (docs/json-schema.md)
LITERALS = 128  # true, false and null (docs/json-schema.md)
VALUE_MARK = b"\xfe"  # heads a list or object item's key (_value_key): no UTF-8 text has it
_CONTAINERS = LISTS | OBJECTS | CLOSED
_KEYED = _NUMBER_KINDS | _CONTAINERS | LITERALS  # items kept by their keys (_number_key, _value_key, _LITERAL_KEYS)
_LITERAL_TYPES = frozenset(("boolean", "null"))
_ANY_TYPES = frozenset(("string", "number", "array", "object")) | _LITERAL_TYPES
_LITERAL_KEYS = {0x74: b"true", 0x66: b"false", 0x6E: b"null"}  # (a number's key is digits: never one of these)
# bounded strings (maxLength, pattern, format, enum) are checked where they have at least
# this many values: no array reaches that many items, so whatever items came before, a
# new one can always be added; what the tracker checks is that the current item can
# still end as a new value (UniqueMatcher._viable)
MIN_UNIQUE_DOMAIN = 1 << 16
MAX_DOMAIN_STATES = 4096  # DFA states counted for that
DOMAIN_LEVELS = 64  # lengths counted one by one before the whole DFA is
MAX_VIABLE_STEPS = 4096  # bytes stepped looking for a new way to end an item
_OTHER = object()  # a property name that no `properties` declares
DEAD = (-1, -1)

# keywords of a schema that the table reads through, or that say nothing of an array of
# open strings (those of other types); anything else beside uniqueItems keeps it for the
# compiler
_APPLICATORS = frozenset(("$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
                          "dependentSchemas", "dependencies"))
_QUIET = _NOTES | _APPLICATORS | {"contentEncoding", "contentMediaType", "contentSchema", "discriminator"}
_ARRAY_OK = _QUIET | frozenset(_STRING_KW + _NUMBER_KW + _OBJECT_KW) | {
    "type", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"}
_STRING_OK = _QUIET | frozenset(_ARRAY_KW + _NUMBER_KW + _OBJECT_KW) | {"type", "minLength"}
# a schema that only may apply (under not, say) turns minLength into a bound above: only
# types and structure there
_MAYBE_ARRAY_OK = _QUIET | frozenset(_STRING_KW + _NUMBER_KW + _OBJECT_KW) | {
    "type", "items", "prefixItems", "additionalItems"}
_MAYBE_STRING_OK = _QUIET | frozenset(_ARRAY_KW + _NUMBER_KW + _OBJECT_KW) | {"type"}
# a list of open strings: items, minItems, and keywords that say nothing of arrays
_LIST_OK = _QUIET | frozenset(_STRING_KW + _NUMBER_KW + _OBJECT_KW) | {"type", "items", "minItems"}
# an open object: its keys, and keywords that say nothing of objects
_OBJECT_OPEN_OK = _QUIET | frozenset(_STRING_KW + _NUMBER_KW + _ARRAY_KW) | {
    "type", "properties", "required", "additionalProperties", "patternProperties", "minProperties",
    "dependentRequired"}
# a closed object: its declared keys, and keywords that say nothing of objects
_OBJECT_CLOSED_OK = _QUIET | frozenset(_STRING_KW + _NUMBER_KW + _ARRAY_KW) | {
    "type", "properties", "required", "additionalProperties", "minProperties", "maxProperties",
    "dependentRequired"}
# a value inside a closed object: anything whose objects are closed too
_VALUE_OK = _QUIET | frozenset(_STRING_KW + _NUMBER_KW + _ARRAY_KW) | _OBJECT_CLOSED_OK | {
    "enum", "const", "items", "prefixItems", "additionalItems"}
# listed strings: enum or const, and keywords that say nothing of strings
_LISTED_OK = _QUIET | frozenset(_ARRAY_KW + _NUMBER_KW + _OBJECT_KW) | {"type", "enum", "const"}
# true, false and null, each of them: keywords that say nothing of them
_LITERAL_OK = _QUIET | frozenset(_STRING_KW + _NUMBER_KW + _OBJECT_KW + _ARRAY_KW) | {"type"}
# numbers without bounds (sure or maybe schemas alike: a bound says where the numbers are)
_NUMBER_OK = _QUIET | frozenset(_ARRAY_KW + _STRING_KW + _OBJECT_KW) | {"type"}
_NUMBER_FROM_ZERO_OK = _NUMBER_OK | {"minimum", "exclusiveMinimum"}  # (sure schemas: a bound of 0 or more, _from_zero)


class UniquePlan:
    """Where the unique arrays of strings and numbers are, and how to check an output's bytes.

    `frames[f]` is ("o", {key: child}, pattern tables, {patterns matched: child}, disc)
    for an object frame (a key no `properties` declares goes by the patterns it matches:
    bit i set where it matches the i-th, read by its whole DFA of encoded keys,
    _Planner._pattern_table; disc: None, or (key, {value: frame}, frame for any other
    value) where if/then/else tests of that key's value tell its ways apart: the frame
    the object goes on in once that key's value is read, -1 where nothing unique lies
    there; the keys after it in the key order, met before it, are read in the ways where
    it is absent), ("a", unique, [child per prefix item], rest_child) for an
    array frame (unique: the flags of its items' kinds, OPEN... INTEGERS, 0 where not
    checked); a child is (frame of the value if it is an object, frame if an array),
    -1 where no unique array lies below.
    `root` is the document's child; `limits[f]`, the number of values of array frame
    f's items where they are listed strings. The tracker's state is a tuple (stack,
    dead, mode, buf): see `feed`.
    """

    def __init__(self, frames: list, root: tuple, limits: dict | None = None):
        self.frames, self.root = frames, root
        # array frame -> N, where its items are N listed strings: no comma after N items
        self.limits = limits or {}
        self.start = ((), 0, 0, b"")
        self.numbers = any(row[0] == "a" and row[1] & _NUMBER_KINDS for row in frames)
        self.literals = any(row[0] == "a" and row[1] & LITERALS for row in frames)
        # closed object items read with their frames (a unique array below): two levels to walk
        self.captures = any(row[0] == "a" and row[1] & CLOSED and any(c[0] >= 0 for c in (*row[2], row[3]))
                            for row in frames)
        self.containers = any(row[0] == "a" and row[1] & _CONTAINERS for row in frames)

    def feed(self, state: tuple, data: bytes):
        """The state after the bytes `data` (valid JSON text so far: the automaton
        checked it), or None if they close an item equal to an earlier one of its array
        (or leave an integer item that can only end as one: "0", "5."; or begin a
        literal item, `t`, that came before; or begin an item where every listed value
        came: `limits`).

        stack: the containers being read, ("o", frame, phase, child) (phase 0: a key
        next, 1: the key read, child its value's, 2: the value) or ("a", frame, index,
        its string items so far as UTF-8 bytes, sorted, the keys of its number, list,
        object and literal items (a frozenset: _number_key, _value_key, _LITERAL_KEYS)),
        each None where not kept;
        dead: how many containers deep the output is below the last frame (nothing unique
        there); mode: 0 outside strings, 1 in a string read past, 2 in a key, 3 in a string
        item of a unique array, 4 in a number item, 5 in a list or object item, 6 in one
        of its strings (buf: the item's bytes so far), 7 in the string value of an
        object's discriminating key (its frame's `disc`), plus 8 after a backslash, plus
        16 per bracket open inside such an item. An object's phase is 3 and 4 (not 1 and
        2) for that key and its value: once the value is read, the object goes on in the
        frame of the ways that value leaves."""
        stack, dead, mode, buf = state
        stack = list(stack)
        frames, i, n = self.frames, 0, len(data)
        esc, depth = (mode >> 3) & 1, mode >> 4
        mode &= 7
        starts: dict = {}  # stack index of a capture -> where its item's bytes begin in data (else 0)
        while i < n:
            if mode in (5, 6):  # a list or object item: read to the bracket that ends it
                if esc:
                    buf += data[i:i + 1]
                    esc, i = 0, i + 1
                    continue
                m = (_STRING_STOP if mode == 6 else _ITEM_STOP).search(data, i)
                buf += data[i:] if m is None else data[i:m.end()]
                if m is None:
                    break
                i, c = m.end(), data[m.start()]
                if c == 0x5C:
                    esc = 1
                elif c == 0x22:
                    mode = 11 - mode  # (5 <-> 6)
                elif c in (0x5B, 0x7B):
                    depth += 1
                elif depth:
                    depth -= 1
                else:
                    if not _keep_item(stack, frames, buf):
                        return None
                    mode, buf = 0, b""
                continue
            if mode == 4:
                m = _NUMBER_STOP.search(data, i)
                if m is None:
                    buf += data[i:]
                    break
                buf += data[i:m.start()]
                _, f, k, seen, nums = stack[-1]
                key = _number_key(buf)
                if key in nums:
                    return None
                stack[-1] = ("a", f, k, seen, nums | {key})
                mode, buf, i = 0, b"", m.start()
                continue
            if mode:
                if esc:
                    if mode >= 2:
                        buf += data[i:i + 1]
                    esc, i = 0, i + 1
                    continue
                m = _STRING_STOP.search(data, i)
                j = m.start() if m else n
                if mode >= 2:
                    buf += data[i:j] if m is None else data[i:j + 1]
                if m is None:
                    break
                i = j + 1
                if data[j] == 0x5C:  # backslash
                    esc = 1
                    continue
                if mode == 2:  # a key: its value's frame
                    f = stack[-1][1]
                    name = json.loads(b'"' + buf)
                    disc = frames[f][4]
                    stack[-1] = ("o", f, 3 if disc and name == disc[0] else 1, self._key_child(frames[f], name, buf))
                elif mode == 7:  # the discriminating key's value: the object's frame from here on
                    disc, top = frames[stack[-1][1]][4], stack[-1]
                    f = disc[1].get(json.loads(b'"' + buf), disc[2])
                    if f < 0:  # (nothing unique below, from here: read to its end)
                        stack.pop()
                        dead = 1
                    else:
                        stack[-1] = ("o", f, 2, top[3])
                elif mode == 3:
                    item = string_value(buf[:-1])
                    _, f, k, seen, nums = stack[-1]
                    at = bisect_left(seen, item)
                    if at < len(seen) and seen[at] == item:
                        return None
                    stack[-1] = ("a", f, k, (*seen[:at], item, *seen[at:]), nums)
                mode, buf = 0, b""
                continue
            if dead:
                m = _DEAD_STOP.search(data, i)
                if m is None:
                    break
                c, i = data[m.start()], m.start() + 1
                if c == 0x22:
                    mode = 1
                elif c in (0x7B, 0x5B):
                    dead += 1
                else:
                    dead -= 1
                    if (not dead and stack and stack[-1][0] == "c"
                            and not _close_capture(stack, frames, starts, data[:i])):
                        return None
                continue
            c = data[i]
            i += 1
            if c == 0x22:  # "
                top = stack[-1] if stack else None
                if top is not None and top[0] == "o" and top[2] == 0:
                    mode = 2
                elif top is not None and top[0] == "o" and top[2] == 4:
                    mode = 7
                elif top is not None and top[0] == "a" and top[3] is not None:
                    mode = 3
                else:
                    mode = 1
            elif c in (0x5B, 0x7B) and stack and stack[-1][0] == "a" and stack[-1][4] is not None \
                    and frames[stack[-1][1]][1] & (LISTS if c == 0x5B else OBJECTS | CLOSED):
                fid = self._child(stack)[0] if c == 0x7B else -1
                if fid < 0:
                    mode, buf = 5, data[i - 1:i]  # (a list or object item, read whole)
                else:  # (an open object with a unique array below: read with its frames, its bytes kept)
                    starts[len(stack)] = i - 1
                    stack += [("c", b""), ("o", fid, 0, None)]
            elif c in (0x7B, 0x5B):  # { [
                fid = self._child(stack)[c == 0x5B]
                if fid < 0:
                    dead = 1
                elif c == 0x7B:
                    stack.append(("o", fid, 0, None))
                else:
                    how = frames[fid][1]
                    stack.append(("a", fid, 0, () if how else None,
                                  frozenset() if how & _KEYED else None))
            elif c in (0x7D, 0x5D):  # } ]
                stack.pop()
                if stack and stack[-1][0] == "c" and not _close_capture(stack, frames, starts, data[:i]):
                    return None
            elif c == 0x2C:  # ,
                top = stack[-1]
                if top[0] == "o":
                    f = frames[top[1]][4][2] if top[2] == 4 else top[1]  # (a discriminating key's other value)
                    if f < 0:
                        stack.pop()
                        dead = 1  # (this object's other keys, to its end: i is past its comma)
                    else:
                        stack[-1] = ("o", f, 0, None)
                else:
                    if self._full(top, 0):
                        return None  # (every listed value came: no new one to begin)
                    stack[-1] = ("a", top[1], top[2] + 1, *top[3:])
            elif c == 0x3A:  # :
                top = stack[-1]
                stack[-1] = ("o", top[1], 4 if top[2] == 3 else 2, top[3])
            elif (c == 0x2D or 0x30 <= c <= 0x39) and stack and stack[-1][0] == "a" and stack[-1][4] is not None:
                mode, buf = 4, data[i - 1:i]  # (- or a digit: a number item begins)
            elif c in _LITERAL_KEYS and stack and stack[-1][0] == "a" and stack[-1][4] is not None \
                    and frames[stack[-1][1]][1] & LITERALS:  # (true, false, null: its first byte says which)
                top = stack[-1]
                key = _LITERAL_KEYS[c]
                if key in top[4]:
                    return None
                stack[-1] = (*top[:4], top[4] | {key})
        if mode == 4 and (0x2E in buf or buf == b"0") and frames[stack[-1][1]][1] & INTEGERS \
                and _number_key(buf) in stack[-1][4]:
            return None  # (an integer whose digits are all there: it can only end as this value)
        if self.containers:  # (the bytes of the object items read with their frames)
            for j, e in enumerate(stack):
                if e[0] == "c":
                    stack[j] = ("c", e[1] + data[starts.get(j, 0):])
        return tuple(stack), dead, mode | (esc << 3) | (depth << 4), buf

    @staticmethod
    def _key_child(row: tuple, name: str, buf: bytes) -> tuple:
        """The child of key `name` (`buf`: its encoded bytes and the closing quote) in
        object frame `row`: a declared name's, else by the patterns it matches."""
        _, keys, tables, others, _ = row
        child = keys.get(name)
        if child is not None:
            return child
        sig = 0
        for i, (table, accepting, s) in enumerate(tables):
            for b in buf[:-1]:
                s = table[s, b]
                if not s:
                    break
            sig |= int(accepting[s]) << i
        return others[sig]

    def _child(self, stack: list) -> tuple:
        if not stack:
            return self.root
        top = stack[-1]
        if top[0] == "o":
            return top[3]
        row = self.frames[top[1]]
        return row[2][top[2]] if top[2] < len(row[2]) else row[3]

    def accepts(self, text) -> bool:
        """Whether a whole text (valid for the automaton) repeats no unique item."""
        data = text.encode("utf-8") if isinstance(text, str) else text
        return self.feed(self.start, data) is not None

    def item_prefix(self, state: tuple):
        """Where `state` is inside a string item of a unique array: (its bytes so far,
        decoded as UTF-8 bytes, with a character cut short left as its bytes; None
        while an escape is unfinished), the items so far (sorted). Inside a closed
        object item (CLOSED): (VALUE_MARK + its normal text so far, _normal_text), the
        items so far (theirs whole). Otherwise None."""
        stack, dead, mode, buf = state
        if mode & 7 in (5, 6) and not dead and buf[:1] == b"{" and self.frames[stack[-1][1]][1] & CLOSED:
            return VALUE_MARK + _normal_text(buf)[0], stack[-1][3]
        if mode & 7 != 3 or dead:  # (mode 3 after a backslash too: buf ends with it, an escape cut short)
            return None
        return decoded_prefix(buf), stack[-1][3]

    def capture(self, state: tuple):
        """Where `state` is inside a closed object item read with its frames (CLOSED,
        with a unique array below: the stack's last ("c", bytes) entry is one): (VALUE_MARK
        + its normal text so far, the items so far, the bytes that text holds back (as
        held()), its bytes so far); otherwise None."""
        stack = state[0]
        for j in range(len(stack) - 1, 0, -1):
            if stack[j][0] == "c":
                arr, raw = stack[j - 1], stack[j][1]
                if not self.frames[arr[1]][1] & CLOSED:
                    return None
                normal, held = _normal_text(raw)
                return VALUE_MARK + normal, arr[3], held, raw
        return None

    def in_bounded(self, state: tuple) -> bool:
        """Whether `state` is in a unique array that may hold bounded strings or closed
        objects (BOUNDED, CLOSED: an item may be cornered, UniqueMatcher._viable)."""
        stack, dead = state[0], state[1]
        return (not dead and bool(stack) and stack[-1][0] == "a" and stack[-1][3] is not None
                and bool(self.frames[stack[-1][1]][1] & (BOUNDED | CLOSED)))

    @staticmethod
    def held(state: tuple) -> bytes:
        """In an object item, the bytes its normal text does not show yet: a number's
        trailing fraction zeros or dot (`1.50`: `0`), which may still turn out to be
        digits of its value; else b""."""
        mode, buf = state[2] & 7, state[3]
        return _normal_text(buf)[1] if mode == 5 and buf[-1:] in _HELD_ENDS else b""

    @staticmethod
    def capturing(state: tuple) -> bool:
        """Whether `state` is inside an object item read with its frames (an open object
        with a unique array below: the stack holds a ("c", its bytes so far) entry after
        its array's) where an object item came before in that array: a closing bracket
        may end it as a repeat."""
        stack = state[0]
        return any(e[0] == "c" and any(k[:1] == VALUE_MARK for k in stack[j - 1][4]) for j, e in enumerate(stack))

    def used_up(self, state: tuple) -> bool:
        """Whether `state` is in a unique array of listed strings whose items so far, with
        the one under way, take every listed value: a comma after them would begin an
        item that can only repeat."""
        stack, dead, mode, _ = state
        return not dead and bool(stack) and stack[-1][0] == "a" and self._full(stack[-1], mode & 7 == 3)

    def _full(self, top: tuple, more: int) -> bool:
        """Whether the array `top` (a stack entry) holds every listed value of its items
        once `more` items under way are in."""
        limit = self.limits.get(top[1])
        return limit is not None and len(top[3]) + more >= limit

    @staticmethod
    def between_items(state: tuple) -> bool:
        """Whether `state` is in a unique array, outside its string items (between
        items, or in a number item)."""
        stack, dead, mode, _ = state
        return not dead and mode in (0, 4) and bool(stack) and stack[-1][0] == "a" and stack[-1][3] is not None


def string_value(raw: bytes) -> bytes:
    """A whole string's characters as UTF-8 bytes (`raw`: its bytes between the quotes,
    escapes and all)."""
    if 0x5C not in raw:  # (raw bytes are their UTF-8 bytes: the usual case)
        return raw
    return json.loads(b'"' + raw + b'"').encode("utf-8", "surrogatepass")


def decoded_prefix(buf: bytes) -> bytes | None:
    """A string's bytes so far (`buf`: raw, after its opening quote) as UTF-8 bytes of
    its characters, a character cut short left as its bytes; None while an escape is
    unfinished (a backslash last, `\\u00`, the first half of a surrogate pair)."""
    if 0x5C not in buf:  # (raw bytes are their UTF-8 bytes: the usual case)
        return buf
    cut = k = len(buf)
    while k > 0 and cut - k < 3 and buf[k - 1] & 0xC0 == 0x80:
        k -= 1
    if k > 0 and buf[k - 1] >= 0xC0:  # (a character cut short is left as its bytes)
        lead = buf[k - 1]
        if cut - k + 1 < (2 if lead < 0xE0 else 3 if lead < 0xF0 else 4):
            cut = k - 1
    try:
        text = json.loads(b'"' + buf[:cut] + b'"')
    except ValueError:  # (an escape cut short)
        return None
    if text and "\ud800" <= text[-1] <= "\udbff":  # (the first half of a surrogate pair)
        return None
    return text.encode("utf-8", "surrogatepass") + buf[cut:]


def _close_capture(stack: list, frames: list, starts: dict, data: bytes) -> bool:
    """End the object item read with its frames whose ("c", bytes) entry is on top of
    `stack` (feed's), its last bytes the end of `data` (_keep_item)."""
    cap = stack.pop()
    return _keep_item(stack, frames, cap[1] + data[starts.pop(len(stack), 0):])


def _keep_item(stack: list, frames: list, text: bytes) -> bool:
    """The list or object item `text` (whole) joins the items of the array on top of
    `stack` (feed's), as its value (_value_key) and, in a CLOSED array, an object's
    normal text too (for _viable's walks); False where it repeats an earlier one."""
    _, f, k, seen, keys = stack[-1]
    key = _value_key(text)
    if key in keys:
        return False
    if text[:1] == b"{" and frames[f][1] & CLOSED:
        normal = VALUE_MARK + _normal_text(text)[0]
        at = bisect_left(seen, normal)
        seen = (*seen[:at], normal, *seen[at:])
    stack[-1] = ("a", f, k, seen, keys | {key})
    return True


def _value_key(text: bytes) -> bytes:
    """The value of a list or object item's text, as one text per value: compact, keys
    sorted, strings without escapes JSON does not need, numbers as _number_key writes
    them; after a 0xFE byte (which UTF-8 never has: no string item's bytes, no number's
    key, start with it).

    >>> _value_key(b'{"b": [1.0, "\\\\u0061"], "a": true}') == _value_key(b'{"a":true,"b":[1,"a"]}')
    True
    """
    number = lambda t: _Number(_number_key(t.encode()).decode())  # noqa: E731
    return VALUE_MARK + _canon(json.loads(text, parse_int=number, parse_float=number)).encode(
        "utf-8", "surrogatepass")


class _Number(str):
    """A number's text in a value read by _value_key (not a string: `1` is not `"1"`)."""
    __slots__ = ()


def _canon(v) -> str:
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _canon(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(map(_canon, v)) + "]"
    if isinstance(v, _Number):
        return str.__str__(v)
    return json.dumps(v, ensure_ascii=False)  # (a string, true, false, null)


def _number_key(text: bytes) -> bytes:
    """The value of a number's text, as the one text each value has here: the
    automaton's numbers (fsm/json/numbers.py: no exponents, no -0) without the trailing
    zeros of their fraction; an exponent form (never written there) through Decimal.

    >>> [_number_key(t) for t in (b"10", b"1.50", b"-2.0", b"0.0", b"1.5e1", b"-0")]
    [b'10', b'1.5', b'-2', b'0', b'15', b'0']
    """
    if b"e" in text or b"E" in text:
        try:
            text = format(Decimal(text.decode()), "f").encode()
        except InvalidOperation:  # (cut short: no value yet)
            return text
    if 0x2E in text:
        text = text.rstrip(b"0").rstrip(b".")
    return b"0" if text == b"-0" else text


@functools.lru_cache(maxsize=4096)  # (a walk in a captured item asks it of the same bytes again)
def _normal_text(buf: bytes) -> tuple[bytes, bytes]:
    """(The normal text of an object item's bytes so far, the bytes it holds back): the
    bytes without whitespace outside strings, each number as _number_key writes it,
    one cut short (at the end) without its fraction's trailing zeros or dot, which it
    holds back (a closed object has one text per value but for those: CLOSED). Every
    way on from `buf` has a normal text that begins with this one.

    >>> _normal_text(b'{"a": 1.0, "b":"x 0.50", "c":[2.50')
    (b'{"a":1,"b":"x 0.50","c":[2.5', b'0')
    """
    out, held = [], b""
    for m in _PART.finditer(buf):
        number, space = m.group(1), m.group(2)
        if number is not None:
            if m.end() < len(buf):
                out.append(_number_key(number))
            else:  # (cut short: "1.50" may go on as 1.501)
                shown = number.rstrip(b"0").rstrip(b".") if 0x2E in number else number
                out.append(shown)
                held = number[len(shown):]
        elif space is None:
            out.append(m.group())
    return b"".join(out), held


# an object item's parts: a string (maybe cut short), a number, whitespace, anything else
_PART = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|(-?[0-9][-+.0-9eE]*|-\Z)|([ \t\n\r]+)|[^" \t\n\r0-9-]+')
_HELD_ENDS = frozenset(bytes((c,)) for c in b"0.")
_STRING_STOP = re.compile(rb'["\\]')
_NUMBER_STOP = re.compile(rb"[^0-9.eE+\-]")  # (a number item ends at the first byte that is none of its)
_DEAD_STOP = re.compile(rb'["\[\]{}]')
_ITEM_STOP = re.compile(rb'["\[\]{}]')


def plan_unique_items(comp, make_compiler=None,
                      counts: dict | None = None) -> tuple[UniquePlan | None, set, set, dict] | None:
    """(the plan or None where it checks nothing, ids of the uniqueItems schemas it
    checks, ids of the schemas whose anyOf it reads as absent: _Planner.vacuous, why it
    checks the others: {JSON pointer of a uniqueItems schema: reason}) for the schema
    `comp` indexed, or None where it has no uniqueItems. `make_compiler(edit)` makes another
    compiler, of the copies of the schema and its documents that `edit(root, documents)` returns,
    to count bounded strings and closed objects with (None: only open strings). `counts`:
    the counts of other plans of copies of the schema to share (a split anyOf's branches:
    fsm/json/union.py), by the schemas' JSON text."""
    if not comp._uniques:
        return None
    if comp._dynamic:  # ($dynamicRef copies are made per compiler)
        return None, set(), set(), {comp.ptr(u): "beside a $dynamicRef" for u in comp._uniques}
    try:
        return _Planner(comp, make_compiler, counts).run()
    except _TooManyFrames:
        why = f"the values around unique arrays pass {MAX_UNIQUE_FRAMES} frames (MAX_UNIQUE_FRAMES) to plan"
        return None, set(), set(), {comp.ptr(u): why for u in comp._uniques}


def without_unique_items(root, documents: dict | None, covered: set, vacuous: set = frozenset()):
    """Copies of the root schema and the documents with the uniqueItems of the schemas
    whose ids are in `covered` removed, and the anyOf of those in `vacuous` (which the
    plan read as absent: the compiler must not meet a uniqueItems it left there)."""
    def edit(node: dict, kw: str) -> None:
        node.pop(kw, None)
    return _edited(root, documents, [(i, functools.partial(edit, kw=kw))
                                     for ids, kw in ((covered, "uniqueItems"), (vacuous, "anyOf")) for i in ids])[:2]


def _edited(root, documents: dict | None, edits: list) -> tuple:
    """(copies of the root schema and the documents, {id of a schema: its copy}), each
    (id, function) of `edits` applied to the copy of the schema with that id."""
    docs = dict(documents or {})
    memo: dict = {}
    new_root, new_docs = copy.deepcopy((root, docs), memo)
    for i, fn in edits:
        node = memo.get(i)
        if isinstance(node, dict):
            fn(node)
    return new_root, new_docs, memo


def _one_item(node: dict) -> None:
    """A unique array of at most one item (unique whatever it holds: _Planner's counts)."""
    node.pop("uniqueItems", None)
    hi = node.get("maxItems")
    node["maxItems"] = 1 if not isinstance(hi, int) or hi > 1 else hi


class _TooManyFrames(Exception):
    pass


class _TooManyWays(Exception):
    pass


class _Planner:
    def __init__(self, comp, make_compiler=None, counts: dict | None = None):
        # (a compiler of a copy of the schema with unique arrays of one item, {id: copy}: _domain_size)
        self.comp, self.make_compiler, self.helper = comp, make_compiler, None
        self.frames: list = []
        self.index: dict = {}
        self.queue: list = []
        self.tables: dict = {}  # pattern -> _pattern_table
        self.endless: dict = {}  # pattern -> _endless
        self.marks: dict = {}  # id(schema) -> its if/then/else branches, marked (_if_branches)
        # ids of `not` schemas that only list values (`not: {enum: [0]}` on exit codes):
        # they take out a few values of numbers, which stay endless
        self.excluded: set = set()
        self.types: dict = {}  # id(schema) -> types_of
        self.domains: dict = {}  # ids of item schemas -> _domain_size
        self.counts = counts  # (kind, JSON text and bases of item schemas) -> _domain_size, shared
        self.limits: dict = {}  # array frame -> how many listed strings its items are (UniquePlan.limits)
        self.targets: dict = {}  # id(schema) -> its $ref's target
        self.reaches = self._reaching(comp)
        self.checked: set = set()  # ids of uniqueItems schemas in a frame checked at run time
        self.kept: set = set()  # ids of those that also sit where it cannot be checked
        self.reasons: dict = {}  # JSON pointer of such a schema -> why (_checkable)
        self.why: str | None = None  # why the frame _checkable reads is not checked (_no)
        # ids of the schemas whose anyOf always holds (a branch of annotations only, `{}`),
        # where no unevaluated* reads which branch held: read, and compiled, without it
        # (`anyOf: [job_template, {}]`, whose template's arrays are unique)
        self.holds: dict = {}  # (id(schema), kind) -> _holds_all
        self.vacuous = set() if comp._unevaluated else {
            k for k, s in self.nodes.items() if any(_always(b) for b in _list(s, "anyOf"))}

    def run(self):
        root = self.child([[(self.comp.entry, True)]])
        while self.queue:
            self._expand(*self.queue.pop())
        covered = self.checked - self.kept
        return UniquePlan(self.frames, root, self.limits) if covered else None, covered, self.vacuous, self.reasons

    # -- the schemas from which a uniqueItems can be reached --------------------------
    def _reaching(self, comp) -> set:
        nodes = self.nodes = {}  # id -> every schema the entry applies somewhere
        into: dict = {}
        todo = [comp.entry]
        while todo:
            s = todo.pop()
            if not isinstance(s, dict) or id(s) in nodes:
                continue
            nodes[id(s)] = s
            for t in _subschemas(s, self._target):
                if isinstance(t, dict):
                    into.setdefault(id(t), []).append(id(s))
                    todo.append(t)
        out: set = set()
        todo = [id(u) for u in comp._uniques if id(u) in nodes]
        while todo:
            k = todo.pop()
            if k not in out:
                out.add(k)
                todo.extend(into.get(k, ()))
        return out

    # -- frames -------------------------------------------------------------------------
    def child(self, ways: list) -> tuple:
        """The (object, array) frames of a value that `ways` (lists of (schema, sure)
        pairs, one list per alternative) apply to."""
        if not any(isinstance(s, dict) and id(s) in self.reaches for w in ways for s, _ in w):
            return DEAD
        return self._frame(ways, "object"), self._frame(ways, "array")

    def _frame(self, ways: list, kind: str) -> int:
        alts = {}
        for w in ways:
            for sure, maybe in self._alternatives(w, kind):
                if all(self._takes(x, kind) for x in sure.values()):  # (else no such value)
                    alts[(frozenset(sure), frozenset(maybe))] = (sure, maybe)
        return self._frame_of(alts, kind)

    def _frame_of(self, alts: dict, kind: str, decided: bool = False) -> int:
        """The frame of the ways `alts` ({key: (sure, maybe)}); `decided`: an object's
        whose discriminating key was read (_expand)."""
        if not any(k in self.reaches for sure, maybe in alts.values() for k in (*sure, *maybe)):
            return -1
        key = (kind, frozenset(alts), decided)
        fid = self.index.get(key)
        if fid is None:
            if len(self.frames) >= MAX_UNIQUE_FRAMES:
                raise _TooManyFrames
            fid = self.index[key] = len(self.frames)
            self.frames.append(None)
            self.queue.append((fid, kind, alts, decided))
        return fid

    def _alternatives(self, schemas: list, kind: str, split: bool = True) -> list:
        """The ways the schemas that apply to a value of `kind` where `schemas` do may
        hold: [(sure, maybe)], each id -> schema. A union with several branches for
        `kind` is one way per branch (up to MAX_ALTERNATIVES; above, its branches are
        maybe-schemas of one way)."""
        try:
            return self._ways(list(schemas), kind, {}, {}, [], split)
        except _TooManyWays:
            return self._ways(list(schemas), kind, {}, {}, [], False)

    def _ways(self, todo: list, kind: str, sure: dict, maybe: dict, splits: list, split: bool) -> list:
        while todo:
            s, is_sure = todo.pop()
            if s is False and is_sure:  # (no value: not a way at all)
                return []
            if not isinstance(s, dict) or id(s) in sure or (not is_sure and id(s) in maybe):
                continue
            (sure if is_sure else maybe)[id(s)] = s
            if "$ref" in s:
                todo.append((self._target(s), is_sure))
            todo.extend((b, is_sure) for b in _list(s, "allOf"))
            for kw in ("anyOf", "oneOf"):
                if kw == "anyOf" and (id(s) in self.vacuous or self._holds_all(s, kind)):
                    continue
                fit = [b for b in _list(s, kw) if self._takes(b, kind)]
                if is_sure and split and len(fit) > 1:
                    splits.append(fit)
                else:
                    todo.extend((b, is_sure and len(fit) == 1) for b in fit)
            branch = self._if_branches(s, kind) if is_sure and split else None
            n = s.get("not")
            if isinstance(n, dict) and (said := n.keys() - _ANNOTATIONS) and said <= {"enum", "const"}:
                self.excluded.add(id(n))
            if branch is None:
                todo.extend((s[kw], False) for kw in ("not", "if", "then", "else") if kw in s)
            else:
                todo.extend((s[kw], False) for kw in ("not",) if kw in s)
                if isinstance(branch, list):
                    splits.append(branch)
                else:
                    todo.append((branch, True))
            for kw in ("dependentSchemas", "dependencies"):
                if isinstance(s.get(kw), dict):
                    todo.extend((v, False) for v in s[kw].values() if isinstance(v, dict))
        if not _consistent(_marks(sure)):
            return []  # (its if/then branches ask for two values of one key)
        if splits:
            fit, out = splits[-1], []
            for b in fit:
                out += self._ways([(b, True)], kind, dict(sure), dict(maybe), splits[:-1], split)
                if len(out) > MAX_ALTERNATIVES:
                    raise _TooManyWays
            return out
        for k in sure:
            maybe.pop(k, None)
        return [(sure, maybe)]

    def _holds_all(self, s: dict, kind: str) -> bool:
        """Whether s's anyOf holds on every value of `kind` (a branch that asserts nothing
        of them: `{items: ...}` beside object branches), where no
        unevaluated* reads which branch held: read without it for that kind, as a
        vacuous one (the uniqueItems in its other branches bind nothing there)."""
        key = (id(s), kind)
        if key not in self.holds:
            comp = self.comp
            self.holds[key] = not comp._unevaluated and any(
                self._takes(b, kind) and comp._idle_of(b, kind) for b in _list(s, "anyOf"))
        return self.holds[key]

    def _if_branches(self, s: dict, kind: str):
        """For a schema with an if/then/else whose `if` tests one key's value
        (variants._condition): for a value that is no object, `then` (the test
        holds: properties and required say nothing of it); for an object, where the test
        is a string const, both branches, each marked with its outcome (_IF: the key,
        the value, whether the test holds, whether it requires the key), for the frame
        to tell apart by the key's value (_expand); None otherwise (then and else may
        apply). Made once per schema: frames tell their ways apart by the marks' ids."""
        c = _condition(s)
        if c is None:
            return None
        key, test, req, then, other = c
        if kind != "object":  # (properties and required say nothing of other values: the test holds)
            return then
        if not isinstance(test, dict) or _schema_keys(test) - _ANNOTATIONS != {"const"} \
                or not isinstance(test["const"], str):
            return None
        if id(s) not in self.marks:
            self.marks[id(s)] = [{"allOf": [b], _IF: (key, test["const"], holds, req)}
                                 for b, holds in ((then, True), (other, False))]
        return self.marks[id(s)]

    def _expand(self, fid: int, kind: str, alts: dict, decided: bool) -> None:
        disc, before = None, None
        if kind == "object" and not decided:
            disc = self._discriminator(alts)
        if disc is not None:  # (its subframes, and the ways where the key is absent)
            d, values = disc
            subs = {v: self._frame_of({k: a for k, a in alts.items() if _allows(_marks(a[0]), v)}, kind, True)
                    for v in (*values, _OTHER)}
            disc = (d, {v: f for v, f in subs.items() if v is not _OTHER}, subs[_OTHER])
            before = [_pairs(*a) for a in alts.values()]
            alts = {k: a for k, a in alts.items() if _allows(_marks(a[0]), _ABSENT)}
        alts = list(alts.values())
        ways = [_pairs(*a) for a in alts]
        if kind == "object":
            rank = {k: i for i, k in enumerate(self.comp.key_order)} if disc else {}
            early = lambda k: disc and rank.get(k, len(rank)) <= rank.get(disc[0], -1)  # noqa: E731
            names = {k for w in (before or ways) for x, _ in w if isinstance(x.get("properties"), dict)
                     for k in x["properties"]}
            pats = sorted({p for w in ways for x, _ in w if isinstance(x.get("patternProperties"), dict)
                           for p in x["patternProperties"]})
            tables = [self._pattern_table(p) for p in pats] if len(pats) <= MAX_KEY_PATTERNS else [None]
            if None in tables:  # (which patterns a key matches is not known: they may apply)
                tables, others = [], {0: self.child([self._key_schemas(w, _OTHER) for w in ways])}
            else:
                others = {sig: self.child([self._key_schemas(w, _OTHER, {p for i, p in enumerate(pats) if sig >> i & 1})
                                           for w in ways]) for sig in range(1 << len(pats))}
            keys = {k: c for k in names
                    if (c := self.child([self._key_schemas(w, k) for w in (before if early(k) else ways)]))
                    != others.get(0) or tables}
            self.frames[fid] = ("o", keys, tables, others, disc)
            return
        longest = max((len(p) for w in ways for x, _ in w if (p := _prefix(x)[0])), default=0)
        slots = [[self._item_schemas(w, i) for w in ways] for i in [*range(longest), None]]
        unique = self._checkable(alts, slots, fid)
        self.frames[fid] = ("a", unique, [self.child(c) for c in slots[:-1]], self.child(slots[-1]))

    def _discriminator(self, alts: dict):
        """(key, its tested values) where the ways of an object frame are told apart by
        if/then/else tests of one key's value (_if_branches), a key of their own in
        every way (declared or required: so the keys after it in the key order are
        read after it, or where it is absent); else None."""
        marks = [_marks(sure) for sure, _ in alts.values()]
        keys = {m[0] for ms in marks for m in ms}
        if len(keys) != 1:
            return None
        d, = keys
        if not all(any(d in _map(x, "properties") or d in _list(x, "required") for x in sure.values())
                   for sure, _ in alts.values()):
            return None
        return d, sorted({m[1] for ms in marks for m in ms})

    def _key_schemas(self, schemas: list, key, matched: set | None = None) -> list:
        """The schemas of a property `key` (_OTHER: one no `properties` declares, whose
        name matches the patterns `matched`; None: not known which)."""
        out = []
        for s, is_sure in schemas:
            props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
            pats = s.get("patternProperties") if isinstance(s.get("patternProperties"), dict) else {}
            if key is _OTHER and matched is None:
                out.extend((v, False) for v in pats.values())
                if "additionalProperties" in s:
                    out.append((s["additionalProperties"], is_sure and not pats))
            else:
                hits = ([v for p, v in pats.items() if p in matched] if key is _OTHER else
                        ([props[key]] if key in props else []) + (self.comp._pattern_hits(pats, key) if pats else []))
                out.extend((v, is_sure) for v in hits)
                if not hits and "additionalProperties" in s:
                    out.append((s["additionalProperties"], is_sure))
            if "unevaluatedProperties" in s:
                out.append((s["unevaluatedProperties"], False))
        return out

    def _types(self, s):
        """disjoint.types_of, remembered (the frames ask it of the same branches often)."""
        k = id(s)
        if k not in self.types:
            self.types[k] = types_of(self.comp, s)
        return self.types[k]

    def _takes(self, s, kind: str) -> bool:
        t = self._types(s)
        return t is None or kind in t

    def _target(self, s: dict):
        k = id(s)
        if k not in self.targets:
            self.targets[k] = self.comp._resolve(s, s["$ref"])
        return self.targets[k]

    def _pattern_table(self, pattern: str):
        """(transition table, accepting, start) of the whole DFA of the encoded keys with a
        match of `pattern`, for the tracker; None where it has more than
        MAX_PATTERN_STATES states or the compiler cannot read it."""
        if pattern not in self.tables:
            comp = self.comp
            try:
                dfa = LazyDFA(JsonTermSource(comp.tb), comp.st.search(pattern), MAX_PATTERN_STATES)
                s = 1
                while s < dfa.num_states:
                    dfa.expand(s)
                    s += 1
                n = dfa.num_states
                self.tables[pattern] = (dfa.table[:n].copy(), dfa.accepting[:n].copy(), dfa.start)
            except TimeBudgetError:  # (the budget ends the compile, no fallback)
                raise
            except (RegexError, TooLargeError):
                self.tables[pattern] = None
        return self.tables[pattern]

    @staticmethod
    def _item_schemas(schemas: list, i: int | None) -> list:
        out = []
        for s, is_sure in schemas:
            pre, rest = _prefix(s)
            if i is not None and pre and i < len(pre):
                out.append((pre[i], is_sure))
            elif rest is not None:
                out.append((rest, is_sure))
            for kw in ("contains", "unevaluatedItems"):
                if kw in s:
                    out.append((s[kw], False))
        return out

    def _checkable(self, alts: list, slots: list, fid: int) -> int:
        """How array frame fid's uniqueItems is checked at run time: 0 not (noted in
        self.kept), else the flags of its items' kinds (noted in self.checked). Every
        way must hold one, in a sure schema, and keep the items strings (open ones,
        bounded ones of at least MIN_UNIQUE_DOMAIN values, or listed ones: self.limits)
        or numbers without bounds."""
        uniques = {k: x for sure, maybe in alts for k, x in (sure | maybe).items() if x.get("uniqueItems") is True}
        if not uniques:
            return 0
        self.why = next(filter(None, (_unread(sure, maybe) for sure, maybe in alts)), None)
        ok = self.why is None
        kinds = [self._item_kinds(w, i) for i, ways in zip([*range(len(slots) - 1), None], slots)
                 for w in ways] if ok else [0]
        how = 0 if 0 in kinds else functools.reduce(operator.or_, kinds, 0)
        if all((t := self._types_of(w)) is not None and t <= _LITERAL_TYPES for ways in slots for w in ways):
            how = self._no("its items are true, false and null only (a finite set, which the compiler "
                           "keeps distinct)")
        if how & NUMBERS and how & INTEGERS:  # (slots that disagree: "5." may end as 5 in one, 5.5 in another)
            how = self._no("its items are integers in one place and any numbers in another")
        if how & OBJECTS and how & CLOSED:  # (an open object's keys come in any order: its text is no normal one)
            how = self._no("its items may be open objects (keys in any order) and closed ones")
        if not how and ok and len(slots) == 1 and (n := self._listed_count(alts, slots[0])
                                                   or self._counted(alts, slots[0])):
            how, self.limits[fid] = BOUNDED, n
        (self.checked if how else self.kept).update(uniques)
        if not how:
            for x in uniques.values():
                self.reasons.setdefault(self.comp.ptr(x), self.why or "its items are of no kind listed below")
        return how

    def _no(self, why: str) -> int:
        """0 (the frame's items are not checked), noting `why` for the compiler's
        refusal (the last note of a frame's reading: an outer test notes after an inner one)."""
        self.why = why
        return 0

    def _item_kinds(self, items: list, index: int | None) -> int:
        """The flags of the kinds of items the schemas `items` allow at place `index`
        of the array (None: after its prefix items): OPEN or BOUNDED strings
        (docs/json-schema.md), NUMBERS or INTEGERS without bounds, LISTS, OBJECTS, CLOSED, LITERALS;
        0 where some item they allow is none of those."""
        types = self._types_of(items)
        if types is None:  # (no type said: every kind must take whatever the schemas allow)
            types = _ANY_TYPES
        if not types:  # (no item here, as after prefixItems with items: false)
            return OPEN
        how = 0
        if types & _LITERAL_TYPES:
            # a literal is its value from its first byte on; refusing one that came never
            # corners the item where it can be of an endless kind too (whatever narrows
            # the literals: `[true, {...}]`, `enum: [true]` beside open
            # objects), or where it is the index-th item and there are more literals
            # than the index (an earlier item or two cannot take them all; only where no
            # schema narrows them)
            if types <= _LITERAL_TYPES:
                if any(maybe or not all(_only(x, _LITERAL_OK) for x in sure.values())
                       for t in types for sure, maybe in self._alternatives(items, t)):
                    return self._no("its items are true, false or null, which a schema there narrows or may narrow")
                if index is not None and index < 2 * ("boolean" in types) + ("null" in types):
                    return LITERALS
                return self._no("its items are true, false and null only (a finite set, which the compiler "
                                "keeps distinct)")
            how = LITERALS
        if "array" in types:
            if not self._lists_open(items):
                return self._no("its items may be arrays other than lists of open strings or of any values")
            how |= LISTS
        if "object" in types:
            if self._objects_open(items):
                how |= OBJECTS
            elif self._objects_closed(items):
                how |= CLOSED
            else:
                return self._no(f"its items may be objects neither open (taking one more key of endlessly many, "
                                f"with any value) nor closed ones of at least {MIN_UNIQUE_DOMAIN} values")
        if "string" in types:  # (a string begun may be cornered, whatever else an item may be)
            strings = self._string_kind(items)
            if not strings:  # (the tracker would not key them: one begun as an earlier one ends it)
                return self._no(f"its items may be strings of fewer than {MIN_UNIQUE_DOMAIN} values, or narrowed "
                                "by a schema that may apply")
            how |= strings
        if "number" in types:
            numbers = self._number_kind(items)
            if not numbers:
                return self._no("its items may be numbers with an upper or negative bound, multipleOf or an "
                                "enum, or narrowed by a schema that may apply")
            how |= numbers
        return how

    def _lists_open(self, items: list) -> bool:
        """Whether every array the schemas `items` allow is a list of open strings or of
        any values: each way of one holds, in sure schemas only, `items` whose strings
        are open, or that take any value, and no keyword that bounds the list (maxItems,
        prefixItems, contains, uniqueItems...)."""
        ways = self._alternatives(items, "array")
        if not self._exact(ways, "array"):
            return False
        for sure, maybe in ways:
            if maybe or not all(_only(x, _LIST_OK) for x in sure.values()):
                return False
            inner = [(x["items"], True) for x in sure.values() if "items" in x]
            if all(_always(x) for x, _ in inner):
                continue  # (lists of any values: from every point in one, endlessly many ways on)
            if not all(isinstance(x, dict) for x, _ in inner):
                return False
            types = None
            for x, _ in inner:
                t = self._types(x)
                types = t if types is None or t is None else types & t
            if types != {"string"} or self._string_kind(inner) != OPEN:
                return False
        return True

    def _objects_open(self, items: list) -> bool:
        """Whether every object the schemas `items` allow can always take one more key
        of endlessly many, with any value: each way of one holds, in sure schemas only,
        no keyword that bounds the keys (maxProperties, propertyNames...), patterns that
        take any value, and either no schema that closes its object (additionalProperties
        absent, where the compiler allows undeclared keys, or taking any value) or a
        pattern of endlessly many keys that every schema that closes it has too. (One
        with a uniqueItems below is read with its frames, its bytes kept:
        UniquePlan.capturing.)"""
        ways = self._alternatives(items, "object")
        if not self._exact(ways, "object"):
            return False
        for sure, maybe in ways:
            if maybe or not all(_only(x, _OBJECT_OPEN_OK) for x in sure.values()):
                return False
            pats = [_map(x, "patternProperties") for x in sure.values()]
            if not all(_always(v) for ps in pats for v in ps.values()):
                return False
            if not sure or self.comp.allow_extra and all(_always(x.get("additionalProperties", True))
                                                         for x in sure.values()):
                continue  # (any key that none declares, with any value: no schema here, or none closes it)
            closing = [ps for x, ps in zip(sure.values(), pats) if not _always(x.get("additionalProperties", True))]
            if not any(all(p in ps for ps in closing) and self._endless(p) for ps in pats for p in ps):
                return False
        return True

    def _objects_closed(self, items: list) -> bool:
        """Whether the objects the schemas `items` allow have one text per value (less
        numbers' trailing zeros and whitespace, which the tracker's normal text drops:
        _normal_text) and are at least MIN_UNIQUE_DOMAIN values: each way of one holds,
        in sure schemas only, additionalProperties false (its keys are declared ones,
        which come in the key order) and no patternProperties, and the objects below are
        so too (_closed_below). One with a unique array below (a list of references,
        each with its unique authors) is read with its frames, its bytes kept (the matcher walks
        both levels: UniqueMatcher._viable_capture), and counted with those arrays of one
        item at most (_one_item: fewer values, none repeating an item)."""
        if self.make_compiler is None or not self._closed_below(items, set()):
            return False
        # (by the schemas of its ways: the arrays of one kind of object, authors
        # and editors alike, count it once)
        ways = sorted({tuple(sorted(k for k, x in sure.items() if not _only(x, _QUIET)))
                       for sure, _ in self._alternatives(items, "object")})
        key = ("object", *ways)
        if key not in self.domains:
            self.domains[key] = self._domain_size([s for s, is_sure in items if is_sure], "object")
        return self.domains[key] >= MIN_UNIQUE_DOMAIN

    def _closed_below(self, items: list, met: set, inner: bool = False) -> bool:
        """Whether every object that a value of the schemas `items` is or holds is
        closed (additionalProperties false, no patternProperties, in every way, in sure
        schemas only), and no unique array below holds items that reach a uniqueItems
        (they would be read with their frames too: one level only); `inner`: the schemas
        are such items. `met`: the schema lists under way (a cycle holds what the rest of
        it holds)."""
        key = (inner, *sorted(id(s) for s, _ in items))
        if key in met:
            return True
        met.add(key)
        if inner and any(isinstance(s, dict) and id(s) in self.reaches for s, _ in items):
            return False
        types = self._types_of(items)
        if types is None or "object" in types:
            for sure, maybe in self._alternatives(items, "object"):
                if maybe or not all(_only(x, _OBJECT_CLOSED_OK) for x in sure.values()) \
                        or not any(x.get("additionalProperties") is False for x in sure.values()) \
                        or any(_map(x, "patternProperties") for x in sure.values()):
                    return False
                names = {k for x in sure.values() for k in _map(x, "properties")}
                for k in names:
                    if not self._closed_below([(x["properties"][k], True) for x in sure.values()
                                               if k in _map(x, "properties")], met, inner):
                        return False
        if types is None or "array" in types:
            for sure, maybe in self._alternatives(items, "array"):
                if not all(_only(x, _VALUE_OK) for x in (*sure.values(), *maybe.values())):
                    return False
                ways = _pairs(sure, maybe)
                longest = max((len(p) for x, _ in ways if (p := _prefix(x)[0])), default=0)
                unique = inner or any(x.get("uniqueItems") is True for x, _ in ways)
                for i in [*range(longest), None]:
                    if not self._closed_below([(u, True) for u, _ in self._item_schemas(ways, i)], met, unique):
                        return False
        return True

    def _types_of(self, items: list):
        """The types the sure schemas of `items` allow together (None: any)."""
        types = None
        for s, is_sure in items:
            if is_sure:
                t = self._types(s)
                if t is not None:
                    types = t if types is None else types & t
        return types

    def _endless(self, pattern: str) -> bool:
        """Whether endlessly many keys (at least MIN_UNIQUE_DOMAIN) match `pattern`."""
        if pattern not in self.endless:
            comp = self.comp
            try:
                dfa = LazyDFA(JsonTermSource(comp.tb), comp.st.search(pattern), MAX_PATTERN_STATES)
                self.endless[pattern] = _count_strings(dfa, MIN_UNIQUE_DOMAIN) >= MIN_UNIQUE_DOMAIN
            except TimeBudgetError:  # (the budget ends the compile, no fallback)
                raise
            except (RegexError, TooLargeError):
                self.endless[pattern] = False
        return self.endless[pattern]

    def _string_kind(self, items: list) -> int:
        """OPEN where every string the schemas `items` allow is an open one, BOUNDED
        where they are a language of at least MIN_UNIQUE_DOMAIN strings, else 0."""
        ways = self._alternatives(items, "string")
        if not all(_only(x, _MAYBE_STRING_OK) for sure, maybe in ways for x in maybe.values()):
            return 0
        string_ok = _STRING_OK if self.comp.assert_formats else _STRING_OK | {"format"}
        if all(_only(x, string_ok) for sure, maybe in ways for x in sure.values()) and self._exact(ways, "string"):
            return OPEN
        if self.make_compiler is None:
            return 0
        return BOUNDED if self._domain_size([s for s, is_sure in items if is_sure]) >= MIN_UNIQUE_DOMAIN else 0

    def _exact(self, ways: list, kind: str) -> bool:
        """Whether the ways (_alternatives) of values of `kind` hold no fewer of them than
        the schemas do: no `not` (but one that lists a few values: self.excluded), no
        `then`/`else` that is false, no maybe schema with a type or listed values, no
        oneOf whose branches of that kind may overlap (read here as anyOf). Where they
        may hold fewer (`not: {type: string}`, `oneOf: [{type: [boolean, string]},
        {type: string}]`: no string at all), a kind read as endless (open strings,
        numbers, lists, open objects) may have no new item, and refusing repeats
        leaves no way on."""
        for sure, maybe in ways:
            for x in (*sure.values(), *maybe.values()):
                n = x.get("not")
                if (n is not None and id(n) not in self.excluded) or x.get("then") is False or x.get("else") is False:
                    return False
                fit = [b for b in _list(x, "oneOf") if self._takes(b, kind)]
                if len(fit) > 1 and not disjoint(self.comp, x, fit):
                    return False
            if any(x.keys() & {"type", "enum", "const"} for x in maybe.values() if id(x) not in self.excluded):
                return False
        return True

    def _listed_count(self, alts: list, ways: list) -> int:
        """N where every way of the array (`alts`, its items' schemas `ways`) takes as
        items the same N strings, listed (enum, const) and constrained by nothing else,
        and asks for at most N of them (minItems); else 0."""
        values = None
        for items in ways:
            if self._types_of(items) != {"string"}:  # (items of other kinds would go unchecked)
                return 0
            got = self._listed_strings(items)
            if got is None or (values is not None and got != values):
                return 0
            values = got
        return len(values) if values and _min_items_fit(alts, len(values)) else 0

    def _counted(self, alts: list, ways: list) -> int:
        """N where the array has one way, whose items are strings only (one way of
        them, no maybe schemas) of N < MIN_UNIQUE_DOMAIN values counted on their DFA
        (language codes, `^[a-z]{2,3}$`: 18252), and asks for at most N of them;
        else 0. Such items are kept distinct as listed ones are: no comma after N."""
        if len(ways) != 1 or self.make_compiler is None or self._types_of(ways[0]) != {"string"}:
            return 0
        strings = self._alternatives(ways[0], "string")
        if len(strings) != 1 or strings[0][1]:
            return 0
        n = self._domain_size([s for s, is_sure in ways[0] if is_sure])
        return n if 0 < n < MIN_UNIQUE_DOMAIN and _min_items_fit(alts, n) else 0

    def _listed_strings(self, items: list) -> frozenset | None:
        """The strings the schemas `items` allow where that is a list: one way, every
        schema sure, at least one listing values (all strings), none with a keyword that
        may narrow strings otherwise; None elsewhere."""
        ways = self._alternatives(items, "string")
        if len(ways) != 1 or ways[0][1]:
            return None
        values = None
        for x in ways[0][0].values():
            if not _only(x, _LISTED_OK) or not self._takes(x, "string"):
                return None
            if "enum" in x or "const" in x:
                listed = _finite_values({k: x[k] for k in ("type", "enum", "const") if k in x})
                if listed is None or not all(isinstance(v, str) for v in listed):
                    return None
                values = frozenset(listed) if values is None else values & frozenset(listed)
        return values

    def _number_kind(self, items: list) -> int:
        """INTEGERS where the numbers the schemas `items` allow are the integers, NUMBERS
        where they are all numbers, but for a few values that a `not` lists or a lower
        bound of 0 or more takes out, else 0 (an upper or negative bound, multipleOf, an
        enum: a finite or sparse set, which refusing repeats might corner: `-1.5` ends
        there above -1.5). From an integer's "0" or "5." the only ways on are texts of
        the same value; from a number's, endlessly many (above a bound of 0 or more, a
        beginning of a number goes on to ever greater values, `0.5` to `0.51`). The
        values a `not` lists take out a few of the endlessly many, never all."""
        ways = self._alternatives(items, "number")
        if not all(_only(x, _NUMBER_FROM_ZERO_OK) and _from_zero(x) for sure, maybe in ways for x in sure.values()) \
                or not self._exact(ways, "number"):
            return 0
        if any(not _only(x, _NUMBER_OK) or _integral(x) for sure, maybe in ways for x in maybe.values()
               if id(x) not in self.excluded):
            return 0  # (a maybe schema that may narrow the numbers to integers or to a range)
        return INTEGERS if all(any(_integral(x) for x in sure.values()) for sure, maybe in ways) else NUMBERS

    def _domain_size(self, schemas: list, kind: str = "string") -> int:
        """How many strings (`kind`: or objects) all of `schemas` hold, counted on their DFA up to
        MIN_UNIQUE_DOMAIN: by lengths first (a name pattern passes the bound within a
        few characters), then, past DOMAIN_LEVELS lengths, over the whole DFA (a cycle:
        endless); 0 where the DFA has more than MAX_DOMAIN_STATES states or a schema is
        refused; an enum's length where it lists fewer. The terms are built by a
        compiler of their own, of a copy of the schema
        whose unique arrays hold one item at most (_one_item: where an item holds some,
        no value counted repeats an item there, so the count is a lower bound; elsewhere
        the copy is the schema). Remembered per schemas (and in `counts`, by their text)."""
        key = (kind, *(id(x) for x in schemas))
        listed = [len(v) for x in schemas if (v := self.comp._listed_values(x)) is not None]
        if listed and min(listed) < MIN_UNIQUE_DOMAIN:  # (an enum: no more strings than it lists)
            return min(listed)
        text = None
        if key not in self.domains and self.counts is not None:
            text = (kind, json.dumps(schemas, sort_keys=True, default=repr),
                    tuple(self.comp.base_of.get(id(x), "") for x in schemas))
            if text in self.counts:
                self.domains[key] = self.counts[text]
        if key not in self.domains:
            if self.helper is None:  # ({id: copy} maps the schemas)
                copies: dict = {}
                edits = [(id(u), _one_item) for u in self.comp._uniques]

                def edit(root, docs):
                    new_root, new_docs, memo = _edited(root, docs, edits)
                    copies.update(memo)
                    return new_root, new_docs
                self.helper = (self.make_compiler(edit), copies)
            comp, copies = self.helper
            schemas = [copies.get(id(x), x) for x in schemas]
            try:
                tb = comp.tb
                texts = [comp.st.quoted(comp.st.any_chars)] if kind == "string" else [
                    tb.concat(tb.literal(b"{"), tb.anything), _normal_texts(tb)]
                term = tb.intersect([comp.value(x, comp.max_depth) for x in schemas] + texts)
                self.domains[key] = _count_strings(LazyDFA(JsonTermSource(comp.tb), term, MAX_DOMAIN_STATES),
                                                   MIN_UNIQUE_DOMAIN, DOMAIN_LEVELS if kind == "string" else 0)
            except TimeBudgetError:  # (the budget ends the compile, no fallback)
                raise
            except (SchemaError, TooLargeError):
                self.domains[key] = 0
            if text is not None:
                self.counts[text] = self.domains[key]
        return self.domains[key]


_IF = "x-unique-if"  # marks an if/then/else branch (_Planner._if_branches); no keyword
_ABSENT = object()  # a discriminating key's value where the object has none


def _pairs(sure: dict, maybe: dict) -> list:
    """A way's schemas as (schema, sure) pairs."""
    return [(x, True) for x in sure.values()] + [(x, False) for x in maybe.values()]


def _marks(sure: dict) -> list:
    """The outcomes of if/then/else tests a way holds (_Planner._if_branches)."""
    return [x[_IF] for x in sure.values() if _IF in x]


def _allows(marks: list, value) -> bool:
    """Whether the outcomes `marks` (_marks) all hold where their key has `value` (a
    string, _OTHER: another value, _ABSENT)."""
    for _, v, holds, req in marks:
        hit = value == v if value is not _ABSENT else not req  # (the test holds)
        if hit != holds:
            return False
    return True


def _consistent(marks: list) -> bool:
    """Whether some value of each key that `marks` test lets every one hold."""
    for key in {m[0] for m in marks}:
        tests = [m for m in marks if m[0] == key]
        if not any(_allows(tests, v) for v in ({m[1] for m in tests} | {_OTHER, _ABSENT})):
            return False
    return True


def _count_strings(dfa: LazyDFA, cap: int, levels: int = DOMAIN_LEVELS) -> int:
    """How many texts `dfa` accepts, up to `cap` (every state of a LazyDFA is live):
    by lengths up to `levels`, then over the whole DFA, depth first (a cycle: endless;
    an object's open string meets one within a few states, where counting lengths
    would expand every key's states first)."""
    level, total = {dfa.start: 1}, int(dfa.accepting[dfa.start])
    for _ in range(levels):
        nxt: dict = {}
        for q, c in level.items():
            dfa.expand(q)
            for r in dfa.table[q].tolist():
                if r:
                    nxt[r] = min(cap, nxt.get(r, 0) + c)
        total += sum(c for r, c in nxt.items() if dfa.accepting[r])
        if total >= cap or not nxt:
            return min(total, cap)
        level = nxt
    counts: dict = {}  # (past DOMAIN_LEVELS lengths: paths over the whole DFA)
    on_path, stack = {dfa.start}, [(dfa.start, None)]
    while stack:
        q, targets = stack[-1]
        if targets is None:
            targets = [int(dfa.table[q, b]) for b in dfa.live_bytes(q)]
            stack[-1] = (q, targets)
            counts[q] = int(dfa.accepting[q])
        if targets:
            r = targets.pop()
            if r in on_path:  # (a cycle: endless texts)
                return cap
            if r in counts:
                counts[q] = min(cap, counts[q] + counts[r])
            else:
                on_path.add(r)
                stack.append((r, None))
            continue
        stack.pop()
        on_path.discard(q)
        if stack:
            p = stack[-1][0]
            counts[p] = min(cap, counts[p] + counts[q])
    return counts[dfa.start]


def _normal_texts(tb):
    """The texts with no whitespace outside strings and every number as _number_key
    writes it (no fraction's trailing zeros, followed by `,` `}` or `]`): one text per
    value of a closed object, whose count then counts values (_domain_size)."""
    def bytes_of(data: bytes):
        return tb.alt([tb.byte_range(b, b) for b in data])
    digit, nz = tb.byte_range(0x30, 0x39), tb.byte_range(0x31, 0x39)
    string = tb.seq([tb.literal(b'"'), tb.star(tb.alt([
        tb.byte_range(0, 0x21), tb.byte_range(0x23, 0x5B), tb.byte_range(0x5D, 0xFF),
        tb.concat(tb.literal(b"\\"), tb.any_byte)])), tb.literal(b'"')])
    number = tb.seq([tb.optional(tb.literal(b"-")), tb.alt([tb.literal(b"0"), tb.concat(nz, tb.star(digit))]),
                     tb.optional(tb.seq([tb.literal(b"."), tb.star(digit), nz])), bytes_of(b",}]")])
    other = bytes_of(bytes(b for b in range(256) if b not in b'"-.0123456789 \t\n\r'))
    return tb.star(tb.alt([string, number, other]))


def _min_items_fit(alts: list, n: int) -> bool:
    """Whether no way of an array (`alts`) asks for more than n items."""
    return all(isinstance(lo := x.get("minItems", 0), int) and lo <= n for sure, _ in alts for x in sure.values())


def _from_zero(s: dict) -> bool:
    """Whether the lower bounds of s, if any, are 0 or more (draft-04's boolean
    exclusiveMinimum qualifies its minimum)."""
    for k in ("minimum", "exclusiveMinimum"):
        v = s.get(k, 0)
        if isinstance(v, bool):
            if k == "minimum":
                return False
        elif not isinstance(v, (int, float)) or v < 0:
            return False
    return True


def _integral(s: dict) -> bool:
    """Whether `type` holds integers and no other numbers."""
    ty = s.get("type")
    ty = ty if isinstance(ty, list) else [ty]
    return "integer" in ty and "number" not in ty


def _always(s) -> bool:
    """Whether every value holds schema s: true, or annotations only."""
    return s is True or (isinstance(s, dict) and not _schema_keys(s) - _ANNOTATIONS)


def _map(s: dict, kw: str) -> dict:
    v = s.get(kw)
    return v if isinstance(v, dict) else {}


def _unread(sure: dict, maybe: dict) -> str | None:
    """Why an array's way (its sure and maybe schemas) keeps its uniqueItems from the
    tracker; None where the tracker reads it."""
    if not any(x.get("uniqueItems") is True for x in sure.values()):  # (_MAYBE_ARRAY_OK has none)
        return "it may or may not apply there (under a union, if/then or not that the array's place does not decide)"
    for xs, allowed, whose in ((sure, _ARRAY_OK, "beside"), (maybe, _MAYBE_ARRAY_OK, "beside a schema that may apply "
                                                                                     "there, of")):
        said = sorted({k for x in xs.values() for k in x if k not in allowed and k in _KEYWORDS})
        if said:
            return f"{whose} {', '.join(said)}"
    return None


def _only(s: dict, allowed: frozenset) -> bool:
    return all(k in allowed or k not in _KEYWORDS for k in s)


def _list(s: dict, kw: str) -> list:
    v = s.get(kw)
    return v if isinstance(v, list) else []


def _prefix(s: dict) -> tuple:
    """(prefix item schemas, the schema of the items after them or None)."""
    pre, rest = s.get("prefixItems"), s.get("items")
    if isinstance(rest, list):  # (draft-07's tuple form)
        pre, rest = rest, s.get("additionalItems")
    return (pre if isinstance(pre, list) else None), rest




def _subschemas(s: dict, target):
    """The schemas `s` applies somewhere (its $ref's target too, `target(s)`; not its $defs)."""
    if "$ref" in s:
        yield target(s)
    for k in _SUB_ONE + ("items",):
        if isinstance(s.get(k), dict):
            yield s[k]
    for k in _SUB_MAP:
        if k not in ("$defs", "definitions") and isinstance(s.get(k), dict):
            yield from (x for x in s[k].values() if isinstance(x, dict))
    for k in _SUB_LIST + ("items",):
        if isinstance(s.get(k), list):
            yield from (x for x in s[k] if isinstance(x, dict))
