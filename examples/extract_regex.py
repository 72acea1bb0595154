r"""Regex-constrained extraction from a paragraph: dates, phone numbers, amounts.

Patterns say [0-9], not \d: as in Python's re, \d also matches other scripts' digits.

Run: .venv/bin/python examples/extract_regex.py
"""
import re

import structgen

PARAGRAPH = (
    "Invoice 2291 was issued on 2024-03-15 to Dana Whitfield, who can be reached at "
    "(415) 555-0198. The total due is $1,249.50, payable by 2024-04-14; a late fee of "
    "$35.00 applies after that. Questions go to the billing desk at (415) 555-0100."
)

FIELDS = {  # label -> (question, pattern)
    "issue date": ("What date was the invoice issued?", r"[0-9]{4}-[0-9]{2}-[0-9]{2}"),
    "customer phone": ("What is the customer's phone number?", r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}"),
    "total due": ("What is the total amount due?", r"\$[0-9]{1,3}(,[0-9]{3})*\.[0-9]{2}"),
}


def main(model=None):
    model = structgen.load(model)
    for label, (question, pattern) in FIELDS.items():
        prompt = f"{PARAGRAPH}\n\n{question} Answer with the value only."
        value = structgen.regex(model, pattern)(prompt, max_tokens=24)
        assert re.fullmatch(pattern, value)
        print(f"{label:>15}: {value}")


if __name__ == "__main__":
    main()
