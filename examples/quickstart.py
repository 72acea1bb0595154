"""The README's main job: constrained generation with the embedded SmolLM2-135M-Instruct.

Runs the regex extraction and choice classification examples on our batched engine
(pass --backend transformers to use transformers' generate with our logits processor).
"""
import argparse
import time

import classify_choice  # siblings: examples/ is on sys.path when run as a script
import extract_regex

import structgen
from structgen.guided.model import BACKENDS


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="engine", choices=BACKENDS)
    args = ap.parse_args()
    t0 = time.perf_counter()
    model = structgen.load(backend=args.backend)
    print(f"loaded {model.folder.name} ({args.backend} backend) in {time.perf_counter() - t0:.1f}s\n")
    print("== regex extraction ==")
    extract_regex.main(model)
    print("\n== choice classification ==")
    classify_choice.main(model)
    print(f"\ndone in {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
