"""`format` as exact string-content terms (decoded characters, then JSON-encoded).

Each supported format (SPEC_FORMATS, plus the Pydantic ones with python=True) is a
regular language written from its RFC, with assertion semantics. Others (idn-*, unknown
names) raise KeyError: the caller refuses them (strict), drops them (lenient), or, for
names outside SPEC_FORMATS with custom_formats='ignore', reads them as annotations.
The list, and what each one admits: docs/json-schema.md, "Formats".
"""
from __future__ import annotations

import re

from ..core.terms import LAZY, Term

# The formats the JSON Schema specification defines (drafts 4 to 2020-12): any other
# name is a custom format (schema.py's custom_formats option)
SPEC_FORMATS = frozenset((
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
    "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
    "json-pointer", "relative-json-pointer", "regex"))
# OpenAPI's formats (3.0 and 3.1): int32 and int64 are integer ranges (asserted on numbers:
# INTEGER_FORMATS, which schema.py rewrites as bounds), byte is base64 (RFC 4648, padded),
# float, double, binary and password assert nothing a JSON value can break
INTEGER_FORMATS = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1)}
OPENAPI_FORMATS = frozenset(("int32", "int64", "float", "double", "byte", "binary", "password"))
OPENAPI_ANY = frozenset(("float", "double", "binary", "password"))  # (annotations: no term)
# other names for the formats above (draft-03's, and a common spelling)
FORMAT_ALIASES = {"ip-address": "ipv4", "host-name": "hostname", "datetime": "date-time"}

_YEAR = r"[0-9]{4}"
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
DATE = (rf"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
        rf"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP}-02-29)")
_FRAC = r"(?:\.[0-9]+)?"
_OFFSET = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_HHMMSS = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
_TIME_NO_LEAP = rf"{_HHMMSS}{_FRAC}{_OFFSET}"
DURATION = (r"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
            r"(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
            r"|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4 = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{IPV4})"
IPV6 = "(?:" + "|".join([
    rf"(?:{_H16}:){{6}}{_LS32}",
    rf"::(?:{_H16}:){{5}}{_LS32}",
    rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
]) + ")"
_HEX = "[0-9A-Fa-f]"
UUID = rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
_A, _D = "[A-Za-z0-9]", "[A-Za-z0-9-]"
# LDH characters, letters/digits at both ends, not "--" in positions 3-4 (1-63 of them:
# a length bound beside it, see format_term)
_LABEL = rf"{_A}(?:{_A}|{_D}(?:{_A}|-{_A})(?:{_D}*{_A})?)?"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
# email-validator's special-use and reserved domains (its SPECIAL_USE_DOMAIN_NAMES)
_SPECIAL_USE = ("arpa", "invalid", "local", "localhost", "onion", "test")
_QUOTED = r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"'
_UNRES = r"[A-Za-z0-9._~-]"
_PCT = r"%[0-9A-Fa-f]{2}"
_SUB = r"[!$&'()*+,;=]"
_IPVF = rf"[vV][0-9A-Fa-f]+\.(?:{_UNRES}|{_SUB}|:)+"  # (ASCII in IRIs too: RFC 3987 keeps IP-literal)
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*"
# RFC 3987: an IRI's iunreserved adds ucschar to unreserved, its query also iprivate
# (classes of code points: surrogates are never members, fsm/regex/charset.py)
_UCSCHAR = (r"[\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"  # (then planes 1-13 to xFFFD, 14 from E1000)
            + "".join(rf"\U000{p:x}0000-\U000{p:x}fffd" for p in range(1, 14)) + r"\U000e1000-\U000efffd]")
_IPRIVATE = r"[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd]"


class _Uri:
    """RFC 3986's collected ABNF over the unreserved characters `unres` and, in the
    query, also `private` (RFC 3987's IRI rules are the same ones over iunreserved and
    iprivate); `absolute` is URI (IRI), `relative` relative-ref (irelative-ref)."""

    def __init__(self, unres: str, private: str | None = None):
        pchar = rf"(?:{unres}|{_PCT}|{_SUB}|[:@])"
        seg = rf"{pchar}*"
        self.rootless = rf"{pchar}+(?:/{seg})*"
        self.userinfo = rf"(?:(?:{unres}|{_PCT}|{_SUB}|:)*@)?"
        host = rf"(?:\[(?:{IPV6}|{_IPVF})\]|{IPV4}|(?:{unres}|{_PCT}|{_SUB})*)"
        auth = rf"{self.userinfo}{host}(?::[0-9]*)?"
        self.path_abempty = rf"(?:/{seg})*"
        self.path_abs = rf"/(?:{self.rootless})?"
        query = pchar if private is None else f"(?:{pchar}|{private})"
        self.qf = rf"(?:\?(?:{query}|[/?])*)?(?:#(?:{pchar}|[/?])*)?"
        noscheme = rf"(?:{unres}|{_PCT}|{_SUB}|@)+(?:/{seg})*"  # (no ":" in the first segment)
        self.absolute = rf"{_SCHEME}:(?://{auth}{self.path_abempty}|{self.path_abs}|{self.rootless}|){self.qf}"
        self.relative = rf"(?://{auth}{self.path_abempty}|{self.path_abs}|{noscheme}|){self.qf}"


_URI = _Uri(_UNRES)
_IRI = _Uri(f"(?:{_UNRES}|{_UCSCHAR})", _IPRIVATE)
URI, RELATIVE_REF = _URI.absolute, _URI.relative
# RFC 6570 (level 4): literals and expressions "{" [operator] varspec *("," varspec) "}".
# A literal is any character but CTL, SP, DQUOTE, "'", "%" (outside pct-encoded), "<",
# ">", "\", "^", "`", "{", "|", "}" and non-ASCII ones outside ucschar and iprivate; but
# "'" (\x27) is taken, as the JSON Schema suite does ("a'b" is valid there): it is a
# sub-delim, which the RFC's reserved expansion writes as it is
_VARCHAR = rf"(?:[A-Za-z0-9_]|{_PCT})"
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_TEMPLATE_LITERAL = (r"(?:[\x21\x23\x24\x26\x27\x28-\x3b\x3d\x3f-\x5b\x5d\x5f\x61-\x7a\x7e]"
                     rf"|{_UCSCHAR}|{_IPRIVATE}|{_PCT})")
URI_TEMPLATE = rf"(?:{_TEMPLATE_LITERAL}|\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\}})*"
JSON_POINTER = r"(?:/(?:[^~/]|~[01])*)*"
REL_JSON_POINTER = rf"(?:0|[1-9][0-9]*)(?:#|{JSON_POINTER})"


# formats Pydantic writes for bytes, SecretStr and Path: it reads any JSON string back
# into them, so a Pydantic source's string takes no format term for them
PYDANTIC_ANY_STRING = frozenset(("binary", "password", "path"))
_V4_PREFIX, _V6_PREFIX = r"(?:/(?:3[0-2]|[12]?[0-9]))?", r"(?:/(?:12[0-8]|1[01][0-9]|[1-9]?[0-9]))?"
# formats Pydantic writes for IPvAnyAddress and the ipaddress interfaces, as what Python
# reads back (networks: _network)
_PYDANTIC_IP = {"ipvanyaddress": (IPV4, IPV6), "ipv4interface": (IPV4 + _V4_PREFIX,),
                "ipv6interface": (IPV6 + _V6_PREFIX,),
                "ipvanyinterface": (IPV4 + _V4_PREFIX, IPV6 + _V6_PREFIX)}
# formats Pydantic writes for the ipaddress networks: which address families each takes
_PYDANTIC_NETWORKS = {"ipv4network": (False,), "ipv6network": (True,), "ipvanynetwork": (False, True)}


def _base64(alphabet: str) -> str:
    """Padded base64 (RFC 4648) of ASCII text, over `alphabet` (64 characters in value
    order). Pydantic writes this format for Base64Bytes and Base64Str alike, and the
    Str ones must decode to UTF-8: ASCII text is valid for both (a subset of what
    Bytes reads). A decoded byte's top bit is bit 5 of a group's first character, bit 3
    of its second, bit 1 of its third; the bits a padded end drops are free."""
    def chars(zero_bit: int | None) -> str:
        cs = [c for v, c in enumerate(alphabet) if zero_bit is None or not v >> zero_bit & 1]
        return "[" + "".join("\\" + c if c in "-\\]^" else c for c in cs) + "]"
    c1, c2, c3, any_c = chars(5), chars(3), chars(1), chars(None)
    return f"(?:{c1}{c2}{c3}{any_c})*(?:{c1}{any_c}==|{c1}{c2}{any_c}=)?"


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_BASE64 = {"base64": _base64(_B64 + "+/"), "base64url": _base64(_B64 + "-_")}
# OpenAPI's byte: any padded base64 text (the bits a padded end drops are free, as
# Python's base64.b64decode(validate=True) reads them)
BYTE = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
# Pydantic's UUID1/3/4/5/6/7/8: the version digit, and the RFC 4122 variant (Python's
# uuid.UUID.version is None for the others, which Pydantic then refuses)
_PYDANTIC_UUIDS = {f"uuid{v}": "-".join([_HEX + "{8}", _HEX + "{4}", f"{v}{_HEX}{{3}}", f"[89ABab]{_HEX}{{3}}",
                                         _HEX + "{12}"]) for v in (1, 3, 4, 5, 6, 7, 8)}


def _leap_second_time(st) -> Term:
    """hh:mm:60[.frac]offset where hh:mm minus the offset is 23:59 UTC: one offset of
    each sign per minute, +oh:om = hh:mm + 00:01 and -oh:om = 23:59 - hh:mm (and Z at
    23:59). A trie on the digits, a lazy piece per digit read (a step loads the few
    entries of the branch the output took: the whole relation is 1440 leaves). It was
    two tries intersected, whose every state inside a date-time needed an emptiness
    search in a first-pass step."""
    tb = st.tb
    lit = lambda x: tb.literal(x.encode())  # noqa: E731
    frac = st.fullmatch(_FRAC)

    def trie(name: str, leaf, values: range) -> Term:
        """The texts f"{v:02d}" then leaf(v), lazy per digit."""
        def second(a):
            return tb.alt(tb.concat(lit(f"{v:02d}"[1]), _piece(st, f"{name}-{v:02d}", lambda v=v: leaf(v)))
                          for v in values if f"{v:02d}"[0] == a)
        return tb.alt(tb.concat(lit(a), _piece(st, f"{name}-{a}", lambda a=a: second(a)))
                      for a in sorted({f"{v:02d}"[0] for v in values}))

    def offsets(hh: int, mm: int) -> Term:
        ahead, behind = (hh * 60 + mm + 1) % 1440, 1439 - (hh * 60 + mm)
        ends = [lit(f"+{ahead // 60:02d}:{ahead % 60:02d}"), lit(f"-{behind // 60:02d}:{behind % 60:02d}")]
        if (hh, mm) == (23, 59):
            ends.append(st.fullmatch("[Zz]"))
        return tb.seq([lit(":60"), frac, tb.alt(ends)])

    return trie("leap", lambda hh: tb.concat(lit(":"), trie(f"leap-{hh:02d}:", lambda mm: offsets(hh, mm),
                                                              range(60))), range(24))


def is_known(name: str, python: bool) -> bool:
    """Whether `name` is a format this module defines: the specification's, OpenAPI's
    (or an alias of one), or with python=True Pydantic's (not all are supported: idn-*)."""
    name = FORMAT_ALIASES.get(name, name)
    return name in SPEC_FORMATS or name in OPENAPI_FORMATS or python and (
        name in PYDANTIC_ANY_STRING or name in _PYDANTIC_IP or name in _PYDANTIC_NETWORKS or name in _PYDANTIC_UUIDS
        or name in _BASE64 or name in ("naive-date-time", "any-date-time", "name-email") or name.startswith("url:"))


def format_term(st, name: str, python: bool = False) -> Term:
    """The content term (inside the quotes) of format `name`; KeyError if unsupported.

    python=True (schemas made from Pydantic models): what Pydantic writes and reads
    back: no year 0000 and no leap second (Python's datetime rejects both), `time`
    without an offset allowed (Pydantic writes naive times so), `duration` with a sign and
    fractional seconds (Pydantic's timedelta form)."""
    name = FORMAT_ALIASES.get(name, name)
    cache = st.__dict__.setdefault("_formats", {})
    t = cache.get((name, python))
    if t is not None:
        return t
    if python and name in _PYDANTIC_NETWORKS:  # deferred pieces: built per compilation, not exported
        t = cache[(name, python)] = st.tb.alt(_network(st, v6) for v6 in _PYDANTIC_NETWORKS[name])
        return t
    prog = _PROGRAMS.get((name, python))
    if prog is not None:  # built by an earlier compilation: loaded when the output reaches it
        t = cache[(name, python)] = st.tb.lazy(f"format:{name}:{int(python)}", prog)
        _known_nonempty(st.tb, t)
        return t
    t = cache[(name, python)] = _build(st, name, python)
    _PROGRAMS[(name, python)] = st.tb.export(t)
    return t


def _build(st, name: str, python: bool) -> Term:
    """Format `name`'s term, built in st's builder (a format inside another one, an
    email's hostname, is built in place, not loaded: masks read its structure)."""
    cache = st.__dict__.setdefault("_built_formats", {})
    t = cache.get((name, python))
    if t is not None:
        return t
    tb = st.tb
    if name == "date":
        t = st.fullmatch(DATE)
        if python:
            t = tb.intersect([t, tb.complement(st.fullmatch("0000-.*"))])
    elif name == "time":
        if python:  # Pydantic writes (and reads) times without an offset too
            t = st.fullmatch(rf"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRAC}{_OFFSET}?")
        else:
            t = tb.alt([st.fullmatch(_TIME_NO_LEAP), _leap_second_time(st)])
    elif name == "date-time":
        time_t = (st.fullmatch(_TIME_NO_LEAP) if python  # (offset required)
                  else _piece(st, "time", lambda: _build(st, "time", False)))
        t = tb.seq([_build(st, "date", python), st.fullmatch("[Tt]"), time_t])
    elif name == "duration":
        # Pydantic writes timedeltas with fractional seconds and a sign ("-PT0.5S")
        # (components of at most 6 digits: larger ones overflow Python's timedelta)
        t = st.fullmatch("-?" + DURATION.replace("[0-9]+S", r"[0-9]+(?:\.[0-9]{1,6})?S")
                         .replace("[0-9]+", "[0-9]{1,6}")) if python else st.fullmatch(DURATION)
    elif name == "hostname":
        # The lengths are length bounds (automaton.length_bound) beside unbounded shapes,
        # not counted repeats inside them: a mask then takes the shape's states (a few),
        # not one per byte count (dozens of row derivations per label on a first pass), for
        # the tokens that cannot reach the bound. The shape is ASCII: bytes are counted
        # (a one-segment row) rather than UTF-8 characters.
        label = tb.intersect([st.fullmatch(_LABEL), tb.repeat(tb.any_byte, 1, 63)])
        shape = tb.concat(label, tb.star(tb.concat(st.fullmatch(r"\."), label)))
        t = tb.intersect([shape, tb.repeat(tb.any_byte, 1, 253)])
    elif name == "email" and python:
        # Pydantic's EmailStr (email-validator, check_deliverability=False): a dot-atom
        # local part (no quotes), a domain (no address literal) with a period whose
        # last label ends with a letter and that is no special-use name, 254 in all
        domain = tb.intersect([_build(st, "hostname", python), st.fullmatch(r".*\.[^.]*[A-Za-z]"),
                               tb.complement(st.fullmatch(rf"(?i:(?:.*\.)?(?:{'|'.join(_SPECIAL_USE)}))"))])
        t = tb.intersect([tb.seq([st.fullmatch(rf"{_ATEXT}+(?:\.{_ATEXT}+)*"), st.fullmatch("@"), domain]),
                          tb.repeat(tb.any_byte, 1, 254)])
    elif name == "name-email" and python:
        # Pydantic's NameEmail: the email, or a display name (words of its name
        # characters, ASCII here, one space apart), a space, and the email in <>
        # (pydantic.networks' pretty_email_regex, which takes more spacing and quotes)
        email = _build(st, "email", python)
        word = rf"(?:{_ATEXT}|\.)+"  # (pydantic's name_chars, \w taken as ASCII)
        pretty = tb.seq([st.fullmatch(rf"(?:{word}(?: {word})* )?<"), email, st.fullmatch(">")])
        t = tb.alt([email, pretty])
    elif name == "email":
        local = st.fullmatch(rf"(?:{_ATEXT}+(?:\.{_ATEXT}+)*|{_QUOTED})")
        # the address literal (82 of the email's 135 program entries) loads only where the
        # output goes past its `[`: not on the step entering the email, nor on the one
        # after `@`, whose row reads the `[` alone
        literal = tb.concat(st.fullmatch(r"\["), _piece(st, "email-address-literal", lambda: st.fullmatch(
            rf"(?:{IPV4}|IPv6:{IPV6})\]")))
        domain = tb.alt([_build(st, "hostname", python), literal])
        t = tb.seq([local, st.fullmatch("@"), domain])
    elif name == "ipv4":
        t = st.fullmatch(IPV4)
    elif name == "ipv6":
        t = st.fullmatch(IPV6)
    elif python and name in _PYDANTIC_IP:  # Pydantic's ipaddress types (a prefix length, no mask)
        t = tb.alt(st.fullmatch(x) for x in _PYDANTIC_IP[name])
    elif python and name in _PYDANTIC_UUIDS:
        t = st.fullmatch(_PYDANTIC_UUIDS[name])
    elif python and name in _BASE64:
        t = st.fullmatch(_BASE64[name])
    elif python and name == "naive-date-time":
        t = tb.seq([_build(st, "date", python), st.fullmatch(f"[Tt]{_HHMMSS}{_FRAC}")])
    elif python and name == "any-date-time":  # (Pydantic's datetime: naive or with an offset)
        t = tb.seq([_build(st, "date", python), st.fullmatch(f"[Tt]{_HHMMSS}{_FRAC}{_OFFSET}?")])
    elif python and name.startswith("url:"):
        _, schemes, host = name.split(":")
        t = _pydantic_url(st, tuple(schemes.split(",")) if schemes else None, host == "1")
    elif name == "uuid":
        t = st.fullmatch(UUID)
    elif name == "byte":
        t = st.fullmatch(BYTE)
    elif name in ("uri", "iri"):
        t = st.fullmatch((_IRI if name == "iri" else _URI).absolute)
    elif name in ("uri-reference", "iri-reference"):
        u = _IRI if name == "iri-reference" else _URI
        t = tb.alt([st.fullmatch(u.absolute), st.fullmatch(u.relative)])
    elif name == "uri-template":
        t = st.fullmatch(URI_TEMPLATE)
    elif name == "regex":
        t = st.fullmatch(REGEX)
    elif name == "json-pointer":
        t = st.fullmatch(JSON_POINTER)
    elif name == "relative-json-pointer":
        t = st.fullmatch(REL_JSON_POINTER)
    else:
        raise KeyError(name)
    cache[(name, python)] = t
    _known_nonempty(tb, t)
    return t


def _regex_syntax(depth: int) -> str:
    """The regex `regex` is: a subset of the ECMA-262 patterns (unicode mode: the test
    suite's `\\a` is refused) that Python's re module reads too, so that validators
    of either kind take every text: groups nested at most `depth` deep (capturing,
    non-capturing, lookaheads; no lookbehind, which Python takes of fixed width only),
    classes (none empty: Python reads `[]` otherwise) of characters, escapes and
    ordered ranges of digits or letters of one case, quantifiers of one-digit counts
    (n <= m) after an atom only, the escapes both take (\\d\\w\\s and capitals, \\f\\n\\r\\t\\v,
    \\xHH, \\uHHHH, a syntax character or /); no backreferences or named groups (they
    must name a group: not regular). Nested deeper, or with other forms, a pattern
    may be valid and is refused: the language is narrower than the format."""
    syntax = r"\\^$.*+?()\[\]{}|"  # (ECMA's SyntaxCharacter; an identity escape takes / too)
    esc = rf"\\(?:[dDsSwWfnrtv]|x[0-9A-Fa-f]{{2}}|u[0-9A-Fa-f]{{4}}|[{syntax}/])"
    ranges = "|".join(f"{a}-[{a}-{z}]" for lo, hi in (("0", "9"), ("a", "z"), ("A", "Z"))
                      for a, z in ((chr(c), hi) for c in range(ord(lo), ord(hi) + 1)))
    # (no ^ [ & ~ | among a class's characters: Python reads `[^]` otherwise and warns of
    # set operations; escaped, ^ [ | are taken)
    cls = rf"\[\^?(?:{ranges}|[^\\\]\-\^\[&~|\x00-\x1f]|\\[b\-]|{esc})+\]"
    atom = rf"(?:[^{syntax}\x00-\x1f]|\.|{esc}|{cls})"
    counts = "|".join(f"{n},[{n}-9]" for n in range(10))
    quant = rf"(?:[*+?]|\{{[0-9],?\}}|\{{(?:{counts})\}})\??"
    assertion = r"(?:\^|\$|\\[bB])"
    alts = rf"(?:{atom}(?:{quant})?|{assertion}|\|)*"
    for _ in range(depth):
        alts = rf"(?:(?:{atom}|\((?:\?:)?{alts}\))(?:{quant})?|{assertion}|\(\?[=!]{alts}\)|\|)*"
    return alts


REGEX = _regex_syntax(3)


# The WHATWG URL standard's special schemes: their URLs have a host (but file's may be
# empty) that is a domain, an IPv4 or an [IPv6] address
_SPECIAL = ("ftp", "file", "http", "https", "ws", "wss")
_PORT = r"(?::(?:0|[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])?)?"
# LDH labels, the last one starting with a letter (one of digits, or 0x..., makes the
# parser read the host as an IPv4 address)
_DOMAIN = rf"(?:{_LABEL}\.)*[A-Za-z]{_LABEL[len(_A):]}"
_SPECIAL_HOST = rf"(?:{_DOMAIN}|{IPV4}|\[{IPV6}\])"


def _pydantic_url(st, schemes: tuple | None, host_required: bool) -> Term:
    """The URLs Pydantic's URL types take (pydantic-core parses them with the WHATWG URL
    standard's parser, then checks the scheme against `schemes` (None: any) and, with
    `host_required`, that there is a host): RFC 3986 URIs, narrowed to what that parser
    reads without an error. A special scheme (http, https, ws, wss, ftp, file) is
    written in lower case with `//` and a domain (LDH labels, no A-label, the last
    starting with a letter), an IPv4 or an [IPv6] host (file: no user or port, the host
    may be empty); any other scheme's authority has no IPvFuture host; a port is at
    most 65535."""
    tb = st.tb
    tail = f"{_URI.path_abempty}{_URI.qf}"
    parts = []
    for sch in (_SPECIAL if schemes is None else [x for x in schemes if x in _SPECIAL]):
        if sch == "file":
            parts.append(st.fullmatch(f"file://{_SPECIAL_HOST}?{tail}"))
        else:
            parts.append(st.fullmatch(f"{sch}://{_URI.userinfo}{_SPECIAL_HOST}{_PORT}{tail}"))
    others = None if schemes is None else [x for x in schemes if x not in _SPECIAL]
    if others is None or others:
        host = rf"(?:\[{IPV6}\]|(?:{_UNRES}|{_PCT}|{_SUB})" + ("+)" if host_required else "*)")
        auth = f"//{_URI.userinfo}{host}{_PORT}{_URI.path_abempty}"
        rest = auth if host_required else f"(?:{auth}|{_URI.path_abs}|{_URI.rootless}|)"
        if others is None:  # any scheme but the special ones (in any case: the parser lowers it)
            scheme = tb.intersect([st.fullmatch(_SCHEME), tb.complement(
                st.fullmatch("(?i:" + "|".join(_SPECIAL) + ")"))])
        else:
            scheme = st.fullmatch("|".join(re.escape(x) for x in others))
        parts.append(tb.concat(scheme, st.fullmatch(f":{rest}{_URI.qf}")))
    return tb.alt(parts)


def _network(st, v6: bool) -> Term:
    """An IPv4 or IPv6 network as Python's ipaddress reads it with strict=True (what
    Pydantic does): an address whose bits past the prefix length are all zero, then "/"
    and the length (0-32 or 0-128, without leading zeros), or a bare address (a /32 or
    /128). Python also reads "/08" and netmask forms, which are not produced.

    The address is read group by group (IPv4 octets, IPv6 16-bit groups, the ls32
    octets of an IPv6 address too) keeping L, the index of the bit after the last 1 bit
    read so far: the length must be at least L. A group's digits are read one way only
    (an IPv6 group's state is how many digits and zero bits after its last 1 bit; an
    octet's, its value so far), so derivatives stay one chain, not a union per class.
    An IPv6 "::" stands for one or more zero groups; the groups after it are counted
    from the end (a branch per count), so their bit positions are known as they are
    read. The pieces are deferred terms, built in the compilation's builder as the
    output reaches them (~20 nodes each; the whole IPv6 term would be ~6k)."""
    tb = st.tb
    from .numbers import NumberTerms
    nums, total = NumberTerms(tb), 128 if v6 else 32
    name = "ipv6network" if v6 else "ipv4network"
    lit = lambda x: tb.literal(x.encode())  # noqa: E731
    memo: dict = {}

    def piece(key: str, build, nullable: bool = False) -> Term:
        """A deferred part named `name-key` (a deferred term's nullability is given)."""
        t = memo.get(key)
        if t is None:
            t = memo[key] = tb.deferred(f"{name}-{key}", build, nullable)
        return t

    def end(low: int) -> Term:
        """After the address: nothing, or "/" and a length >= low."""
        return tb.optional(tb.concat(lit("/"), nums.uint_range(low, total)))

    def octets(j: int, low: int, base: int) -> Term:
        """Octet j.. of a dotted quad whose octet 0 is bit `base`, L = low so far."""
        if j == 4:
            return end(low)
        return piece(f"o{j}-{low}-{base}", lambda: tb.alt(
            [tb.concat(lit("0"), after_octet(j, low, base)), octet_value(j, base, 0)]))

    def after_octet(j: int, low: int, base: int) -> Term:
        return tb.concat(lit("."), octets(j + 1, low, base)) if j < 3 else end(low)

    def octet_value(j: int, base: int, v: int) -> Term:
        """The rest of octet j once its digits so far make v (0: none yet, no leading
        zero): more digits, or its end (a value's last 1 bit sets L)."""
        def build():
            parts = [tb.concat(lit(str(d)), octet_value(j, base, 10 * v + d))
                     for d in range(1 if v == 0 else 0, 10) if 10 * v + d <= 255]
            if v:
                parts.append(after_octet(j, base + 8 * j + 8 - ((v & -v).bit_length() - 1), base))
            return tb.alt(parts)
        return piece(f"v{j}-{base}-{v}", build, v > 0 and j == 3)  # (the last octet may end the address)

    if not v6:
        return octets(0, 0, 0)

    hex_tz = [st.fullmatch(c) for c in ("[13579BDFbdf]", "[26AEae]", "[4Cc]", "8")]  # by zero bits after the last 1

    def groups(i: int, low: int, head: bool) -> Term:
        """Groups i.. (i read), L = low; `head`: no "::" read yet."""
        if i == 8:
            return end(low)
        def build():
            parts = [tb.concat(st.fullmatch("0{1,4}"), after_group(i + 1, low, head)), nonzero(i, head, 0, -1)]
            if i == 6:
                parts.append(octets(0, low, 96))
            return tb.alt(parts)
        return piece(f"g{i}-{low}-{int(head)}", build)

    def nonzero(i: int, head: bool, c: int, k: int) -> Term:
        """The rest of a non-zero group i after c digits, k zero bits after its last 1
        bit (-1: only zeros so far)."""
        def build():
            parts = []
            if c < 4:
                if c < 3 or k >= 0:
                    parts.append(tb.concat(lit("0"), nonzero(i, head, c + 1, k + 4 if k >= 0 else -1)))
                parts += [tb.concat(hex_tz[z], nonzero(i, head, c + 1, z)) for z in range(4)]
            if k >= 0:
                parts.append(after_group(i + 1, 16 * i + 16 - k, head))
            return tb.alt(parts)
        return piece(f"n{i}-{int(head)}-{c}-{k}", build, k >= 0 and i == 7)

    def after_group(i: int, low: int, head: bool) -> Term:
        """What follows the i-th group read: the end, ":" and a group, or a "::"."""
        if i == 8:
            return end(low)
        parts = [tb.concat(lit(":"), groups(i, low, head))]
        if head:
            parts.append(compressed(i, low))
        return tb.alt(parts)

    def compressed(i: int, low: int) -> Term:
        """ "::" after i groups: then the end, or t more groups, t <= 7 - i."""
        return tb.concat(lit("::"), tb.alt([end(low)] + [groups(8 - t, low, False) for t in range(1, 8 - i)]))

    return tb.alt([groups(0, 0, True), compressed(0, 0)])


def _known_nonempty(tb, t: Term) -> None:
    """Every format has members (tests/ and the JSON suite accept some of each): spare
    the emptiness search of its intersections (a lazy term's by name: the nodes of a
    loaded row are new in each builder)."""
    if t.kind == LAZY:
        NONEMPTY_LAZY.add(t.args[0])
    elif t.boolean and hasattr(tb, "nonempty"):
        tb.nonempty.add(t.id)


def _piece(st, name: str, build) -> Term:
    """A part of a format as a lazy term of its own program (`build()` makes it, once
    per process): the program of the format around it, and the first row that the step
    entering the format loads, hold one node for it, and its own entries load when the
    output reaches it (a date-time's first step loaded its leap-second relation: 1k
    entries)."""
    prog = _PROGRAMS.get((name, False))
    if prog is None:
        prog = _PROGRAMS[(name, False)] = st.tb.export(build())
    t = st.tb.lazy(f"format:{name}:0", prog)
    _known_nonempty(st.tb, t)
    return t


# (format or _piece name, python) -> TermBuilder.export program: format terms depend on
# nothing else
_PROGRAMS: dict[tuple[str, bool], tuple] = {}
# the names of the lazy terms of formats and their pieces: each has members
NONEMPTY_LAZY: set[str] = set()
