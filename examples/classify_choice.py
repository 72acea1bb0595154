"""A yes / no / unsure classifier with structgen.choice.

Run: .venv/bin/python examples/classify_choice.py
"""
import structgen

QUESTIONS = [
    "Is Paris the capital of France?",
    "Is the number 7 even?",
    "Will it rain in London on 3 March 2031?",
]


def main(model=None):
    model = structgen.load(model)
    answer = structgen.choice(model, ["yes", "no", "unsure"])
    prompts = [f"Answer yes, no or unsure. {q}" for q in QUESTIONS]
    for q, a in zip(QUESTIONS, answer(prompts)):
        print(f"{q:>45} -> {a}")


if __name__ == "__main__":
    main()
