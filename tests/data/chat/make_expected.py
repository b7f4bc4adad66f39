#!/usr/bin/env python3
"""Writes expected.json: chat-template-rendered prompt lengths for the custom and sonnet
datasets, computed as Python computes them.

Needs CPython with `jinja2` and `tokenizers` (pip install jinja2 tokenizers). Usage:
    scripts/fetch-fixtures.sh && python tests/data/chat/make_expected.py
(sonnet.txt from the repository, SmolLM2 from tests/fixtures, Qwen3 from the fetched cache,
`$VLLM_BENCH_CACHE/fixtures`, default ~/.cache/vllm-bench/fixtures.)

The template is rendered as transformers' `apply_chat_template(..., tokenize=False)` does
(an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loopcontrols, its
`tojson` and `raise_exception`; context: messages, tools=None, documents=None,
add_generation_prompt, the named special tokens, then the kwargs), and lengths are
`len(tokenizer(text).input_ids)` (= `Tokenizer.encode(text, add_special_tokens=True)` for
these two fixtures, whose configs add no BOS).

custom: vllm 0.33 `CustomDataset` (shuffle with random.seed(seed); rendered text is sent).
sonnet: vllm 0.11 `SonnetDataset.sample`, with random.seed(seed) just before it (0.11's
main seeds `random` with --seed and nothing draws from it before the dataset).
"""
import json
import os
import pathlib
import random

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

HERE = pathlib.Path(__file__).resolve().parent
NAMED = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]
BASE_PROMPT = "Pick as many lines as you can from these poem lines:\n"


def token_content(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


class HfTokenizer:
    def __init__(self, directory):
        self.tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        config = json.loads((directory / "tokenizer_config.json").read_text())
        self.specials = {k: token_content(config[k]) for k in NAMED if config.get(k)}

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        self.template = env.from_string(config["chat_template"])

    def apply_chat_template(self, messages, add_generation_prompt, **kwargs):
        return self.template.render(messages=messages, tools=None, documents=None,
                                    add_generation_prompt=add_generation_prompt, **{**self.specials, **kwargs})

    def count(self, text):
        return len(self.tok.encode(text, add_special_tokens=True).ids)


def custom_case(tok, rows, seed, kwargs):
    data = list(rows)
    random.seed(seed)
    random.shuffle(data)
    out = []
    for row in data:
        text = tok.apply_chat_template([{"role": "user", "content": row["prompt"]}], True, **kwargs)
        out.append({"prompt": text, "prompt_len": tok.count(text), "output_len": int(row["output_tokens"])})
    return out


def sonnet_case(tok, lines, seed, num, input_len, prefix_len, output_len):
    random.seed(seed)
    avg_len = sum(tok.count(line) for line in lines) / len(lines)
    fmt = lambda p: tok.apply_chat_template([{"role": "user", "content": p}], True)
    base_offset = tok.count(fmt(BASE_PROMPT))
    num_input_lines = round((input_len - base_offset) / avg_len)
    num_prefix_lines = max(round((prefix_len - base_offset) / avg_len), 0)
    prefix_lines = lines[:num_prefix_lines]
    samples = []
    while len(samples) < num:
        extra = random.choices(lines, k=num_input_lines - num_prefix_lines)
        prompt = f"{BASE_PROMPT}{''.join(prefix_lines + extra)}"
        formatted = fmt(prompt)
        prompt_len = tok.count(formatted)
        if prompt_len <= input_len:
            samples.append({"raw_chars": len(prompt), "rendered_chars": len(formatted), "prompt_len": prompt_len})
    return {"seed": seed, "num": num, "input_len": input_len, "prefix_len": prefix_len, "output_len": output_len,
            "base_offset": base_offset, "samples": samples}


def main():
    repo = HERE.parents[2]
    cache = pathlib.Path(os.environ.get("VLLM_BENCH_CACHE", pathlib.Path.home() / ".cache/vllm-bench"))
    dirs = {"qwen3": cache / "fixtures/tokenizers/qwen3", "smollm2": cache / "fixtures/tokenizers/smollm2"}
    rows = [json.loads(line) for line in (HERE / "prompts.jsonl").read_text().splitlines() if line.strip()]
    with open(repo / "sonnet.txt", encoding="utf-8") as f:
        lines = f.readlines()
    doc = {}
    for name in ["qwen3", "smollm2"]:
        tok = HfTokenizer(dirs[name])
        kwargs_list = [{}] + ([{"enable_thinking": False}] if name == "qwen3" else [])
        doc[name] = {
            "custom": [{"seed": 0, "kwargs": kw, "samples": custom_case(tok, rows, 0, kw)} for kw in kwargs_list],
            "sonnet": [sonnet_case(tok, lines, 0, 20, 550, 200, 150), sonnet_case(tok, lines, 7, 12, 300, 50, 32)],
        }
    out = HERE / "expected.json"
    out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
