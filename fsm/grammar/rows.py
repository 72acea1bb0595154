"""Rows of a lexer state: sorted, disjoint byte segments (start, end, targets), and the
parser's outcomes as tuples of stacks. Shared by the grammar's state source and its masks."""
from __future__ import annotations


def stacks(out) -> tuple:
    """feed's outcome (None, a stack, or a tuple of them) as a tuple."""
    return () if out is None else out if out.__class__ is tuple else (out,)


def subtract(row: tuple, cover: tuple) -> tuple:
    """The segments of `row` outside the bytes that `cover` covers."""
    out, j = [], 0
    for s, e, x in row:
        while s < e:
            while j < len(cover) and cover[j][1] <= s:
                j += 1
            if j == len(cover) or cover[j][0] >= e:
                out.append((s, e, x))
                break
            if cover[j][0] > s:
                out.append((s, cover[j][0], x))
            s = cover[j][1]
    return tuple(out)


def merge(parts: list) -> tuple:
    """Union of rows whose targets are frozensets: sorted disjoint segments. Merged two
    at a time, smallest first (a lexer state's row: a few small rows of lexemes going on
    beside one big start row: cheaper than splitting all at every bound)."""
    if not parts:
        return ()
    parts = sorted(parts, key=len)
    acc = parts[0]
    for p in parts[1:]:
        acc = _merge2(acc, p)
    return acc


_END = 1 << 30  # past every byte: a row that is done
_DONE = (_END, _END, None)


def _merge2(a: tuple, b: tuple) -> tuple:
    """The union of two rows, in one pass over both."""
    if not a or not b:
        return a or b
    out: list = []
    i = j = 0
    na, nb = len(a), len(b)
    s1, e1, x1 = a[0]
    s2, e2, x2 = b[0]
    while True:
        if s2 < s1:  # the row that starts first is a
            a, b, i, j, na, nb, s1, e1, x1, s2, e2, x2 = b, a, j, i, nb, na, s2, e2, x2, s1, e1, x1
        if s1 == _END:
            break
        if s1 < s2:  # a alone, up to where b starts
            if e1 <= s2:
                seg = (s1, e1, x1)
                i += 1
                s1, e1, x1 = a[i] if i < na else _DONE
            else:
                seg = (s1, s2, x1)
                s1 = s2
        else:  # both, up to the nearer end
            e = e1 if e1 < e2 else e2
            seg = (s1, e, x1 if x1 is x2 else x1 | x2)
            if e1 == e:
                i += 1
                s1, e1, x1 = a[i] if i < na else _DONE
            else:
                s1 = e
            if e2 == e:
                j += 1
                s2, e2, x2 = b[j] if j < nb else _DONE
            else:
                s2 = e
        if out and out[-1][1] == seg[0] and out[-1][2] == seg[2]:
            out[-1] = (out[-1][0], seg[1], seg[2])
        else:
            out.append(seg)
    return tuple(out)
