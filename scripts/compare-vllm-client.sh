#!/usr/bin/env bash
# Agreement with vLLM's own client: on one real llama.cpp server (the test
# model, scripts/llama-server), run `vllm bench serve` and `servebench bench`
# alternately, ROUNDS times each, with the same workload (random prompts of
# IN tokens, exactly OUT output tokens with ignore_eos, N requests at
# concurrency C), and print TTFT, TPOT and ITL p50 and the output token
# counts of every run, then one JSON line per run.
#
#   eval "$(scripts/setup-test-env.sh)"
#   scripts/compare-vllm-client.sh [ROUNDS]     # env: N C IN OUT SERVEBENCH
#
# Timing figures are for reading, not asserting: on a busy machine runs
# differ by more than the definitions do (see README, "Agreement with vLLM's
# own client").
set -euo pipefail
ROUNDS="${1:-2}"
N="${N:-24}"; C="${C:-2}"; IN="${IN:-64}"; OUT="${OUT:-32}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SB="${SERVEBENCH:-$ROOT/target/debug/servebench}"
: "${SERVEBENCH_PYTHON:?run eval \"\$(scripts/setup-test-env.sh)\" first}"
: "${SERVEBENCH_TEST_GGUF:?}" "${SERVEBENCH_VLLM_BIN:?}" "${SERVEBENCH_VLLM_MODEL:?}"
WORK="$(mktemp -d)"
PORT="$("$SERVEBENCH_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$SERVEBENCH_PYTHON" "$ROOT/scripts/llama-server" -m "$SERVEBENCH_TEST_GGUF" --port "$PORT" \
    -t 1 -c 4096 -np "$C" --metrics >"$WORK/llama.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/llama.log" >&2; exit 1; }
    sleep 0.1
done
URL="http://127.0.0.1:$PORT"
for r in $(seq "$ROUNDS"); do
    HF_HUB_OFFLINE=1 "$SERVEBENCH_VLLM_BIN" bench serve --backend openai --base-url "$URL" \
        --endpoint /v1/completions --model smollm2 --tokenizer "$SERVEBENCH_VLLM_MODEL" \
        --dataset-name random --random-input-len "$IN" --random-output-len "$OUT" \
        --ignore-eos --num-prompts "$N" --max-concurrency "$C" --request-rate inf \
        --percentile-metrics ttft,tpot,itl --metric-percentiles 50 \
        --save-result --result-dir "$WORK" --result-filename "vllm-$r.json" >"$WORK/vllm-$r.out" 2>&1 \
        || { tail -30 "$WORK/vllm-$r.out" >&2; exit 1; }
    "$SB" bench --url "$URL" --input-len "$IN" --output-len "$OUT" --ignore-eos \
        --num-requests "$N" --concurrency "$C" --output "$WORK/sb-$r.json" >/dev/null 2>"$WORK/sb-$r.err" \
        || { cat "$WORK/sb-$r.err" >&2; exit 1; }
done
"$SERVEBENCH_PYTHON" - "$WORK" "$ROUNDS" "$N" "$OUT" <<'EOF'
import json, sys
work, rounds, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print(f"{'run':<14} {'TTFT p50':>9} {'TPOT p50':>9} {'ITL p50':>9} {'out tokens':>11}  (ms; {n} requests x {out} asked)")
rows = []
for r in range(1, rounds + 1):
    v = json.load(open(f"{work}/vllm-{r}.json"))
    rows.append(dict(client="vllm", round=r, ttft=v["median_ttft_ms"], tpot=v["median_tpot_ms"],
                     itl=v["median_itl_ms"], output_tokens=v["total_output_tokens"], completed=v["completed"]))
    s = json.load(open(f"{work}/sb-{r}.json"))
    l = s["levels"][0]
    rows.append(dict(client="servebench", round=r, ttft=l["ttft_ms"]["p50"], tpot=l["tpot_ms"]["p50"],
                     itl=l["itl_ms"]["p50"], completed=l["completed"],
                     output_tokens=sum(q["output_tokens"] or 0 for q in l["requests"])))
for x in rows:
    print(f"{x['client'] + ' #' + str(x['round']):<14} {x['ttft']:9.1f} {x['tpot']:9.1f} {x['itl']:9.1f} {x['output_tokens']:11d}")
for x in rows:
    print(json.dumps(x))
EOF
