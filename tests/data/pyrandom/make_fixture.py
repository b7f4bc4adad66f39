#!/usr/bin/env python3
"""Writes pyrandom.json: CPython `random` outputs that src/datasets/pyrandom.rs must match.

Standard library only. Run from anywhere: python3 tests/data/pyrandom/make_fixture.py
"""
import json
import pathlib
import random
import sys

SEEDS = [0, 1, 42, 12345, 2**32 - 1, 2**32 + 5, 2**63 + 12345]
SHUFFLE_SIZES = [0, 1, 2, 3, 10, 1000, 4097]
CHOICE_SIZES = [1, 2, 7, 1000, 2**31 + 3]
BITS = [1, 7, 31, 32, 33, 53, 64]


def case(seed):
    out = {"seed": seed}
    out["shuffle"] = {}
    for n in SHUFFLE_SIZES:
        random.seed(seed)
        x = list(range(n))
        random.shuffle(x)
        out["shuffle"][str(n)] = x
    out["choice"] = {}
    for n in CHOICE_SIZES:
        random.seed(seed)
        seq = range(n)
        out["choice"][str(n)] = [random.choice(seq) for _ in range(50)]
    random.seed(seed)
    out["getrandbits"] = [[k, random.getrandbits(k)] for k in BITS * 3]
    random.seed(seed)
    out["random"] = [random.random() for _ in range(20)]
    random.seed(seed)
    out["choices"] = {str(n): random.choices(range(n), k=30) for n in (1, 7, 518)}
    # The sharegpt sequence: a shuffle, then (after a re-seed) choices from the kept list.
    random.seed(seed)
    x = list(range(300))
    random.shuffle(x)
    random.seed(seed)
    out["shuffle_then_choice"] = {"shuffled": x, "choices": [random.choice(x[:17]) for _ in range(40)]}
    return out


def main():
    doc = {
        "python": sys.version.split()[0],
        "cases": [case(s) for s in SEEDS],
    }
    path = pathlib.Path(__file__).with_name("pyrandom.json")
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
