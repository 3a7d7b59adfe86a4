#!/usr/bin/env bash
# How busy Shelf keeps a model server (issue 24): ../shared/bench/model_server.py plays an
# OpenAI-compatible GPU server with a fixed number of parallel slots (a request waits for a
# free slot, then holds it for BASE_MS + MS_PER_TOKEN x completion tokens; with REFUSE=1 it
# answers 429 + Retry-After: 1 instead of queueing when every slot is busy). N documents of the
# peer bench (its own loader, ../shared/bench/peer_bench.py) are imported and queued with the
# `generic-compatible` provider pointed at it, then W `shelf worker` processes at default
# settings drain the queue. One line per configuration:
#
#   slots | 429 | workers | runs | runs/s | busy slot-s | ideal wall | actual wall | utilization | refused | failed
#
# where ideal wall = busy / slots and utilization = busy / (slots x actual wall), actual wall
# being the model server's first request to its last answer.
#
#   bash bench/model.sh [BIN]     env: SLOTS ("4 8 16 32"), REFUSE ("0 1"), WORKERS ("1 2"),
#                                      N (200), BASE_MS (40), MS_PER_TOKEN (0.05), PORT (18471),
#                                      PYTHON (with httpx), OUT (/tmp/model-bench), WORKER_ENV,
#                                      BACKEND (sqlite, or postgres: a throwaway cluster started
#                                      here with initdb + pg_ctl, a database per configuration)
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$HERE/target/release/shelf}
SLOTS=${SLOTS:-4 8 16 32}
REFUSE=${REFUSE:-0 1}
WORKERS=${WORKERS:-1 2}
N=${N:-200}
BASE_MS=${BASE_MS:-40}
MS_PER_TOKEN=${MS_PER_TOKEN:-0.05}
PORT=${PORT:-18471}
PYTHON=${PYTHON:-/tmp/bench-venv/bin/python} # with httpx, for the peer bench loader
OUT=${OUT:-/tmp/model-bench}
BACKEND=${BACKEND:-sqlite}
SHARED=$HERE/../shared/bench
PIDS=()
PG_DATA=$OUT/pg
PG_PORT=${PG_PORT:-55433}
as_pg() { if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ $BACKEND == postgres && -d $PG_DATA ]]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$PG_DATA"
  fi
}
trap cleanup EXIT
if [[ $BACKEND == postgres ]]; then
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  rm -rf "$PG_DATA"; mkdir -p "$PG_DATA"; chmod 755 "$OUT"
  [[ $(id -u) == 0 ]] && chown postgres "$PG_DATA"
  as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust --no-locale -E UTF8 >/dev/null
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -w -l "$PG_DATA/log" \
    -o "-p $PG_PORT -k $PG_DATA -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=128MB" start >/dev/null
fi

# The same N documents for every configuration, written once by the peer bench's loader.
DOCS=$OUT/docs-$N
if [[ ! -d $DOCS ]]; then
  rm -rf "$DOCS.tmp"; mkdir -p "$DOCS.tmp"
  "$PYTHON" - "$SHARED/peer_bench.py" "$DOCS.tmp" "$N" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("peer_bench", sys.argv[1])
pb = importlib.util.module_from_spec(spec); sys.modules["peer_bench"] = pb; spec.loader.exec_module(pb)
for d in pb.load_docs(int(sys.argv[3]), "auto"):
    open(f"{sys.argv[2]}/{d.name}", "wb").write(d.data)
PY
  mv "$DOCS.tmp" "$DOCS"
fi

count_runs() { # data-dir, condition on status -> how many runs
  if [[ $BACKEND == postgres ]]; then
    psql -qtA "$SHELF_DATABASE_URL" -c "SELECT count(*) FROM runs WHERE $2"
  else
    "$PYTHON" -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1], timeout=30).execute(f'SELECT count(*) FROM runs WHERE {sys.argv[2]}').fetchone()[0])" "$1/shelf.sqlite" "$2"
  fi
}
pending() { count_runs "$1" "status IN ('queued','running')"; }
failed() { count_runs "$1" "status = 'failed'"; }

printf '| slots | 429 | workers | runs | runs/s | busy slot-s | ideal wall | actual wall | utilization | refused | failed |\n'
printf '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for slots in $SLOTS; do
  for refuse in $REFUSE; do
    for w in $WORKERS; do
      run=$OUT/s$slots-r$refuse-w$w
      rm -rf "$run"; mkdir -p "$run"
      waiting=-1; [[ $refuse == 1 ]] && waiting=0
      "$PYTHON" "$SHARED/model_server.py" "$PORT" --slots "$slots" --base-ms "$BASE_MS" \
        --ms-per-token "$MS_PER_TOKEN" --max-waiting "$waiting" --stats "$run/stats.json" \
        >"$run/model.log" 2>&1 &
      model=$!; PIDS+=("$model")
      for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
      if [[ $BACKEND == postgres ]]; then
        db=shelf_model_s${slots}_r${refuse}_w${w}
        psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" postgres
        export SHELF_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/$db"
      fi
      export SHELF_DATA_DIR=$run/data SHELF_LOG_LEVEL=warn SHELF_LLM_PROVIDER=generic-compatible \
        SHELF_LLM_BASE_URL=http://127.0.0.1:$PORT/v1 SHELF_LLM_MODEL=bench OPENAI_API_KEY=bench
      "$BIN" import "$DOCS" --mode queue --json >"$run/import.json" 2>"$run/import.err" || [[ $? == 1 ]]
      total=$(pending "$SHELF_DATA_DIR")
      start=$(date +%s.%N)
      wpids=()
      for i in $(seq "$w"); do
        env ${WORKER_ENV:-} "$BIN" worker >"$run/worker$i.log" 2>&1 &
        wpids+=($!); PIDS+=($!)
      done
      while [[ $(pending "$SHELF_DATA_DIR") != 0 ]]; do sleep 0.2; done
      end=$(date +%s.%N)
      for p in "${wpids[@]}"; do kill -TERM "$p"; wait "$p" 2>/dev/null || true; done
      sleep 1.2 # the model server writes its counters every second
      kill "$model"; wait "$model" 2>/dev/null || true
      "$PYTHON" - "$run/stats.json" "$slots" "$refuse" "$w" "$total" "$start" "$end" "$(failed "$SHELF_DATA_DIR")" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
slots, refuse, w, n = int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5])
drain = float(sys.argv[7]) - float(sys.argv[6])
busy = st["busy_s"]
wall = (st["last"] - st["first"]) if st.get("first") and st.get("last") else drain
print(f"| {slots} | {'yes' if refuse else 'no'} | {w} | {n} | {n / drain:.2f} | {busy:.1f} | "
      f"{busy / slots:.1f} s | {wall:.1f} s | {busy / (slots * wall):.0%} | {st['rejected_429']} | {sys.argv[8]} |")
PY
    done
  done
done
