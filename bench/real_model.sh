#!/usr/bin/env bash
# Shelf against a real model server (issue 35): llama.cpp with SmolLM2-135M-Instruct on the CPU.
# A folder of ordinary documents (the bundled examples, real pages, a Word file, a web page, a
# PDF) is imported with `shelf import` and default settings, only SHELF_LLM_BASE_URL and
# SHELF_LLM_MODEL set. One line per configuration:
#
#   server | parallel | docs | ready | classified | titled | fallback chunks | stage retries |
#   calls retried | interrupted | tokens | tokens/s | s/doc | wall s
#
# ready: documents whose run succeeded (searchable); classified/titled: runs whose classify /
# summarize stage succeeded (the rest end `ready` with a warning); fallback chunks: cleaned
# chunks replaced by their source (unfaithful or cut answers); stage retries: stage attempts
# past the first; calls retried: provider-level retries logged ("retrying"); interrupted:
# streams the server cut short (llama-cpp-python, when a second request arrives) and Shelf
# sent again as push-back; tokens and tokens/s: generated tokens and their rate, from the
# server's own timing lines; s/doc: wall time per document.
#
#   bash bench/real_model.sh [BIN]   env: SERVERS ("python"; "native" = llama.cpp's
#                                    llama-server, LLAMA_SERVER names its binary), PARALLEL
#                                    ("1 2": native only), THREADS (2), PORT (18611),
#                                    SHELF_LLAMA_HOME (scripts/fetch-llama-server's directory)
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$HERE/target/debug/shelf}
SERVERS=${SERVERS:-python}
PARALLEL=${PARALLEL:-1 2}
THREADS=${THREADS:-2}
PORT=${PORT:-18611}
LLAMA=$("$HERE/scripts/fetch-llama-server" | tail -n 1)
cd "$HERE"
source bench/workdir.sh

DOCS=$WORK/docs
mkdir -p "$DOCS"
cp examples/documents/* "$DOCS/"
for f in tests/corpus/text/{crazyones,8071_093.3B,8087_054.3B,eurotext,multicolumn-lorem-ipsum}.txt \
  tests/corpus/office/docx/sources/word_sample.docx tests/corpus/office/html/sources/example_03.html \
  tests/corpus/pdf/pypdf/crazyones.pdf; do
  cp "$f" "$DOCS/"
done
ndocs=$(ls "$DOCS" | wc -l)

start_server() { # KIND PARALLEL LOG
  case $1 in
    python)
      "$LLAMA/venv/bin/python" -m llama_cpp.server --model "$LLAMA/SmolLM2-135M-Instruct.Q4_1.gguf" \
        --model_alias smollm2 --n_ctx 8192 --n_threads "$THREADS" --host 127.0.0.1 --port "$PORT" >"$3" 2>&1 &
      ;;
    native)
      "${LLAMA_SERVER:?LLAMA_SERVER must name the llama-server binary}" -m "$LLAMA/SmolLM2-135M-Instruct.Q4_1.gguf" \
        --alias smollm2 -c $((8192 * $2)) -np "$2" -t "$THREADS" --host 127.0.0.1 --port "$PORT" >"$3" 2>&1 &
      ;;
  esac
  PIDS+=($!)
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && return 0
    sleep 0.5
  done
  echo "the $1 server did not start; see $3" >&2
  exit 1
}

echo "server | parallel | docs | ready | classified | titled | fallback chunks | stage retries | calls retried | interrupted | tokens | tokens/s | s/doc | wall s"
for kind in $SERVERS; do
  for parallel in $([[ $kind == native ]] && echo "$PARALLEL" || echo 1); do
    log=$WORK/server-$kind-$parallel.log
    start_server "$kind" "$parallel" "$log"
    data=$WORK/data-$kind-$parallel
    t0=$(date +%s.%N)
    env -i PATH="$PATH" HOME="$HOME" SHELF_LOG_LEVEL=warn,shelf_stages=debug SHELF_DATA_DIR="$data" \
      SHELF_LLM_BASE_URL="http://127.0.0.1:$PORT/v1" SHELF_LLM_MODEL=smollm2 \
      "$BIN" import "$DOCS" --json >"$WORK/import.json" 2>"$WORK/import-$kind-$parallel.log" || true
    t1=$(date +%s.%N)
    env -i PATH="$PATH" HOME="$HOME" SHELF_DATA_DIR="$data" "$BIN" runs --json --limit 1000 >"$WORK/runs.json"
    for id in $(python3 -c 'import json,sys; [print(r["id"]) for r in json.load(open(sys.argv[1]))["runs"]]' "$WORK/runs.json"); do
      env -i PATH="$PATH" HOME="$HOME" SHELF_DATA_DIR="$data" "$BIN" runs "$id" --json
    done >"$WORK/run-details.jsonl"
    python3 - "$kind" "$parallel" "$ndocs" "$t0" "$t1" "$WORK/run-details.jsonl" "$log" \
      "$WORK/import-$kind-$parallel.log" <<'PY'
import json, re, sys
kind, parallel, ndocs, t0, t1, details, server_log, import_log = sys.argv[1:]
ndocs, wall = int(ndocs), float(t1) - float(t0)
runs = [json.loads(l) for l in open(details) if l.strip()]
ready = sum(r["status"] == "succeeded" for r in runs)
def stage(r, name):
    return next((s for s in r.get("stages", []) if s["name"] == name), {})
classified = sum(stage(r, "classify").get("status") == "succeeded" for r in runs)
titled = sum(stage(r, "summarize").get("status") == "succeeded" for r in runs)
chunks = fallback = retries = 0
for r in runs:
    chunks += r.get("total_chunks", 0); fallback += r.get("failed_chunks", 0)
    retries += sum(max(0, s.get("attempts", 0) - 1) for s in r.get("stages", []))
text = open(server_log, errors="replace").read()
tokens = ms = 0.0
for m in re.finditer(r"(?<!prompt )eval time =\s*([\d.]+) ms /\s*(\d+) (?:runs|tokens)", text):
    ms += float(m.group(1)); tokens += int(m.group(2))
ilog = open(import_log, errors="replace").read()
called_again = ilog.count("retrying")
interrupted = ilog.count("interrupted")
print(f"{kind} | {parallel} | {ndocs} | {ready}/{ndocs} | {classified}/{len(runs)} | {titled}/{len(runs)} | "
      f"{fallback}/{chunks} | {retries} | {called_again} | {interrupted} | {int(tokens)} | "
      f"{tokens / (ms / 1000) if ms else 0:.1f} | {wall / ndocs:.1f} | {wall:.0f}")
PY
    kill "${PIDS[-1]}" 2>/dev/null || true
    wait "${PIDS[-1]}" 2>/dev/null || true
  done
done
