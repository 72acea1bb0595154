"""JSON-Schema-constrained generation with Pydantic: an invoice, a person with
addresses, and a recursive tree. Every output is a validated instance.

Run: .venv/bin/python examples/json_invoice.py
"""
from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, Field

import structgen


class LineItem(BaseModel):
    description: str = Field(max_length=40)
    quantity: int = Field(ge=1, le=100)
    unit_price: float = Field(ge=0, le=10000)


class Invoice(BaseModel):
    number: str = Field(pattern=r"^INV-[0-9]{4}$")
    issued: date
    currency: Literal["USD", "EUR", "GBP"]
    items: list[LineItem] = Field(min_length=1, max_length=3)
    paid: bool


class Address(BaseModel):
    street: str = Field(max_length=40)
    city: str = Field(max_length=30)
    postcode: str = Field(pattern=r"^[0-9]{5}$")


class Person(BaseModel):
    name: str = Field(max_length=40)
    age: int = Field(ge=0, le=120)
    email: str | None = Field(default=None, pattern=r"^[a-z0-9.]+@[a-z0-9.]+\.[a-z]{2,6}$")
    addresses: list[Address] = Field(max_length=2)


class Node(BaseModel):
    label: str = Field(max_length=12)
    children: list[Node] = Field(max_length=2)


def main(model=None):
    model = structgen.load(model)
    invoice = structgen.json(model, Invoice)(
        "Write an invoice for two hours of consulting at 120 USD and a 15 USD parking fee, "
        "issued on 2024-05-02, not yet paid.", max_tokens=200)
    print(invoice.model_dump_json(indent=1))
    person = structgen.json(model, Person)(
        "Describe Ada, 36, who lives at 12 Loom Street in Oxford (postcode 10101).", max_tokens=160)
    print(person.model_dump_json(indent=1))
    # Recursion is enforced exactly by default, but a 135M model keeps opening children
    # until max_tokens; max_recursion_depth unrolls the schema to a fixed depth instead.
    tree = structgen.json(model, Node, max_recursion_depth=2)(
        'Write this tree as JSON: root "animals"; its children "cats" and "dogs"; "cats" has '
        'one child "lion". Use {"label": ..., "children": [...]} for every node.', max_tokens=300)
    print(tree.model_dump_json(indent=1))


if __name__ == "__main__":
    main()
