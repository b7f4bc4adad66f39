#!/usr/bin/env python3
"""Writes expected.json: the samples Python 0.33's ShareGPTDataset picks from the ShareGPT
sample of tests/fixtures (300 conversations), tokenized with the Qwen3 tokenizer.

Needs CPython and the `tokenizers` package (pip install tokenizers). Usage:
    scripts/fetch-fixtures.sh && python tests/data/sharegpt/make_expected.py
(Qwen3 from the fetched cache, `$VLLM_BENCH_CACHE/fixtures`, default ~/.cache/vllm-bench/fixtures.)
The selection below restates `ShareGPTDataset.load_data`/`sample`, `is_valid_sequence` and
`maybe_oversample_requests` of vllm 0.33.0 (`vllm/benchmarks/datasets/datasets.py`);
`tokenizer(text).input_ids` of a Qwen3 HF tokenizer adds no special tokens, which is what
`Tokenizer.encode(text, add_special_tokens=True)` computes.
"""
import json
import os
import pathlib
import random

from tokenizers import Tokenizer

DATA = "tests/fixtures/data/sharegpt.first300.json"
TOKENIZER = "tokenizers/qwen3/tokenizer.json"


def is_valid_sequence(prompt_len, output_len, skip_min_output_len_check):
    min_len, max_prompt_len, max_total_len = 4, 1024, 2048
    prompt_too_short = prompt_len < min_len
    output_too_short = (not skip_min_output_len_check) and (output_len < min_len)
    prompt_too_long = prompt_len > max_prompt_len
    combined_too_long = (prompt_len + output_len) > max_total_len
    return not (prompt_too_short or output_too_short or prompt_too_long or combined_too_long)


def sample(raw, tok, seed, output_len, num_requests, shuffle=True, oversample=True):
    # load_data: keep the original index beside each entry to name it in the fixture.
    data = [(i, e) for i, e in enumerate(raw) if "conversations" in e and len(e["conversations"]) >= 2]
    random.seed(seed)
    if shuffle:
        random.shuffle(data)
    samples = []
    ind = 0
    for index, entry in data:
        if len(samples) >= num_requests:
            break
        prompt, completion = entry["conversations"][0]["value"], entry["conversations"][1]["value"]
        prompt_len = len(tok.encode(prompt, add_special_tokens=True).ids)
        completion_len = len(tok.encode(completion, add_special_tokens=True).ids)
        new_output_len = completion_len if output_len is None else output_len
        if not is_valid_sequence(prompt_len, new_output_len, output_len is not None):
            continue
        samples.append({"index": index, "prompt_len": prompt_len, "output_len": new_output_len, "request_id": str(ind)})
        ind += 1
    valid = len(samples)
    if oversample and len(samples) < num_requests:
        random.seed(seed)
        additional = []
        for i in range(num_requests - len(samples)):
            additional.append(dict(random.choice(samples), request_id=str(len(samples) + i)))
        samples.extend(additional)
    return valid, samples


def compact(samples):
    """[file index, prompt_len, output_len] per sample; the request id is always the position."""
    assert all(s["request_id"] == str(i) for i, s in enumerate(samples))
    return [[s["index"], s["prompt_len"], s["output_len"]] for s in samples]


def main():
    repo = pathlib.Path(__file__).resolve().parents[3]
    cache = pathlib.Path(os.environ.get("VLLM_BENCH_CACHE", pathlib.Path.home() / ".cache/vllm-bench"))
    raw = json.loads((repo / DATA).read_text(encoding="utf-8"))
    tok = Tokenizer.from_file(str(cache / "fixtures" / TOKENIZER))
    cases = []
    for seed, output_len, num, shuffle, oversample in [
        (0, None, 200, True, True),
        (0, 128, 200, True, True),
        (42, None, 200, True, True),
        (42, 128, 200, True, True),
        (0, None, 50, False, True),
    ]:
        _, samples = sample(raw, tok, seed, output_len, num, shuffle, oversample)
        cases.append({"seed": seed, "output_len": output_len, "num_prompts": num,
                      "shuffle": shuffle, "oversample": oversample, "samples": compact(samples)})
    # Past the valid count: every valid conversation, then oversampled ones (and the same
    # without oversampling).
    for seed, output_len in [(0, None), (42, 128)]:
        valid, _ = sample(raw, tok, seed, output_len, 10**9, oversample=False)
        for oversample in (True, False):
            num = valid + 40
            _, samples = sample(raw, tok, seed, output_len, num, True, oversample)
            cases.append({"seed": seed, "output_len": output_len, "num_prompts": num,
                          "shuffle": True, "oversample": oversample, "valid": valid,
                          "samples": compact(samples)})
    out = pathlib.Path(__file__).with_name("expected.json")
    out.write_text(json.dumps({"data": DATA, "tokenizer": TOKENIZER, "cases": cases}, separators=(",", ":")) + "\n")
    print(f"wrote {out}: " + ", ".join(f"{len(c['samples'])}" for c in cases))


if __name__ == "__main__":
    main()
