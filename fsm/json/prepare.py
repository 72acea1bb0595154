"""What the first masks of every JSON constraint share, built as a vocabulary loads.

The first JSON constraint of a process would otherwise build, inside its compile and its
first masks: the per-process programs of free values (an open object's other members),
numbers and a string's characters (built once, then exported: schema.py's _UNIVERSES and
_NUMBERS, strings.py's any_char), and the vocabulary's tables, the same for every schema
on it: the tokens of a string's characters and those with a quote or escape
(TokenAutomaton._run_words and _split_walk), the tokens that hold keys (KeyTokens). So
Vocabulary.prepare() calls `prepare_vocabulary` (registered in PREPARERS: core imports
no front end), which compiles a small schema with each kind of value and masks its states
along a document; it is counted in the vocabulary's load. So are the formats that tool
and API schemas use most (FORMATS): their programs, the first rows saved per process, and
the tables of their character classes (an email's local part and domain), masked along
one value each; and date-time's program. Other formats are built on first use.
"""
from __future__ import annotations

from ..core.terms import save_first_rows
from ..core.vocabulary import PREPARERS
from .schema import build_automaton

_SCHEMA = {"type": "object", "properties": {"s": {"type": "string"}, "i": {"type": "integer"},
                                            "n": {"type": "number"}, "b": {"type": "boolean"}}}
# the states masked: inside a string, then after its end; in an integer; in a number; in
# another key's value (the free values' program)
_DOCUMENT = (b'{"s":"', b'{"s":"x', b'{"s":"x"', b'{"s":"x","i":', b'{"s":"x","i":1', b'{"s":"x","n":',
             b'{"s":"x","n":1', b'{"s":"x","n":1.5', b'{"s":"x","b":', b'{"s":"x","other":', b'{"s":"x","other":"')


# a value of each, every byte of which is masked (not date-time's: its masks along a value
# cost eight times these four together; its program is built, see prepare_vocabulary)
FORMATS = {"date": "2024-01-02", "email": "ada.lovelace@example.org", "uri": "https://example.org/a/b?c=1#d",
           "uuid": "123e4567-e89b-12d3-a456-426614174000"}


def prepare_vocabulary(vocab) -> None:
    """Build the JSON programs of this process and the tables of `vocab` (see above)."""
    auto = build_automaton(_SCHEMA, vocab)
    auto.matcher()  # (its key tables)
    for prefix in (b"",) + _DOCUMENT:
        s = auto.dfa.walk(auto.start, prefix)
        if s:
            auto.mask(s)
    for name, value in FORMATS.items():  # (in an object, as schemas have them: a lazy term there)
        auto = build_automaton({"type": "object", "properties": {"v": {"type": "string", "format": name}}}, vocab)
        text = b'{"v":"' + value.encode() + b'"'
        for i in range(5, len(text)):
            s = auto.dfa.walk(auto.start, text[:i])
            if s:
                auto.mask(s)
    save_first_rows()  # (of the programs built above: the formats' own parts, the free values')
    # date-time's program alone, after save_first_rows: building it (the leap-second
    # relation's 1.6k pieces) was most of a fresh process's first compile with a date-time,
    # while the first rows of those pieces would cost five times as much at load
    build_automaton({"type": "string", "format": "date-time"}, vocab)


PREPARERS.append(prepare_vocabulary)
