#!/usr/bin/env python3
"""Record the llama.cpp server's own tokenization of a set of texts as a fixture.

Usage: tokenize_reference.py MODEL.gguf OUT.json [FILE ...]

Starts the llama.cpp HTTP server (the `xllamacpp` wheel) on the model, sends each
text to POST /tokenize and writes [{"name", "text", "ids"}, ...] to OUT.json.
The Rust test `workload::tests_real` compares the `tokenizer.json` written by
gguf_to_tokenizer.py against this ground truth, so the comparison runs without
a server. Each FILE is added as one more text (e.g. a long source file).

The built-in texts cover what byte-level BPE tends to get wrong: code, digit
runs, whitespace runs, CJK, emoji, ChatML special tokens and newlines.
"""

import json
import socket
import sys
import time
import urllib.error
import urllib.request

import xllamacpp

TEXTS = {
    "code": "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])\n",
    "digits": "Order 1234567890 shipped on 2024-03-15 at 09:41:07; total $1,299.99 (x3) = 3899.97, pi=3.14159265358979.",
    "whitespace": "a  b   c\t\td\n\n\n   e    \n\t \n        indented\r\nwindows line\u00a0nbsp   trailing   ",
    "cjk": "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다。混合 mixed テキスト text.",
    "emoji": "Shipping 🚀🚀 now! 👩‍💻 writes code; 🇫🇷 flag, ❤️ heart, 🤖: done ✅. Ünïcödé àccents — dashes … ellipsis",
    "chatml": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi <|endoftext|> there<|im_end|>\n<|im_start|>assistant\n",
    "contractions": "I'm sure they'll say it's fine, we've done it, you'd agree, she's here, don't WON'T Can'T.",
    "punctuation": "{\"key\": [1, 2.5e-3, null], 'x': true}; a->b => c != d <= e; /* c */ // x #!/bin/sh ~~~ ***",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def wait_ready(base, deadline_s=60):
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.2)
    sys.exit(f"error: server at {base} not ready after {deadline_s} s")


def main():
    if len(sys.argv) < 3:
        sys.exit("Usage: tokenize_reference.py MODEL.gguf OUT.json [FILE ...]")
    texts = dict(TEXTS)
    for path in sys.argv[3:]:
        with open(path, encoding="utf-8") as f:
            texts["file:" + path.rsplit("/", 1)[-1]] = f.read()

    params = xllamacpp.CommonParams()
    params.model.path = sys.argv[1]
    params.hostnames = ["127.0.0.1"]
    params.port = free_port()
    params.n_ctx = 2048
    params.n_parallel = 1
    # One thread: on small shared machines more threads make llama.cpp much slower.
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    server = xllamacpp.Server(params)
    base = f"http://127.0.0.1:{params.port}"
    try:
        wait_ready(base)
        out = []
        for name, text in texts.items():
            ids = post(base + "/tokenize", {"content": text})["tokens"]
            out.append({"name": name, "text": text, "ids": ids})
    finally:
        del server
    # One record per line keeps the fixture readable in diffs.
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in out) + "\n]\n")
    print(f"wrote {sys.argv[2]}: {len(out)} texts, {sum(len(t['ids']) for t in out)} tokens")


if __name__ == "__main__":
    main()
