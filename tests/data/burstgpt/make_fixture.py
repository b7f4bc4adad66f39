#!/usr/bin/env python3
"""Writes burstgpt_sample.csv (a small file in BurstGPT's format, generated from a fixed
seed) and expected.json: the (request tokens, response tokens) pairs vllm 0.33's
BurstGPTDataset picks for several seeds and sizes (pandas `DataFrame.sample` with
`random_state=seed`, with and without replacement), plus numpy `RandomState` draws the
Rust port checks directly.

Needs CPython with pandas and numpy (pip install pandas). Usage:
    python tests/data/burstgpt/make_fixture.py
"""
import json
import pathlib
import random

import numpy as np
import pandas as pd

HERE = pathlib.Path(__file__).parent


def write_csv(path):
    rng = random.Random(1234)
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    t = 5
    for _ in range(80):
        t += rng.randint(0, 20)
        model = "GPT-4" if rng.random() < 0.6 else "ChatGPT"
        req = rng.randint(1, 1500)
        resp = 0 if rng.random() < 0.1 else rng.randint(1, 600)
        log = "Conversation log" if rng.random() < 0.7 else "API log"
        lines.append(f"{t},{model},{req},{resp},{req + resp},{log}")
    path.write_text("\n".join(lines) + "\n")


def burstgpt(path, seed, n):
    df = pd.read_csv(path)
    gpt4 = df[df["Model"] == "GPT-4"]
    gpt4 = gpt4[gpt4["Response tokens"] > 0]
    if n <= len(gpt4):
        data = gpt4.sample(n=n, random_state=seed)
    else:
        data = gpt4.sample(n=n, random_state=seed, replace=True)
    rows = data.values.tolist()
    return len(gpt4), [[int(r[2]), int(r[3])] for r in rows]


def main():
    csv = HERE / "burstgpt_sample.csv"
    write_csv(csv)
    cases = []
    for seed in (0, 1, 42):
        for n in (1, 10, 45, 120):
            valid, pairs = burstgpt(csv, seed, n)
            cases.append({"seed": seed, "num": n, "valid": valid, "pairs": pairs})
    numpy = []
    for seed in (0, 7, 2**32 - 1):
        rs = np.random.RandomState(seed)
        perm = rs.permutation(37).tolist()
        rs = np.random.RandomState(seed)
        ints = rs.randint(0, 1000, size=20).tolist()
        numpy.append({"seed": seed, "permutation_37": perm, "randint_1000": ints})
    doc = {"numpy": np.__version__, "pandas": pd.__version__, "cases": cases, "random_state": numpy}
    (HERE / "expected.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print("wrote", csv, HERE / "expected.json")


if __name__ == "__main__":
    main()
