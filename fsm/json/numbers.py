"""JSON numbers as byte-level terms: the number universe, exact decimal bounds, multipleOf.

The universe, which every number-accepting term agrees on so that intersection and
complement of schema terms stay exact:

    -?(0|[1-9][0-9]*)(\\.[0-9]+)?      without exponents, and without negative zero

Every term that accepts a value accepts all its texts (``1``, ``1.0``...). Bounds are
exact for any decimal bound (compared digit by digit); multipleOf is a residue automaton
over the digits. See docs/json-schema.md, "Numbers".
"""
from __future__ import annotations

import itertools
import math
from decimal import Decimal, InvalidOperation

from ..core.terms import Term, TermBuilder


class NumberTerms:
    def __init__(self, tb: TermBuilder, integral_fraction: bool = True):
        """`integral_fraction=False`: integers are written without a fraction part
        (`1`, never `1.0`: Pydantic's strict ints refuse it). Their universe then has
        one text per integer, which the integer terms below keep to; other numbers
        (an integral float: `1.0`) keep theirs."""
        self.tb = tb
        self.digit = tb.byte_range(0x30, 0x39)
        self.nz = tb.byte_range(0x31, 0x39)
        self.digits0 = tb.star(self.digit)
        self.digits1 = tb.repeat(self.digit, 1, None)
        self.dot = tb.literal(b".")
        self.minus = tb.literal(b"-")
        # canonical non-negative integer text: 0 | [1-9][0-9]*
        self.uint = tb.alt([tb.literal(b"0"), tb.concat(self.nz, self.digits0)])
        self.frac_opt = tb.optional(tb.concat(self.dot, self.digits1))
        # every text of an integral value (a const's, an enum's: values, whatever their type)
        self.zero_fracs = tb.optional(tb.concat(self.dot, tb.repeat(tb.literal(b"0"), 1, None)))
        self.zero_frac_opt = self.zero_fracs if integral_fraction else tb.empty  # an integer's
        self.mag = tb.concat(self.uint, self.frac_opt)  # any magnitude
        # a magnitude that is not zero
        self.mag_nonzero = tb.alt([
            tb.seq([self.nz, self.digits0, self.frac_opt]),
            tb.seq([tb.literal(b"0."), self.digits0, self.nz, self.digits0]),
        ])
        self.number = tb.alt([self.mag, tb.concat(self.minus, self.mag_nonzero)])
        self.uint_nonzero = tb.concat(self.nz, self.digits0)
        self.integer = tb.concat(
            tb.alt([tb.literal(b"0"), tb.concat(tb.optional(self.minus), self.uint_nonzero)]),
            self.zero_frac_opt)

    # -- integers ------------------------------------------------------------------
    def _same_len(self, lo: str, hi: str) -> Term:
        """Digit strings of len(lo) between lo and hi inclusive (same length)."""
        tb = self.tb
        if not lo:
            return tb.empty
        if set(lo) == {"0"} and set(hi) == {"9"}:
            return tb.repeat(self.digit, len(lo), len(lo))
        if lo[0] == hi[0]:
            return tb.concat(tb.literal(lo[0].encode()), self._same_len(lo[1:], hi[1:]))
        n = len(lo) - 1
        parts = [tb.concat(tb.literal(lo[0].encode()), self._same_len(lo[1:], "9" * n))]
        a, b = ord(lo[0]) + 1, ord(hi[0]) - 1
        if a <= b:
            parts.append(tb.concat(tb.byte_range(a, b), tb.repeat(self.digit, n, n)))
        parts.append(tb.concat(tb.literal(hi[0].encode()), self._same_len("0" * n, hi[1:])))
        return tb.alt(parts)

    def uint_range(self, lo: int, hi: int | None) -> Term:
        """Canonical texts of the integers n with lo <= n <= hi (hi None: unbounded), lo >= 0."""
        tb = self.tb
        lo = max(lo, 0)
        if hi is not None and hi < lo:
            return tb.nothing
        parts = []
        if lo == 0:
            parts.append(tb.literal(b"0"))
            lo = 1
            if hi is not None and hi < 1:
                return parts[0]
        ls = str(lo)
        top = len(ls) if hi is None else len(str(hi))
        for n in range(len(ls), top + 1):
            a = ls if n == len(ls) else "1" + "0" * (n - 1)
            b = "9" * n if hi is None or n < len(str(hi)) else str(hi)
            if int(a) <= int(b):
                parts.append(self._same_len(a, b))
        if hi is None:
            parts.append(tb.concat(self.nz, tb.repeat(self.digit, len(ls), None)))
        return tb.alt(parts)

    def int_range(self, lo: int | None, hi: int | None) -> Term:
        """Texts (with optional .0+) of the integers in [lo, hi] (None: unbounded)."""
        tb = self.tb
        parts = []
        if hi is None or hi >= 0:
            parts.append(self.uint_range(max(lo or 0, 0) if lo is not None else 0, hi))
        if lo is None or lo < 0:
            # negative: magnitudes in [max(1, -hi), -lo]
            mlo = 1 if hi is None or hi >= 0 else -hi
            mhi = None if lo is None else -lo
            m = self.uint_range(mlo, mhi)
            if m is not tb.nothing:
                parts.append(tb.concat(self.minus, m))
        return tb.concat(tb.alt(parts), self.zero_frac_opt)

    # -- decimals ------------------------------------------------------------------
    def interval(self, lo: tuple | None, hi: tuple | None) -> Term:
        """Numbers x within the bounds lo <= x <= hi, each (Decimal, exclusive) or None
        (unbounded), as one term without intersections: a derivative is then never an
        emptiness question (`lower AND upper` asked one at each new state of a bounded
        number). Empty where the bounds cross."""
        tb = self.tb
        parts = []
        zero = (Decimal(0), False)
        if hi is None or hi[0] > 0 or (hi[0] == 0 and not hi[1]):  # x >= 0
            parts.append(self._mag_between(zero if lo is None or lo[0] < 0 else lo, hi))
        if lo is None or lo[0] < 0:  # x < 0: its magnitude -x > 0
            low = (-hi[0], hi[1]) if hi is not None and hi[0] < 0 else (Decimal(0), True)
            parts.append(tb.concat(self.minus, self._mag_between(low, None if lo is None else (-lo[0], lo[1]))))
        return tb.alt(parts)

    def _mag_between(self, low: tuple, high: tuple | None) -> Term:
        """Magnitude texts (no sign) m with low <= m <= high (each (Decimal >= 0,
        exclusive); high None: unbounded): by integer part, then fraction digits."""
        tb = self.tb
        (a, a_ex), (b, b_ex) = low, high or (None, False)
        if b is not None and (a > b or (a == b and (a_ex or b_ex))):
            return tb.nothing
        lo_op, hi_op = "gt" if a_ex else "ge", "lt" if b_ex else "le"
        ai, af = int(a), _frac_digits(a - int(a))
        at = lambda i: tb.literal(str(i).encode())  # noqa: E731
        bi = None if b is None else int(b)
        if bi == ai:
            return tb.concat(at(ai), self._frac_between(af, lo_op, _frac_digits(b - bi), hi_op))
        parts = [tb.concat(at(ai), self._frac_between(af, lo_op, None, hi_op)),
                 tb.concat(self.uint_range(ai + 1, None if bi is None else bi - 1), self.frac_opt)]
        if bi is not None:
            parts.append(tb.concat(at(bi), self._frac_between("", "ge", _frac_digits(b - bi), hi_op)))
        return tb.alt(parts)

    def _frac_between(self, lf: str, lo_op: str, hf: str | None, hi_op: str) -> Term:
        """Fraction texts (empty, or '.' digits) whose value v has `0.lf lo_op v` and
        `v hi_op 0.hf` (hf None: no upper bound), 0.lf <= 0.hf."""
        tb = self.tb
        parts = [tb.concat(self.dot, self._digits_between(lf, lo_op, hf, hi_op, False))]
        if lf == "" and lo_op == "ge" and (hf is None or hf != "" or hi_op == "le"):
            parts.append(tb.empty)  # v = 0
        return tb.alt(parts)

    def _digits_between(self, lf: str, lo_op: str, hf: str | None, hi_op: str, empty: bool) -> Term:
        """Digit strings D (the empty one if `empty`) with 0.lf lo_op 0.D hi_op 0.hf,
        by D's first digit against lf's and hf's (values compare as digit strings padded
        with zeros; lf and hf have no trailing zeros)."""
        tb = self.tb
        if lf == "" and hf is None:  # no bound left but v > 0 (gt) or none (ge)
            if lo_op == "ge":
                return self.digits0 if empty else self.digits1
            return tb.seq([self.digits0, self.nz, self.digits0])
        if hf == "":  # 0 <= v <= 0 (lf is "", as 0.lf <= 0.hf)
            if lo_op != "ge" or hi_op != "le":
                return tb.nothing
            return tb.repeat(tb.literal(b"0"), 0 if empty else 1, None)
        l0 = int(lf[0]) if lf else 0
        h0 = 9 if hf is None else int(hf[0])
        open_top = hf is None
        parts = []
        if empty and lf == "" and lo_op == "ge":  # v = 0 < 0.hf (hf has a non-zero digit)
            parts.append(tb.empty)
        if l0 < h0:  # a first digit strictly between (an empty range is nothing)
            parts.append(tb.concat(tb.byte_range(0x30 + l0 + 1, 0x30 + h0 - (0 if open_top else 1)),
                                   self.digits0))
            parts.append(tb.concat(tb.byte_range(0x30 + l0, 0x30 + l0),
                                   self._digits_between(lf[1:], lo_op, None, hi_op, True)))
            if not open_top:
                parts.append(tb.concat(tb.byte_range(0x30 + h0, 0x30 + h0),
                                       self._digits_between("", "ge", hf[1:], hi_op, True)))
        else:  # l0 == h0
            parts.append(tb.concat(tb.byte_range(0x30 + l0, 0x30 + l0),
                                   self._digits_between(lf[1:], lo_op, None if open_top else hf[1:], hi_op, True)))
        return tb.alt(parts)

    def multiple_of(self, m: int, k: int) -> Term:
        """Texts `-?I(.F)?` of the numbers x with x * 10^k a multiple of the integer m
        (multipleOf m * 10^-k): the digits of I and F's first k, read as one integer,
        modulo m; F's further digits zeros. A residue automaton: each state is a
        deferred term (made when the output reaches it, m * (k + 2) at most), so any
        divisor is exact at no compile cost, unbounded ranges included. Not all texts
        are the universe's (`1.`): the callers intersect with it."""
        return self.tb.concat(self.tb.optional(self.minus), self._residue(m, k, 0, -1))

    def _residue(self, m: int, k: int, r: int, j: int) -> Term:
        """The state after digits worth r modulo m, with j fraction digits read (-1: in
        the integer part). NOTHING where no digits can make the value a multiple
        (deferred terms must not be empty)."""
        scale = 10 ** (k - max(j, 0))  # what the digits read so far are worth, in units of 10^-k
        if j >= 0 and -r * scale % m >= scale:  # the k - j digits left cannot reach a multiple
            return self.tb.nothing
        w = _residue_member(m, k, r, j)  # ("" where the value is a multiple already)
        return self.tb.deferred(("json:residue", m, k, r, j), lambda: self._residue_term(m, k, r, j, w == b""),
                                w == b"", lambda b: self._residue_step(m, k, r, j, b), cyclic=True, member=w)

    def _residue_step(self, m: int, k: int, r: int, j: int, b: int) -> Term:
        if j == k:  # past the divisor's digits: zeros only
            return self._residue(m, k, r, j) if b == 0x30 else self.tb.nothing
        if 0x30 <= b <= 0x39:
            return self._residue(m, k, (10 * r + b - 0x30) % m, j + 1 if j >= 0 else -1)
        return self._residue(m, k, r, 0) if b == 0x2E and j < 0 else self.tb.nothing

    def _residue_term(self, m: int, k: int, r: int, j: int, ends: bool) -> Term:
        tb = self.tb
        parts = [tb.concat(tb.byte_range(b, b), x) for b in b"0123456789."
                 if (x := self._residue_step(m, k, r, j, b)) is not tb.nothing]
        return tb.alt(parts + [tb.empty] * ends)


def _residue_member(m: int, k: int, r: int, j: int) -> bytes:
    """The shortest text that takes residue state (m, k, r, j) (NumberTerms._residue) to
    a multiple: by modular arithmetic, not a search (an emptiness check's guess and
    distance, for a divisor of any size)."""
    def digits(n: int, e: int) -> str | None:  # the least n digits D: (r 10^n + D) 10^e = 0 mod m
        a, b = 10 ** e % m, -r * 10 ** (n + e) % m
        g = math.gcd(a, m)
        if b % g:
            return None
        d = b // g * pow(a // g, -1, m // g) % (m // g) if m // g > 1 else 0
        return (str(d).zfill(n) if n else "") if d < 10 ** n else None

    if j >= 0:  # the k - j fraction digits left
        got = (digits(n, k - j - n) for n in range(k - j + 1))
    else:  # more integer digits (enough of them always make one), or a fraction part
        got = itertools.chain((digits(n, k) for n in range(len(str(m)) + 1)),
                              ("." + x if x is not None else None for x in (digits(n, k - n) for n in range(k + 1))))
    return min((x for x in got if x is not None), key=len).encode()


def _frac_digits(x: Decimal) -> str:
    """The fraction digits of 0 <= x < 1, without trailing zeros ('' for 0)."""
    if x == 0:
        return ""
    s = format(x, "f")
    s = s.split(".", 1)[1] if "." in s else ""
    return s.rstrip("0")


def to_decimal(v) -> Decimal:
    if isinstance(v, bool):
        raise TypeError("boolean is not a number")
    if isinstance(v, float):
        return Decimal(repr(v))
    try:
        return Decimal(v)
    except (InvalidOperation, TypeError):
        raise TypeError(f"not a number: {v!r}") from None


def integer_texts(nt: NumberTerms, i: int) -> tuple[bytes, Term]:
    """The universe texts of the integer i: its digits, then the term `nt.zero_fracs`
    (enums gather the digits of many integers into one trie before it). All of them,
    also where integers are written without a fraction (integral_fraction=False): a
    const or enum is a value, and its complement (`not`) must not take `1.0` for 1."""
    return str(i).encode(), nt.zero_fracs


def number_text_term(tb: TermBuilder, nt: NumberTerms, v) -> Term:
    """All universe texts of the number v (for const/enum)."""
    d = v if type(v) is int else to_decimal(v)  # (ints: no Decimal round trip)
    if type(d) is int or d == d.to_integral_value():
        text, tail = integer_texts(nt, int(d))
        return tb.concat(tb.literal(text), tail)
    s = format(d.normalize(), "f")
    return tb.concat(tb.literal(s.encode()), tb.star(tb.literal(b"0")))
