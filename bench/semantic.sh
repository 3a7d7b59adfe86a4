#!/usr/bin/env bash
# Cost of semantic search (issue 27, not a test): a full import of the 1,400 Cranfield records
# through `shelf api` and `shelf worker` (upload, run to the end, worker at its default
# concurrency, `local` provider) with and without SHELF_EMBEDDING_MODEL_DIR, in documents/s;
# then peak RSS (VmHWM) of both processes after the load and 20 queries of each mode the
# process can answer, and how each maps the model's weights (model.safetensors in
# /proc/PID/smaps: one read-only file mapping, Rss/Pss of it). ROUNDS (2) alternates the
# cases (without, with, without, with) so the machine's load hits both alike.
#
#   bash bench/semantic.sh
#   BIN=/tmp/target-bench/release/shelf ROUNDS=2 bash bench/semantic.sh
#
# The rest of the issue's figures: bench/embed.sh (passages/s of the model alone) and
#   MODES="keyword semantic hybrid" RECALL=1 SHELF_EMBEDDING_MODEL_DIR=... N=100000 bash bench/search.sh
# (relevance, latency per mode at 1,400 and N documents). See docs/PERFORMANCE.md, "Semantic
# and hybrid search". Release build, loopback only, temporary directories removed (KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=${CARGO_TARGET_DIR:-target}
if [[ -n "${BIN:-}" ]]; then SHELF=$BIN; else
  cargo build --release -p shelf-cli >&2
  SHELF=$TARGET/release/shelf
fi
MODEL=${SHELF_EMBEDDING_MODEL_DIR:-$(scripts/fetch-embedding-model | tail -1)}
ROUNDS=${ROUNDS:-2}
unset SHELF_EMBEDDING_MODEL_DIR

source bench/workdir.sh
export SHELF_LLM_PROVIDER=local SHELF_LOG_LEVEL=warn

# One case: $1 a label, $2 the model directory or empty. Prints one Markdown row.
run_case() {
  local label=$1 model=$2 data=$WORK/$1
  local -a env=(SHELF_DATA_DIR="$data")
  [[ -z "$model" ]] || env+=(SHELF_EMBEDDING_MODEL_DIR="$model")
  env "${env[@]}" "$SHELF" migrate >/dev/null
  env "${env[@]}" "$SHELF" api --port 0 >"$data.api.out" 2>"$data.api.err" &
  local api=$!
  PIDS+=($api)
  local base=""
  for _ in $(seq 1 300); do
    base=$(sed -n 's/^shelf api listening on //p' "$data.api.out" 2>/dev/null)
    [[ -n "$base" ]] && break
    sleep 0.1
  done
  [[ -n "$base" ]] || { echo "shelf api did not start:" >&2; cat "$data.api.err" >&2; exit 1; }
  env "${env[@]}" "$SHELF" worker >"$data.worker.out" 2>"$data.worker.err" &
  local worker=$!
  PIDS+=($worker)
  local load
  load=$(python3 bench/search.py load --base-url "$base" | tail -1)
  local modes=(keyword)
  [[ -z "$model" ]] || modes+=(semantic hybrid)
  python3 - "$base" "${modes[@]}" <<'PY'
import json, sys, urllib.request
base, modes = sys.argv[1], sys.argv[2:]
qs = [json.loads(l)["text"] for l in open("/work/shared/corpus/ir/cranfield/queries.jsonl")][:20]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for mode in modes:
    for q in qs:
        body = {"query": q, "limit": 10} | ({} if mode == "keyword" else {"mode": mode})
        req = urllib.request.Request(base + "/search/results", json.dumps(body).encode(),
                                     {"content-type": "application/json"})
        opener.open(req).read()
PY
  python3 - "$label" "$load" "$api" "$worker" "$data/shelf.sqlite" <<'PY'
import json, re, sqlite3, sys
label, load, api, worker, db = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
passages = con.execute("SELECT count(*) FROM document_passages").fetchone()[0]
cells = []
for pid in (api, worker):
    status = open(f"/proc/{pid}/status").read()
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) // 1024
    rss, pss, size = 0, 0, 0
    cur = False
    for line in open(f"/proc/{pid}/smaps"):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            cur = "model.safetensors" in line
        elif cur:
            k, _, v = line.partition(":")
            n = int(v.split()[0]) if v.split() else 0
            if k == "Rss": rss += n
            elif k == "Pss": pss += n
            elif k == "Size": size += n
    cells.append(f"{hwm}")
    cells.append(f"{size // 1024}/{rss // 1024}/{pss // 1024}" if size else "–")
print(f"| {label} | {load['documents']} | {load['runs']} | {passages} | {load['seconds']} | "
      f"{load['documents_per_s']} | " + " | ".join(cells) + " |", flush=True)
PY
  kill -TERM "$worker" "$api"
  wait "$worker" "$api" 2>/dev/null || true
  PIDS=()
}

echo "uptime: $(uptime)" >&2
echo "| case | documents | runs | passages | seconds | documents/s | api VmHWM MiB | api model map Size/Rss/Pss MiB | worker VmHWM MiB | worker model map Size/Rss/Pss MiB |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
for round in $(seq 1 "$ROUNDS"); do
  run_case "without-model-$round" ""
  run_case "with-model-$round" "$MODEL"
done
echo "uptime: $(uptime)" >&2
