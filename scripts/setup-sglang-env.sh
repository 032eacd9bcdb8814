#!/usr/bin/env bash
# Builds the cached environment in which SGLang's own argument parser runs
# (called by setup-test-env.sh, after setup-vllm-env.sh):
#   - $CACHE/sglang-venv: a venv that sees the vLLM test environment's
#     packages (torch, numpy, pydantic, ... through a .pth file) and adds the
#     SGLang wheel with --no-deps (its CUDA kernels are never imported: only
#     `sglang.srt.server_args` is) and the few pure-Python packages it needs,
#     all pinned in scripts/sglang-parser-requirements.txt.
# Usage: setup-sglang-env.sh CACHE. Prints an `export` line. A marker file
# holding the hash of the pinned list makes a second run cost nothing.
set -euo pipefail
CACHE="$1"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$CACHE/sglang-venv"
BASE="$CACHE/vllm-venv"
REQS="$ROOT/scripts/sglang-parser-requirements.txt"
STAMP="$(cat "$REQS" "$0" | sha256sum | cut -c1-16)"
MARKER="$VENV/.servebench-ready"

if [ "$(cat "$MARKER" 2>/dev/null)" != "$STAMP" ]; then
    echo "setup: building $VENV (SGLang's argument parser)" >&2
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    "$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$SITE/servebench-vllm-venv.pth"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --progress-bar off \
        --no-deps -r "$REQS" >&2
    "$VENV/bin/python" -c 'import sglang.srt.server_args' >&2
    echo "$STAMP" >"$MARKER"
fi

echo "export SERVEBENCH_SGLANG_PYTHON='$VENV/bin/python'"
