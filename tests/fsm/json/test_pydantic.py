"""Pydantic sources (fsm/json/pydantic_models.py): model dumps accepted, random walks parse
back with Pydantic itself (the oracle), Field constraints, decimals, URLs, emails, IP
types, networks, UUID versions, base64, sets, times; token-level walks of models."""
from __future__ import annotations

import datetime as dt
import decimal
import enum
import ipaddress
import json
import pathlib
import random
import uuid
from typing import Annotated, Literal

import pytest
from oracles import live_tokens_brute_force, random_walks, token_classes
from oracles import validator as _validator
from pydantic import (
    UUID1,
    UUID4,
    UUID7,
    AnyUrl,
    AwareDatetime,
    Base64Bytes,
    Base64Str,
    Base64UrlBytes,
    Base64UrlStr,
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    FileUrl,
    FutureDatetime,
    HttpUrl,
    IPvAnyAddress,
    IPvAnyInterface,
    IPvAnyNetwork,
    Json,
    NaiveDatetime,
    NameEmail,
    PastDate,
    RedisDsn,
    SecretStr,
    StrictInt,
    TypeAdapter,
    ValidationError,
    WebsocketUrl,
)

from structgen.fsm.json.schema import SchemaError, SchemaWarning, canonical_json, schema_to_term


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    street: str = Field(min_length=1, max_length=20)
    zip: str = Field(pattern=r"^[0-9]{5}$")


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = Field(ge=0, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Person(BaseModel):
    name: str = Field(min_length=1, max_length=12)
    age: int = Field(ge=0, lt=150)
    score: float = Field(gt=0, le=1)
    color: Color
    nickname: str | None = None
    id: int | str
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    addresses: list[Address] = Field(max_length=2)
    pair: tuple[int, str]
    flags: set[Literal["a", "b", "c"]]
    extra: dict[str, int]
    born: dt.date
    seen: dt.datetime
    uid: uuid.UUID


class Small(BaseModel):
    name: Annotated[str, Field(max_length=5)]
    age: int = Field(ge=0, le=99)
    color: Color
    tags: list[Annotated[str, Field(max_length=3)]] = Field(max_length=2)
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    born: dt.date | None = None


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


PEOPLE = [
    Person(name="Ada", age=36, score=0.5, color=Color.RED, id=7, pet=Cat(kind="cat", lives=3),
           addresses=[Address(street="Main", zip="12345")], pair=(1, "x"), flags={"a", "c"},
           extra={"k": 1}, born=dt.date(1815, 12, 10), seen=dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc),
           uid=uuid.UUID("123e4567-e89b-12d3-a456-426614174000")),
    Person(name="B", age=0, score=1.0, color=Color.GREEN, nickname="bee", id="x", pet=Dog(kind="dog", good=True),
           addresses=[], pair=(-3, ""), flags=set(), extra={}, born=dt.date(2000, 2, 29),
           seen=dt.datetime(2024, 5, 1, 12, 0, 30, 500000, tzinfo=dt.timezone(dt.timedelta(hours=-8))),
           uid=uuid.uuid4()),
]


def test_pydantic_model_instances_accepted_and_walks_validate():
    cs = schema_to_term(Person)
    dfa = cs.dfa()
    for p in PEOPLE:
        data = p.model_dump(mode="json")
        data["flags"] = sorted(data["flags"])
        text = cs.canonical(data)
        assert cs.accepts(text, dfa), text
        assert Person.model_validate_json(text) == p or Person.model_validate_json(text)
    texts, _ = random_walks(cs, n=60, max_len=1500, seed=1)
    assert len(texts) > 30
    for t in texts:
        Person.model_validate_json(t)  # raises if invalid
        assert _validator(Person.model_json_schema()).is_valid(json.loads(t))


def test_pydantic_constraints_rejected():
    cs = schema_to_term(Person)
    base = PEOPLE[0].model_dump(mode="json")
    base["flags"] = sorted(base["flags"])
    for field, bad in [("name", ""), ("age", 150), ("score", 0), ("color", "blue"), ("pet", {"kind": "cat", "good": True}),
                       ("addresses", [{"street": "a", "zip": "1234"}]), ("pair", [1]), ("flags", ["a", "a"]),
                       ("born", "2001-02-29"), ("uid", "nope"), ("extra", {"k": "v"})]:
        inst = dict(base, **{field: bad})
        assert not cs.accepts(cs.canonical(inst)), field


DECIMALS = [  # (max_digits, decimal_places, other Field constraints, texts to accept)
    (None, None, {}, ["123.456", "-0.001", '"-12.50"', '"7"']),
    (6, 2, {}, ["9999.99", "0", "1.5000", '"-12.50"', '"0.05"']),
    (2, 2, {}, ["0.5", "-0.99", '"0.05"', '"0.0"']),
    (5, 0, {}, ["12345", "-7", '"99999"']),
    (None, 3, {}, ["1.125", "100000", '"0.001"']),
    (3, None, {}, ['"1.25"', '"0.005"', '"999"', '"-0.5"']),
    (6, 2, {"ge": 0, "lt": 100}, ["99.99", "0", "12.5"]),
    (None, None, {"gt": -1.5, "le": 2, "multiple_of": 0.5}, ["-1", "2", "0.5", "1.50"]),
]


@pytest.mark.parametrize("digits,places,bounds,good", DECIMALS)
def test_pydantic_decimals_parse_back(digits, places, bounds, good):
    """Pydantic writes a Decimal's schema as any number or any string, without
    max_digits or decimal_places (fsm.json.pydantic_models.decimal_json_schema): every walk
    must parse back with Pydantic itself, the oracle, and every text below that it
    refuses must be refused; `good` (plain decimal texts it takes) accepted."""
    field = Annotated[decimal.Decimal, Field(max_digits=digits, decimal_places=places, **bounds)]
    texts = [t for v in ["0", "0.0", "-0", "1", "-7", "12", "0.5", "1.25", "1.10", "-99.99", "9999.99", "123.456",
                         "100000", "0.001", "0.005", "1.5000", "99999", "0.05", "2.5", "-1.5", "1e3", "abc", ""]
             for t in (v, f'"{v}"')]
    _against_pydantic(field, texts, good, seed=3)


def _against_pydantic(kind, texts, good, seed=0):
    """Pydantic (TypeAdapter(kind)) is the oracle: every random walk of kind's automaton
    parses back, each JSON text of `texts` that Pydantic refuses is refused, and each of
    `good` (which Pydantic takes) is accepted."""
    adapter = TypeAdapter(kind)
    cs = schema_to_term(kind)
    walks, dfa = random_walks(cs, n=100, seed=seed)
    assert len(walks) > 50
    for t in walks:
        adapter.validate_json(t)  # raises if invalid
    for text in texts:
        try:
            adapter.validate_json(text)
        except ValidationError:
            assert not cs.accepts(text, dfa), text
    for text in good:
        adapter.validate_json(text)  # (the list is right)
        assert cs.accepts(text, dfa), text


def _strings(values: list) -> list:
    return [json.dumps(v) for v in values]


URL_TEXTS = ["http://a", "https://example.com:8080/p/a?q=1#f", "http://a.1", "http://a.01", "http://h:65535",
             "http://h:65536", "http://h:99999", "http://xn--a", "http://[::1]/", "http://[v1.x]", "http://", "http:a",
             "http://1.2.3.4", "http://999.1.1.1", "http://a%25b", "http://u:p@a.b", "ws://a", "ftp://a:21", "file:///x",
             "file://h/x", "file://h:1/x", "a:", "a:b", "x://h:99999", "x://h:65535", "x://[v1.x]", "urn:isbn:0-4", "A:",
             "HTTP://A", "redis://h:6379/0", "redis://", "unix:/tmp/s"]
EMAIL_TEXTS = ["a@b.co", "a@localhost", "a@x.test", "a@X.TEST", "a@b.123", "a@[1.2.3.4]", '"x y"@e.org', "a@b", "a..b@c.co",
               "a@b-.co", "a@b.c1", "a@sub.local", "a@b.onion", "a@b.co.", "a@arpa", ".a@b.co", "a.@b.co", "a@1.2.3.4",
               "x" * 70 + "@" + ("b" * 60 + ".") * 3 + "c", "a@" + "b" * 64 + ".co", "a@ab--c.co", "a@xn--abc.co"]


class StrictRecord(BaseModel):
    model_config = ConfigDict(strict=True)
    n: int
    x: float
    when: dt.date


PYDANTIC_TYPES = [  # (type, JSON texts to check against Pydantic, JSON texts it must accept)
    (StrictInt, ["1", "1.0", "-0", "0.00", "12"], ["1", "-12", "0"]),
    (StrictRecord, ['{"n":1,"x":1,"when":"2024-01-01"}', '{"n":1.0,"x":1.0,"when":"2024-01-01"}'],
     ['{"n":1,"x":1.5,"when":"2024-01-01"}', '{"n":1,"x":1.0,"when":"2024-01-01"}']),
    (Annotated[int, Field(strict=True, ge=0, le=10)], ["10", "10.0", "0.0", "11"], ["0", "10"]),
    (HttpUrl, _strings(URL_TEXTS), _strings(["http://a", "https://example.com:8080/p/a?q=1#f", "http://[::1]/",
                                               "http://1.2.3.4"])),
    (AnyUrl, _strings(URL_TEXTS), _strings(["a:", "urn:isbn:0-4", "x://h:65535", "http://u:p@a.b", "file:///x"])),
    (FileUrl, _strings(URL_TEXTS), _strings(["file:///x", "file://h/x"])),
    (WebsocketUrl, _strings(URL_TEXTS), _strings(["ws://a"])),
    (RedisDsn, _strings(URL_TEXTS), _strings(["redis://h:6379/0"])),
    (NaiveDatetime, _strings(["2024-01-01T12:00:00", "2024-01-01T12:00:00Z", "2024-02-30T00:00:00", "0000-01-01T00:00:00",
                              "2024-01-01T12:00:00+01:00", "2024-01-01T24:00:00"]),
     _strings(["2024-01-01T12:00:00", "2024-02-29t23:59:59.5"])),
    (AwareDatetime, _strings(["2024-01-01T12:00:00", "2024-01-01T12:00:00Z"]), _strings(["2024-01-01T12:00:00Z"])),
    (dict[int, str], ['{"1":"a"}', '{"a":"b"}', '{"":"b"}', '{"1.5":"x"}', '{"-7":"x"}'], ['{"1":"a","-7":"b"}']),
    (dict[float, int], ['{"1.5":1}', '{"x":1}', '{"":1}'], ['{"1.5":1,"-2":3}']),
    (dict[bool, int], ['{"true":1}', '{"maybe":1}'], ['{"true":1,"false":0}']),
    (Annotated[bytes, Field(min_length=2, max_length=3)], _strings(["ab", "abcd", "é", "éé", "a", "\u0000\u0001"]),
     _strings(["ab", "abc"])),
    (EmailStr, _strings(EMAIL_TEXTS), _strings(["a@b.co", "a@b.1c", "a@b.arpa.co", "A.B+c@Ex-ample.COM", "a@b.c-d",
                                                "x" * 64 + "@" + ("b" * 60 + ".") * 3 + "ccccc"])),
    (NameEmail, _strings(EMAIL_TEXTS + ["J <a@b>", "J <a@x.test>", "a <b@c.co> <d@e.co>", "x,y <a@b.co>", "J <a@b.co"]),
     _strings(["a@b.co", "John <a@b.co>", "John Doe <a@b.co>", "<a@b.co>", "J.D <a@b.co>", "a+b!c <d@e.fg>"])),
]


@pytest.mark.parametrize("kind,texts,good", PYDANTIC_TYPES, ids=lambda x: getattr(x, "__name__", None) or str(x)[:12])
def test_pydantic_types_parse_back(kind, texts, good):
    """Types whose JSON Schema (as Pydantic writes it) is wider than what Pydantic's
    validators take: strict ints (no `1.0`), URLs (schemes, ports, hosts its WHATWG
    parser refuses), naive and aware datetimes, dict keys of numbers and booleans,
    bytes within a length in bytes. Pydantic is the oracle: every
    walk parses back, every listed text it refuses is refused, `good` accepted."""
    _against_pydantic(kind, texts, good, seed=5)


@pytest.mark.parametrize("kind,match", [
    (PastDate, "past constraint"), (FutureDatetime, "future constraint"),
    (Annotated[dt.date, Field(gt=dt.date(2020, 1, 1))], r"bounds \(gt\)"), (Json[int], "Json"),
    (dict[Annotated[int, Field(ge=0)], str], "dict keys of type int with constraints")])
def test_pydantic_types_refused_where_their_schema_says_less(kind, match):
    with pytest.raises(SchemaError, match=match):
        schema_to_term(kind)


def test_pydantic_decimal_limits_refused_where_inexact():
    with pytest.raises(SchemaError, match="max_digits"):
        schema_to_term(Annotated[decimal.Decimal, Field(max_digits=3, ge=0)])


def test_pydantic_email_masks_equal_token_walks(smol_vocab):
    """Pydantic's EmailStr (email-validator's reading: a period in the domain, its last
    label ending with a letter, no special-use name, 254 characters): masks at the
    points that decide it equal token-by-token walks."""
    from pydantic import EmailStr

    from structgen.fsm.json.schema import build_automaton
    auto = build_automaton(EmailStr, smol_vocab)
    eos = set(smol_vocab.eos_ids)
    for prefix in [b'"', b'"a', b'"a.', b'"a@', b'"a@b', b'"a@b.', b'"a@b.c', b'"a@b.c1', b'"a@x.tes', b'"a@x.test',
                   b'"a@x.local', b'"a@x.localh', b'"' + b"x" * 200 + b"@b.c", b'"' + b"x" * 240 + b"@b.", b'"a@b-']:
        s = auto.dfa.walk(auto.start, prefix)
        if s:
            assert set(auto.allowed_tokens(s).tolist()) - eos == live_tokens_brute_force(auto, s), prefix
    assert auto.dfa.walk(auto.start, b'"a@b.co"') and auto.dfa.accepting[auto.dfa.walk(auto.start, b'"a@b.co"')]


class Tagged(BaseModel):
    tags: set[str]
    ids: frozenset[int] = frozenset()
    marks: set[Literal["a", "b"]] = set()
    counts: set[Annotated[int, Field(le=100)]] = set()
    naturals: set[Annotated[int, Field(ge=0)]] = set()  # (above a bound of 0: kept distinct)
    blob: bytes = b""  # format binary
    secret: SecretStr = SecretStr("")  # format password
    where: pathlib.Path = pathlib.Path(".")  # format path


def test_pydantic_sets_of_free_items():
    """set[str], frozenset[int] and set[int] above a bound of 0: their items are kept
    distinct while decoding (fsm/json_unique.py); set[int] with an upper bound: Pydantic reads an array with repeats
    into the set, so for Pydantic sources that uniqueItems is not enforced
    (python_sets); a finite item set stays exact, a dict schema still refuses it
    (strict), and so does python_sets=False. Pydantic's formats for bytes, SecretStr and
    Path take any string (python_dates)."""
    cs = schema_to_term(Tagged)
    assert not cs.relaxed
    dfa = cs.dfa()
    text = cs.canonical({"tags": ["x", "y"], "ids": [3, 4], "marks": ["b"], "counts": [2, 2],
                         "blob": "é\u0000", "secret": "", "where": "a\\b"})
    assert cs.accepts(text, dfa)
    assert Tagged.model_validate_json(text) == Tagged(tags={"x", "y"}, ids={3, 4}, marks={"b"}, counts={2},
                                                      blob="é\u0000".encode(), secret=SecretStr(""),
                                                      where=pathlib.Path("a\\b"))
    assert not cs.accepts(cs.canonical({"tags": ["x", "y", "x"]}), dfa)
    assert not cs.accepts(cs.canonical({"tags": [], "marks": ["a", "a"]}), dfa)
    assert not cs.accepts(cs.canonical({"tags": [], "ids": [3, 3]}), dfa)
    assert not cs.accepts(cs.canonical({"tags": [], "naturals": [0, 0]}), dfa)
    assert cs.accepts(cs.canonical({"tags": [], "naturals": [0, 10, 1]}), dfa)
    texts, _ = random_walks(cs, n=40, seed=4)
    assert len(texts) > 20
    for t in texts:
        tagged, raw = Tagged.model_validate_json(t), json.loads(t)  # (raises if invalid)
        assert len(tagged.tags) == len(raw["tags"]) and len(tagged.ids) == len(raw.get("ids", ())), t
    with pytest.raises(SchemaError, match="'path' is not supported"):  # (binary: OpenAPI's, any string)
        schema_to_term(Tagged, python_dates=False, custom_formats="refuse")
    for schema, opts in [(Tagged, {"python_sets": False}), ({"type": "array", "items": {"type": "integer", "maximum": 100},
                                                              "uniqueItems": True}, {}),
                         ({"not": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
                          {"python_sets": True})]:  # (under `not`, dropping it would shrink the language)
        with pytest.raises(SchemaError, match="uniqueItems"):
            schema_to_term(schema, **opts)


class Addresses(BaseModel):
    any_ip: IPvAnyAddress
    host: ipaddress.IPv4Interface
    host6: ipaddress.IPv6Interface
    either: IPvAnyInterface


def test_pydantic_ip_types():
    """IPvAnyAddress and the ipaddress interfaces (formats ipvanyaddress, ipv4interface...,
    written by Pydantic only): what Python reads back, an address and a prefix length or
    none; random walks all parse, prefixes out of range are refused, and a dict schema
    still refuses the names (they are no JSON Schema formats)."""
    cs = schema_to_term(Addresses)
    dfa = cs.dfa()
    ok = {"any_ip": "::ffff:1.2.3.4", "host": "10.0.0.1/8", "host6": "fe80::1/64", "either": "192.168.1.1"}
    assert cs.accepts(cs.canonical(ok), dfa)
    Addresses.model_validate_json(cs.canonical(ok))
    for field, bad in [("host", "10.0.0.1/33"), ("host6", "::1/129"), ("any_ip", "1.2.3.4/8"), ("host", "::1")]:
        assert not cs.accepts(cs.canonical(dict(ok, **{field: bad})), dfa), (field, bad)
    _pydantic_only(cs, Addresses, 6, "ipv4interface")


def _pydantic_only(cs, model, seed: int, *formats: str) -> None:
    """Random walks of cs all parse as `model`, and a dict schema reads `formats` as
    annotations, warning (Pydantic writes them; JSON Schema has no such formats), or
    refuses them under custom_formats='refuse'."""
    texts, _ = random_walks(cs, n=40, seed=seed)
    assert len(texts) > 20
    for t in texts:
        model.model_validate_json(t)  # raises if invalid
    for name in formats:
        with pytest.raises(SchemaError, match=f"'{name}' is not supported"):
            schema_to_term({"type": "string", "format": name}, custom_formats="refuse")
        with pytest.warns(SchemaWarning, match=f"format '{name}' at # is not one"):
            schema_to_term({"type": "string", "format": name})


class Networks(BaseModel):
    v4: ipaddress.IPv4Network
    v6: ipaddress.IPv6Network
    either: IPvAnyNetwork
    u1: UUID1
    u4: UUID4
    u7: UUID7


def _network_texts(rng, v6: bool) -> list:
    """A random network's texts in the forms fsm/json_formats._network produces (str,
    exploded, the address bare where the length is full, "::" anywhere a zero run is),
    and the same with one host bit set (invalid), as (text, valid)."""
    bits = 128 if v6 else 32
    n = rng.choice([0, bits, rng.randint(0, bits), rng.randint(bits - 24, bits)])
    addr = rng.getrandbits(bits) >> (bits - n) << (bits - n) if n else 0
    if v6 and rng.random() < 0.5:  # long zero runs, so that "::" lands in the middle too
        addr &= ~(((1 << (16 * rng.randint(1, 5))) - 1) << (16 * rng.randint(0, 3)))
        addr &= ~((1 << (bits - n)) - 1)
    net = (ipaddress.IPv6Network if v6 else ipaddress.IPv4Network)((addr, n))
    forms = [str(net), f"{net.network_address.exploded}/{n}"]
    if v6:
        groups = net.network_address.exploded.split(":")
        a = rng.randint(0, 7)
        b = rng.randint(a, 7)
        if all(int(g, 16) == 0 for g in groups[a:b + 1]):
            forms.append(":".join(groups[:a]) + "::" + ":".join(groups[b + 1:]) + f"/{n}")
    if n == bits:
        forms.append(str(net.network_address))
    out = [(f, True) for f in forms]
    if n < bits:
        bad = (ipaddress.IPv6Address if v6 else ipaddress.IPv4Address)(addr | (1 << rng.randrange(bits - n)))
        out += [(f"{bad}/{n}", False), (f"{bad.exploded}/{n}", False)]
    return out


def test_pydantic_networks_and_uuid_versions():
    """ipaddress networks (formats ipv4network, ipv6network, ipvanynetwork) and UUID1-8
    (uuid1...uuid8), written by Pydantic only: the texts of random networks (an address
    with its host bits zero, "::" anywhere, an ls32 tail) and of random UUIDs (any
    version and variant digits) are accepted iff Pydantic reads them; random walks all
    parse; a dict schema still refuses the names."""
    cs = schema_to_term(Networks)
    dfa = cs.dfa()
    ok = {"v4": "10.0.0.0/8", "v6": "2001:db8::/32", "either": "::ffff:1.2.3.0/120",
          "u1": "c232ab00-9414-11ec-b3c8-9f6bdeced846", "u4": "123e4567-e89b-42d3-a456-426614174000",
          "u7": "01890a5d-ac96-774b-bcce-b302099a8057"}
    rng = random.Random(7)
    cases = [("v6", "::1.2.3.4/128", True), ("v6", "1:2:3:4:5:6:7::/112", True), ("v6", "::/1", True),
             ("v6", "1::/15", False), ("v4", "10.0.0.0/33", False), ("v4", "1.2.3.4/0", False)]
    for _ in range(150):
        v6 = rng.random() < 0.6
        field = rng.choice(["v6", "either"] if v6 else ["v4", "either"])
        cases += [(field, text, valid) for text, valid in _network_texts(rng, v6)]
        u = uuid.UUID(int=rng.getrandbits(128))
        text = str(u)
        text = text.upper() if rng.random() < 0.3 else text
        cases.append((rng.choice(["u1", "u4", "u7"]), text, None))
    n_valid = 0
    for field, text, valid in cases:
        doc = cs.canonical(dict(ok, **{field: text}))
        try:
            Networks.model_validate_json(doc)
            read = True
        except ValueError:
            read = False
        if valid is not None:
            assert read == valid, (field, text)  # the generator's claim, checked by Pydantic
        n_valid += read
        assert cs.accepts(doc, dfa) == read, (field, text, read)
    assert 200 < n_valid < len(cases) - 100
    _pydantic_only(cs, Networks, 8, "ipv4network", "ipvanynetwork", "uuid4")



class Encoded(BaseModel):
    b: Base64Bytes
    s: Base64Str
    ub: Base64UrlBytes
    us: Base64UrlStr


def test_pydantic_base64():
    """Base64Bytes/Str and their URL-safe forms (formats base64, base64url, written by
    Pydantic only): padded base64 of ASCII text, which both Bytes and Str read (Str
    needs UTF-8). The encodings of random ASCII texts are accepted iff Pydantic reads
    them; those of other bytes, and of the other alphabet, are not accepted; random
    walks all parse; a dict schema still refuses the names."""
    import base64
    cs = schema_to_term(Encoded)
    dfa = cs.dfa()
    empty = {"b": "", "s": "", "ub": "", "us": ""}
    rng = random.Random(5)
    seen = {True: 0, False: 0}
    for _ in range(300):
        field = rng.choice(list(empty))
        url = field.startswith("u")
        data = bytes(rng.randrange(128 if rng.random() < 0.6 else 256) for _ in range(rng.randint(0, 7)))
        text = cs.canonical(dict(empty, **{field: (base64.urlsafe_b64encode if url else base64.b64encode)(data).decode()}))
        try:
            Encoded.model_validate_json(text)
            read = True
        except ValueError:
            read = False
        if all(c < 128 for c in data):
            assert cs.accepts(text, dfa) == read, (field, data)
            seen[read] += 1
        else:
            assert not cs.accepts(text, dfa), (field, data)
    assert seen[True] > 100
    for field, enc in [("b", "aGk="), ("b", "aGk"), ("b", "aG=="), ("ub", "-_8="), ("b", "-_8="), ("s", "/w==")]:
        text = cs.canonical(dict(empty, **{field: enc}))
        assert cs.accepts(text, dfa) == (enc in ("aGk=", "aG==")), (field, enc)
    _pydantic_only(cs, Encoded, 2, "base64", "base64url")


def test_pydantic_recursive_model():
    with pytest.raises(Exception, match="recursive"):
        schema_to_term(Tree, recursion="refuse")
    cs = schema_to_term(Tree)  # exact: lazy terms
    assert cs.recursion == "lazy"
    t = Tree(value=1, children=[Tree(value=2, children=[Tree(value=3, children=[Tree(value=4)])])])
    assert cs.accepts(cs.canonical(t.model_dump(mode="json")))
    texts, _ = random_walks(cs, n=40, seed=3)
    for x in texts:
        Tree.model_validate_json(x)
    cs = schema_to_term(Tree, max_recursion_depth=3)
    t = Tree(value=1, children=[Tree(value=2, children=[Tree(value=3)])])
    assert cs.accepts(cs.canonical(t.model_dump(mode="json")))
    texts, _ = random_walks(cs, n=40, seed=2)
    for x in texts:
        Tree.model_validate_json(x)


class Times(BaseModel):
    t: dt.time
    td: dt.timedelta
    when: dt.datetime
    fs: frozenset[Color] = frozenset()
    d: dict[str, Address] = {}


def test_pydantic_time_and_timedelta_round_trip():
    """Pydantic writes naive times and signed/fractional durations: python_dates mode
    accepts what it writes, and everything walked back parses into the model."""
    cs = schema_to_term(Times)
    for m in [Times(t=dt.time(12, 0), td=dt.timedelta(milliseconds=500), when=dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)),
              Times(t=dt.time(1, 2, 3, 400, tzinfo=dt.timezone.utc), td=dt.timedelta(days=-1, seconds=5),
                    when=dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=dt.timezone(dt.timedelta(hours=5))),
                    fs=frozenset({Color.RED}), d={"home": Address(street="x", zip="00000")})]:
        data = m.model_dump(mode="json")
        data["fs"] = sorted(data["fs"])
        assert cs.accepts(cs.canonical(data)), data
    texts, _ = random_walks(cs, n=40, max_len=400, seed=4)
    assert len(texts) > 20
    for x in texts:
        Times.model_validate_json(x)


def test_token_level_random_walks(smol_vocab):
    import numpy as np

    from structgen.fsm.json.schema import compile_json_schema
    auto = compile_json_schema(Small, smol_vocab)
    rng = np.random.default_rng(0)
    row = np.zeros(smol_vocab.num_words, dtype=np.int32)
    is_eos, _ = token_classes(smol_vocab, ())
    done = 0
    for _ in range(20):
        m = auto.matcher()
        out = []
        for _ in range(400):
            m.fill_next_token_bitmask(row)
            bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: smol_vocab.size]
            allowed = np.flatnonzero(bits)
            eos = allowed[is_eos[allowed]]   # (in order)
            if len(eos) and rng.random() < 0.5:
                assert m.accept_token(int(eos[0]))
                break
            t = int(rng.choice(allowed))
            assert m.accept_token(t)
            if t in smol_vocab.eos_ids:
                break
            out.append(t)
        if m.is_terminated():
            text = b"".join(smol_vocab.token_bytes[t] for t in out).decode("utf-8")
            Small.model_validate_json(text)
            done += 1
    assert done >= 10


@pytest.mark.slow
def test_token_level_recursive_document(smol_vocab, smol_tokenizer):
    """A recursive model at token level (lazy terms): a deep valid document
    is accepted token by token (EOS only at the end); an invalid one is refused."""
    import numpy as np

    from structgen.fsm.json.schema import compile_json_schema
    auto = compile_json_schema(Tree, smol_vocab)
    t = Tree(value=0)
    for i in range(1, 12):
        t = Tree(value=i, children=[t, Tree(value=-i)])
    text = canonical_json(t.model_dump(mode="json"), auto.info.key_order)
    ids = smol_tokenizer.encode(text, add_special_tokens=False)
    m = auto.matcher()
    row = np.zeros(smol_vocab.num_words, dtype=np.int32)
    eos = smol_vocab.eos_ids[0]
    for tid in ids:
        m.fill_next_token_bitmask(row)
        assert row[tid // 32] >> (tid % 32) & 1
        assert not (row[eos // 32] >> (eos % 32) & 1)
        assert m.accept_token(tid)
    assert m.accept_token(eos) and m.is_terminated()
    bad = smol_tokenizer.encode('{"value":1,"children":[{"children":[]}]}', add_special_tokens=False)
    m = auto.matcher()
    assert not all(m.accept_token(x) for x in bad)
