"""Emptiness of schema terms (fsm/json_schema.py's notes, "Emptiness"): the term
builder that folds `X & ~X` to nothing (JsonTermBuilder) and the state source whose
emptiness check is structural, searching only AND/NOT parts, A* towards the shortest
completion (JsonTermSource)."""
from __future__ import annotations

import heapq

from .dfa import TermSource
from .errors import TooLargeError
from .json_formats import NONEMPTY_LAZY
from .terms import ALT, AND, CONCAT, LAZY, NOT, NOTHING, REPEAT, Term, TermBuilder

class JsonTermBuilder(TermBuilder):
    """TermBuilder with the Boolean simplifications schema terms need.

    The derivative of `X & ~Y` is `dX & ~dY`; where the schema's complement covers the
    same continuation (dX is dY, or dY is an alternative containing dX) the state is
    empty, and without this rule proving it takes an exhaustive search of dX's states
    (huge for nested values). Also ~nothing = anything and ~anything = nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.nonempty: set[int] = set()  # ids of AND/NOT terms known to have a member

    def intersect(self, items) -> Term:
        t = super().intersect(items)
        if t.kind != AND:
            return t
        pos = {c.id for c in t.args if c.kind != NOT}
        for c in t.args:
            if c.kind == NOT:
                y = c.args[0]
                if y.id in pos or (y.kind == ALT and any(a.id in pos for a in y.args)):
                    return self.nothing
                if y.kind == NOTHING:
                    return self.intersect(a for a in t.args if a is not c)
        return t

    def complement(self, x: Term) -> Term:
        if x.kind == NOTHING:
            return self.anything
        if x is self.anything:
            return self.nothing
        return super().complement(x)


# JsonTermSource: a guessed member (TermSource.guess) of at most GUESS_FIRST_MAX bytes
# is checked before the search, a longer one after GUESS_AFTER of its steps
GUESS_FIRST_MAX, GUESS_AFTER = 64, 4


class JsonTermSource(TermSource):
    """TermSource whose emptiness check is an A* search for an accepting state.

    Schema terms intersect and complement big languages (nested values); a plain
    depth-first search can wander into ever deeper nesting before it finds an
    accepting state. A* with an admissible estimate (a lower bound on the length of the
    shortest member: exact for terms without AND/NOT) heads for the shortest completion,
    which for a JSON prefix is short (close what is open)."""

    def is_empty(self, t: Term) -> bool:
        """Structural where possible (a concatenation is empty iff a part is, an
        alternation iff all are...); a search only for AND / NOT subterms."""
        if not t.boolean:
            return t.kind == NOTHING
        empty = self._empty
        cached = empty.get(t.id)
        if cached is not None:
            return cached
        k = t.kind
        if t.id in getattr(self.tb, "nonempty", ()) or (k == LAZY and t.args[0] in NONEMPTY_LAZY):
            empty[t.id] = False
            return False
        if k == CONCAT:
            # walk the spine only down to the first part already decided (states share
            # their tails, so a new state costs its new head, not the whole document)
            spine, x = [], t
            while x.kind == CONCAT and x.boolean and x.id not in empty:
                spine.append(x)
                x = x.args[1]
            res = self.is_empty(x)
            for y in reversed(spine):
                res = res or self.is_empty(y.args[0])
                empty[y.id] = res
            return res
        elif k == ALT:  # a plain branch settles it without searching the others
            res = all(c.boolean for c in t.args) and all(self.is_empty(c) for c in t.args)
        elif k == REPEAT:
            res = t.args[1] > 0 and self.is_empty(t.args[0])
        else:
            res = self.bound_is_empty(t)
            if res is None:
                res = self._search_empty(t)
        empty[t.id] = res
        return res

    def _search_empty(self, t: Term) -> bool:
        empty = self._empty
        heap = [(self.minlen(t), 0, t.id, t)]
        best = {t.id: 0}
        parent: dict[int, int] = {}
        found = None
        # a short guess first; a long one (the rest of a document, from inside a
        # string) after a few steps: a state next to one known to live is settled
        # there, where checking the guess would derive the whole document
        w, pops = self.guess(t), 0
        if w is not None and len(w) <= GUESS_FIRST_MAX and self.tb.matches(t, w):
            return False
        while heap:
            pops += 1
            if pops == GUESS_AFTER and w is not None and len(w) > GUESS_FIRST_MAX \
                    and self.tb.matches(t, w):
                return False
            _, g, _, x = heapq.heappop(heap)
            g = -g
            if best.get(x.id, g) < g:
                continue
            if x.nullable or not x.boolean or empty.get(x.id) is False:
                found = x
                break
            for _, _, y in self.tb.row(x):
                if y.kind == NOTHING or empty.get(y.id) is True:
                    continue
                g2 = g + 1
                if best.get(y.id, g2 + 1) <= g2:
                    continue
                best[y.id] = g2
                parent[y.id] = x.id
                heapq.heappush(heap, (g2 + self.minlen(y), -g2, y.id, y))
            if len(best) > self.max_states:
                raise TooLargeError(f"emptiness check exceeds max_states={self.max_states}")
        if found is None:
            for i in best:
                empty[i] = True
            return True
        i = found.id
        while True:  # every state on the path reaches acceptance
            empty[i] = False
            if i == t.id:
                break
            i = parent[i]
        return False
