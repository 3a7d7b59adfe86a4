#!/usr/bin/env bash
# The peer benchmark (../shared/bench/peer_bench.py) against `shelf api` + `shelf worker` on a
# fresh data directory, default settings, mock provider; prints one line of figures.
# usage: bench/peer.sh LABEL [BIN]        env: N (documents, 1000), M (queries, 50), PORT,
#        PYTHON (with httpx), PEER_BENCH, DOCS (Python reST sources), OUT (results dir)
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
LABEL=$1
BIN=${2:-$HERE/target/release/shelf}
PORT=${PORT:-18391}
PYTHON=${PYTHON:-/tmp/bench-venv/bin/python}
PEER_BENCH=${PEER_BENCH:-$HERE/../shared/bench/peer_bench.py}
DOCS=${DOCS:-/tmp/pydocs}
OUT=${OUT:-/tmp/thr}
D=$OUT/data-$LABEL
rm -rf "$D"; mkdir -p "$D"
export SHELF_DATA_DIR=$D SHELF_LLM_PROVIDER=mock SHELF_LOG_LEVEL=warn
"$BIN" migrate >/dev/null
"$BIN" api --port "$PORT" > "$D/api.log" 2>&1 & echo $! > "$D/api.pid"
env ${WORKER_ENV:-} "$BIN" worker > "$D/worker.log" 2>&1 & echo $! > "$D/worker.pid"
trap 'kill $(cat "$D/api.pid") $(cat "$D/worker.pid") 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.1; done
"$PYTHON" "$PEER_BENCH" --base-url "http://127.0.0.1:$PORT" --docs-dir "$DOCS" \
  -n "${N:-1000}" -m "${M:-50}" --label "$LABEL" \
  --pidfile "$D/api.pid" --pidfile "$D/worker.pid" --out "$OUT/$LABEL.json" > /dev/null 2> "$D/bench.log"
python3 - "$OUT/$LABEL.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
procs = r["service_processes"]["processes"].values()
rss = " + ".join(f"{p['cmd'].split()[1]} {p['vmhwm_kb'] / 1024:.1f}" for p in procs)
print(f"uploads/s {r['upload']['uploads_per_s']}  runs/s {r['runs']['runs_per_s_e2e']} "
      f"{r['runs']['statuses']}  peak RSS {r['service_processes']['peak_rss_sum_kb'] / 1024:.1f} MiB ({rss})  "
      f"worker CPU s {[p['cpu_s'].get('runs') for p in procs]}  load {r['host']['loadavg_start']} -> {r['host']['loadavg_end']}")
PY
