#!/usr/bin/env python3
"""Keep the committed fuzz corpus to a few dozen files per target.

`cargo fuzz cmin` keeps every input that adds a feature, often a hundred or more. This picks
at most LIMIT of them that together cover the most features (greedy maximum coverage) and
copies them into OUT_DIR, named by content hash; it prints how much of the coverage they keep.

Input: a libFuzzer merge control file, written by
    TARGET_BINARY -merge=1 -use_counters=0 -merge_control_file=CONTROL EMPTY_DIR CORPUS_DIR
(`-use_counters=0`: a feature is a covered edge, not an edge and a hit count). Its `FT i ...`
lines list the features input i (the i-th file path after the two header lines) reached.

usage: fuzz/cover.py CONTROL LIMIT OUT_DIR      (docs/reliability.md, "Fuzzing")
"""

import hashlib
import os
import shutil
import sys


def read_control(path):
    """The input paths and, per input index, the features it reached."""
    with open(path) as f:
        lines = f.read().splitlines()
    count = int(lines[0])
    files = lines[2 : 2 + count]
    features = {}
    for line in lines[2 + count :]:
        if line.startswith("FT "):
            fields = line.split()
            features[int(fields[1])] = set(map(int, fields[2:]))
    return files, features


def greedy_cover(features, limit):
    """Indices of at most `limit` inputs, each adding the most uncovered features; ties go to
    the smaller input index (libFuzzer lists inputs smallest first)."""
    covered, chosen = set(), []
    while len(chosen) < limit:
        best, gain = None, 0
        for i in sorted(features):
            g = len(features[i] - covered)
            if g > gain:
                best, gain = i, g
        if best is None:
            break
        chosen.append(best)
        covered |= features[best]
    return chosen, covered


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    control, limit, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    files, features = read_control(control)
    chosen, covered = greedy_cover(features, limit)
    total = set().union(*features.values()) if features else set()
    os.makedirs(out_dir, exist_ok=True)
    for i in chosen:
        with open(files[i], "rb") as f:
            name = hashlib.sha1(f.read()).hexdigest()
        shutil.copyfile(files[i], os.path.join(out_dir, name))
    print(
        f"{len(chosen)} of {len(files)} inputs keep {len(covered)} of {len(total)} features"
    )


if __name__ == "__main__":
    main()
