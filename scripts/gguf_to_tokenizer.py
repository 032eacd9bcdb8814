#!/usr/bin/env python3
"""Write a Hugging Face `tokenizer.json` from the tokenizer stored in a GGUF file.

Usage: gguf_to_tokenizer.py MODEL.gguf OUT.json

servebench needs the model's own tokenizer to build prompts of an exact token
count. GGUF files carry it as `tokenizer.ggml.*` metadata; this script turns a
byte-level BPE tokenizer (`tokenizer.ggml.model == "gpt2"`) into the JSON form
that the Rust `tokenizers` crate loads. Only pre-tokenizers whose llama.cpp
regexes are known to match a Hugging Face pre-tokenizer are accepted, so the
result never silently disagrees with the server; anything else is an error.

Requires the `gguf` package (pip install gguf).
"""

import json
import sys

from gguf import GGUFReader

# llama.cpp pre-tokenizer names whose regex list is ["\p{N}", <GPT-2 regex>]:
# individual digits first, then the GPT-2 byte-level split.
DIGITS_THEN_BYTE_LEVEL = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}
BYTE_LEVEL_ONLY = {"gpt-2", "default"}

# llama.cpp token types (gguf.TokenType): CONTROL tokens are specials such as
# <|im_start|>; USER_DEFINED tokens are matched literally but are not special.
CONTROL, USER_DEFINED = 3, 4


def field(reader, name, default=None):
    f = reader.fields.get(name)
    if f is None:
        if default is None:
            sys.exit(f"error: GGUF has no field {name!r}")
        return default
    return f.contents()


def pre_tokenizer(pre):
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if pre in DIGITS_THEN_BYTE_LEVEL:
        return {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level]}
    if pre in BYTE_LEVEL_ONLY:
        return byte_level
    sys.exit(f"error: pre-tokenizer {pre!r} is not supported (known: {sorted(DIGITS_THEN_BYTE_LEVEL | BYTE_LEVEL_ONLY)})")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    reader = GGUFReader(sys.argv[1])
    model = field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        sys.exit(f"error: tokenizer model {model!r} is not byte-level BPE ('gpt2')")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type", [1] * len(tokens))
    merges = field(reader, "tokenizer.ggml.merges")
    pre = field(reader, "tokenizer.ggml.pre", "default")

    vocab = {}
    for i, tok in enumerate(tokens):
        if tok in vocab:
            sys.exit(f"error: token {tok!r} appears twice (ids {vocab[tok]} and {i})")
        vocab[tok] = i
    pairs = []
    for n, merge in enumerate(merges):
        parts = merge.split(" ")
        if len(parts) != 2:
            sys.exit(f"error: merge {n} ({merge!r}) is not two space-separated tokens")
        pairs.append(parts)
    added = [
        {"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": ty == CONTROL}
        for i, (tok, ty) in enumerate(zip(tokens, types)) if ty in (CONTROL, USER_DEFINED)
    ]

    out = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer(pre),
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab, "merges": pairs,
        },
    }
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"wrote {sys.argv[2]}: vocab {len(vocab)}, merges {len(pairs)}, added {len(added)}, pre {pre!r}")


if __name__ == "__main__":
    main()
