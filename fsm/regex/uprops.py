"""Unicode property escapes `\\p{...}` / `\\P{...}`: the code points of a General_Category.

Only General_Category values are known (short or long name, ECMA-262's aliases, alone
or as `General_Category=X` / `gc=X`; case-sensitive), from Python's
`unicodedata.category`; script and binary properties are refused. Surrogates are in the
sets, but fsm/regex/charset.py drops them from every class. The table is one scan of all
code points, once per process, at the first property escape; nothing on import.
See docs/regex.md, "Unicode property escapes".
"""
from __future__ import annotations

import functools
import itertools
import unicodedata

_GROUPS = {  # one-letter categories and LC: their two-letter members
    "L": "Lu Ll Lt Lm Lo", "LC": "Lu Ll Lt", "M": "Mn Mc Me", "N": "Nd Nl No",
    "P": "Pc Pd Ps Pe Pi Pf Po", "S": "Sm Sc Sk So", "Z": "Zs Zl Zp", "C": "Cc Cf Cs Co Cn",
}
# Unicode's PropertyValueAliases.txt for gc, as ECMA-262 accepts them: short name, long
# name, other aliases.
_ALIASES = """
C Other; Cc Control cntrl; Cf Format; Cn Unassigned; Co Private_Use; Cs Surrogate;
L Letter; LC Cased_Letter; Ll Lowercase_Letter; Lm Modifier_Letter; Lo Other_Letter;
Lt Titlecase_Letter; Lu Uppercase_Letter; M Mark Combining_Mark; Mc Spacing_Mark;
Me Enclosing_Mark; Mn Nonspacing_Mark; N Number; Nd Decimal_Number digit; Nl Letter_Number;
No Other_Number; P Punctuation punct; Pc Connector_Punctuation; Pd Dash_Punctuation;
Pe Close_Punctuation; Pf Final_Punctuation; Pi Initial_Punctuation; Po Other_Punctuation;
Ps Open_Punctuation; S Symbol; Sc Currency_Symbol; Sk Modifier_Symbol; Sm Math_Symbol;
So Other_Symbol; Z Separator; Zl Line_Separator; Zp Paragraph_Separator; Zs Space_Separator
"""
GENERAL_CATEGORY = {alias: names[0] for names in (e.split() for e in _ALIASES.split(";"))
                    for alias in names}  # any alias -> its short name
# ECMA-262's binary properties (table "Binary Unicode property aliases"), to say what
# they are when refused.
_BINARY = set("""
ASCII ASCII_Hex_Digit AHex Alphabetic Alpha Any Assigned Bidi_Control Bidi_C Bidi_Mirrored
Bidi_M Case_Ignorable CI Cased Changes_When_Casefolded CWCF Changes_When_Casemapped CWCM
Changes_When_Lowercased CWL Changes_When_NFKC_Casefolded CWKCF Changes_When_Titlecased CWT
Changes_When_Uppercased CWU Dash Default_Ignorable_Code_Point DI Deprecated Dep Diacritic Dia
Emoji Emoji_Component EComp Emoji_Modifier EMod Emoji_Modifier_Base EBase Emoji_Presentation
EPres Extended_Pictographic ExtPict Extender Ext Grapheme_Base Gr_Base Grapheme_Extend Gr_Ext
Hex_Digit Hex IDS_Binary_Operator IDSB IDS_Trinary_Operator IDST ID_Continue IDC ID_Start IDS
Ideographic Ideo Join_Control Join_C Logical_Order_Exception LOE Lowercase Lower Math
Noncharacter_Code_Point NChar Pattern_Syntax Pat_Syn Pattern_White_Space Pat_WS Quotation_Mark
QMark Radical Regional_Indicator RI Sentence_Terminal STerm Soft_Dotted SD Terminal_Punctuation
Term Unified_Ideograph UIdeo Uppercase Upper Variation_Selector VS White_Space space
XID_Continue XIDC XID_Start XIDS
""".split())
_SCRIPT = ("Script", "sc", "Script_Extensions", "scx")


def property_ranges(spec: str) -> tuple:
    """The code point ranges (sorted inclusive (lo, hi) pairs) of `\\p{spec}`; ValueError
    naming the property when it is not a General_Category value."""
    name, eq, value = spec.partition("=")
    if eq and name not in ("General_Category", "gc"):
        if name in _SCRIPT:
            raise ValueError(f"Unicode script property \\p{{{spec}}} is not supported "
                             "(Python's unicodedata has no script data)")
        raise ValueError(f"unknown Unicode property \\p{{{spec}}}")
    short = GENERAL_CATEGORY.get(value if eq else name)
    if short is None:
        if not eq and name in _BINARY:
            raise ValueError(f"Unicode binary property \\p{{{spec}}} is not supported "
                             "(only General_Category values are)")
        raise ValueError(f"unknown Unicode property \\p{{{spec}}} (General_Category values "
                         "are supported: L, Letter, Lu, Nd, ...)")
    return _category_ranges(short)


@functools.cache
def _category_ranges(short: str) -> tuple:
    table = _table()
    members = _GROUPS.get(short, short).split()
    out: list[list[int]] = []
    for lo, hi in sorted(r for m in members for r in table[m]):
        if out and lo == out[-1][1] + 1:  # (categories are disjoint: neighbours at most)
            out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple(map(tuple, out))


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, list]:
    """Two-letter category -> its ranges, from one pass over every code point."""
    out: dict[str, list] = {}
    lo = 0
    for cat, run in itertools.groupby(map(unicodedata.category, map(chr, range(0x110000)))):
        n = sum(1 for _ in run)
        out.setdefault(cat, []).append((lo, lo + n - 1))
        lo += n
    return out
