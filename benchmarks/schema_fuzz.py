"""Random schemas of ~25 keywords, compiled strict or lenient at random, and walked at
random over the SmolLM2 vocabulary: a bug hunt, not a benchmark.

    .venv/bin/python benchmarks/schema_fuzz.py [--seeds 1-16] [--schemas 150] [--walks 3] [--recursive 0]

Each seed draws --schemas schemas (objects and arrays nested 3 deep: string bounds
and patterns, number bounds and multipleOf, enum/const of any values, not, anyOf, oneOf,
allOf, additionalProperties, patternProperties, propertyNames, min/maxProperties,
dependentRequired, prefixItems, min/maxItems, contains with min/maxContains,
uniqueItems; with --recursive P, a property's or the items' schema is the root again with
probability P). Each that compiles and can begin an output gets --walks walks
(schema_sweep.walk, closing tokens preferred a third of the time). Reported per seed:
compiled, refused (SchemaError, or no output at all), walks ended and valid (jsonschema
with numbers read as Decimal, an integer being one without a fraction part, and
lenient compiles counted valid where they relaxed a keyword), and every problem with
its schema: INVALID (an ended text jsonschema rejects), DEAD (an empty mask before the
end), ERROR (an exception while compiling or walking: TooLargeError mid-output...).
Formats are left out: jsonschema without its optional packages takes them as
annotations, the compiler asserts them.
"""
from __future__ import annotations

import argparse
import decimal
import json
import pathlib
import random
import sys
import warnings
from decimal import Decimal

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from oracles import exact_validator  # noqa: E402
from schema_sweep import _distinct, _Repeated, closing_levels, walk  # noqa: E402

from structgen import fsm  # noqa: E402
from structgen.fsm.core.errors import ConstraintError  # noqa: E402
from structgen.fsm.json.schema import build_automaton  # noqa: E402


class RandomSchemas:
    def __init__(self, seed: int, recursive: float = 0.0):
        self.rng = random.Random(seed)
        self.recursive = recursive  # how often a property or items schema is `{"$ref": "#"}`

    def inner(self, depth: int):
        """A property's or the items' schema: the root again (`$ref: "#"`, where the
        instance has gone one level down: no reference loops without a byte), or value."""
        return {"$ref": "#"} if self.recursive and self.rng.random() < self.recursive else self.value(depth)

    def scalar(self):
        rng = self.rng
        return rng.choice([
            lambda: {"type": "string", "minLength": rng.randint(0, 3), "maxLength": rng.randint(2, 6)},
            lambda: {"type": "string",
                     "pattern": rng.choice(["^[a-c]+$", "^x.y$", "^(ab|cd)*$", "[0-9]{2}", "^\\w+$"])},
            lambda: {"type": "integer", "minimum": rng.randint(-20, 5), "maximum": rng.randint(5, 300)},
            lambda: {"type": "number", "exclusiveMinimum": rng.choice([-1.5, 0, 0.25]),
                     "maximum": rng.choice([1, 2.5, 100])},
            lambda: {"type": "integer", "multipleOf": rng.choice([2, 3, 5])},
            lambda: {"type": "number", "multipleOf": rng.choice([0.5, 0.25])},
            lambda: {"enum": rng.sample(["a", "b", 1, 2.5, True, None, [1], {"k": 1}], rng.randint(1, 4))},
            lambda: {"const": rng.choice(["z", 0, {"a": [1, 2]}, [None]])},
            lambda: {"type": rng.sample(["string", "integer", "number", "boolean", "null"], 2)},
            lambda: {"not": {"type": rng.choice(["string", "integer", "object"])}},
            lambda: {},
        ])()

    def value(self, depth: int = 0):
        r = self.rng.random()
        if depth >= 3 or r < 0.4:
            return self.scalar()
        if r < 0.6:
            return self.object(depth + 1)
        if r < 0.8:
            return self.array(depth + 1)
        kw = "anyOf" if r < 0.87 else "oneOf" if r < 0.93 else "allOf"
        return {kw: [self.value(depth + 1), self.value(depth + 1)]}

    def object(self, depth: int):
        rng = self.rng
        keys = rng.sample(["a", "b", "c", "dd", "e"], rng.randint(0, 4))
        o = {"type": "object", "properties": {k: self.inner(depth) for k in keys}}
        if keys and rng.random() < 0.5:
            o["required"] = rng.sample(keys, rng.randint(1, len(keys)))
        r = rng.random()
        if r < 0.3:
            o["additionalProperties"] = False
        elif r < 0.45:
            o["additionalProperties"] = self.scalar()
        if rng.random() < 0.2:
            o["patternProperties"] = {"^x": self.scalar()}
        if rng.random() < 0.15:
            o["propertyNames"] = {"maxLength": rng.randint(1, 3)}
        if rng.random() < 0.2:
            o["minProperties"] = rng.randint(1, 2)
        if rng.random() < 0.15:
            o["maxProperties"] = rng.randint(1, 3)
        if keys and rng.random() < 0.15:
            o["dependentRequired"] = {keys[0]: [rng.choice(["a", "b", "c"])]}
        return o

    def array(self, depth: int):
        rng = self.rng
        a = {"type": "array", "items": self.inner(depth)}
        if rng.random() < 0.3:
            a["prefixItems"] = [self.value(depth) for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.3:
            a["minItems"] = rng.randint(0, 2)
        if rng.random() < 0.3:
            a["maxItems"] = rng.randint(1, 4)
        if rng.random() < 0.2:
            a["contains"] = self.scalar()
            if rng.random() < 0.5:
                a["minContains"] = rng.randint(0, 2)
            if rng.random() < 0.5:
                a["maxContains"] = rng.randint(1, 3)
        if rng.random() < 0.15:
            a["uniqueItems"] = True
        return a

    def schema(self):
        return self.value(0) if self.rng.random() < 0.3 else self.object(0)


def fuzz_seed(seed: int, n: int, walks: int, vocab, closing, recursive: float = 0.0) -> dict:
    gen, rng = RandomSchemas(seed, recursive), random.Random(seed)
    stats = {"compiled": 0, "refused": 0, "ended": 0, "valid": 0, "problems": []}
    for _ in range(n):
        schema = gen.schema()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                auto = build_automaton(schema, vocab, strict=rng.random() < 0.5).require_output()
        except ConstraintError:
            stats["refused"] += 1
            continue
        except Exception as e:  # noqa: BLE001 (a bug: reported with its schema)
            stats["problems"].append(f"ERROR compiling: {type(e).__name__}: {e} {json.dumps(schema)}")
            continue
        stats["compiled"] += 1
        check = exact_validator(schema)
        for _ in range(walks):
            try:
                text, _, problem = walk(auto, vocab, rng, 120, [0.0, b""], 0.35, closing)
            except Exception as e:  # noqa: BLE001
                stats["problems"].append(f"ERROR walking: {type(e).__name__}: {str(e)[:100]} {json.dumps(schema)}")
                break
            if problem:
                stats["problems"].append(f"DEAD: {problem} {json.dumps(schema)}")
                break
            if text is None:
                continue
            stats["ended"] += 1
            try:
                ok = check.is_valid(json.loads(text, object_pairs_hook=_distinct, parse_float=Decimal)) or auto.info.relaxed
            except (_Repeated, ValueError):
                ok = False
            if ok:
                stats["valid"] += 1
            else:
                stats["problems"].append(f"INVALID: {text!r} {json.dumps(schema)}")
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1-16", help="a range, lo-hi")
    ap.add_argument("--schemas", type=int, default=150)
    ap.add_argument("--walks", type=int, default=3)
    ap.add_argument("--recursive", type=float, default=0.0,
                    help="probability that a property's or the items' schema is the root again ($ref: #)")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from structgen.engine.loader import resolve_model
    decimal.getcontext().prec = 2000  # (jsonschema's multipleOf of a long number)
    vocab = fsm.Vocabulary.from_tokenizer(AutoTokenizer.from_pretrained(resolve_model()))
    closing = closing_levels(vocab)
    lo, hi = (int(x) for x in args.seeds.split("-"))
    for seed in range(lo, hi + 1):
        stats = fuzz_seed(seed, args.schemas, args.walks, vocab, closing, args.recursive)
        problems = stats.pop("problems")
        print(f"seed {seed}: {stats}, problems {len(problems)}", flush=True)
        for p in problems:
            print("  " + p[:1500], flush=True)


if __name__ == "__main__":
    main()
