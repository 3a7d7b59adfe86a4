#!/usr/bin/env bash
# Search benchmark (not a test): relevance (nDCG@10 on Cranfield) and latency of
# POST /search/results against raw FTS5 on the same database file, at concurrency 1 and 8.
#
#   bash bench/search.sh              # Cranfield (1,400 documents) through the API and worker
#   N=100000 bash bench/search.sh     # plus N documents loaded by the documents crate's own
#                                     # write path (examples/search_corpus.rs), no pipeline
#   SHELF_DATABASE_URL=postgres://user@127.0.0.1:5432/empty_db bash bench/search.sh
#                                     # relevance only, on PostgreSQL: the API and worker use
#                                     # that (empty) database; the latency comparison reads
#                                     # a SQLite file with Python's sqlite3, so it is skipped
#
# Semantic and hybrid search (issue 27; keyword alone is the default):
#   MODES="keyword semantic hybrid" RECALL=1 SHELF_EMBEDDING_MODEL_DIR=$(scripts/fetch-embedding-model | tail -1) \
#     N=100000 bash bench/search.sh
#                                     # the API and the worker load the model (the worker's
#                                     # `embed` stage embeds Cranfield for real); nDCG@10 and
#                                     # Recall@100 and latency per mode; the N documents get one
#                                     # passage each with a random normalised vector
#                                     # (examples/search_vectors.rs, the real model's identity);
#                                     # peak RSS and the model file's mapping of both processes
#
# CRANFIELD=0 skips the Cranfield part (with N only; MODEL_IDENTITY then names the vectors'
# model, as `SELECT DISTINCT model FROM document_passages` shows it in a database the real
# `embed` stage wrote). BIN=PATH uses that shelf binary, and EXAMPLES=DIR (default $TARGET/release/examples) the
# examples already built there: no cargo at all.
# Release build (PROFILE=debug uses the debug build: enough for relevance, not for latency),
# loopback only, mock provider, temporary data directories removed at the end (KEEP=1 keeps
# them). Prints Markdown tables and JSON lines; see docs/PERFORMANCE.md and docs/search.md.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-}
PG=${SHELF_DATABASE_URL:-}
PROFILE=${PROFILE:-release}
TARGET=${CARGO_TARGET_DIR:-target}
MODES=${MODES:-keyword}
MODEL=${SHELF_EMBEDDING_MODEL_DIR:-}
if [[ -n "${BIN:-}" ]]; then SHELF=$BIN
elif [[ "$PROFILE" == release ]]; then
  cargo build --release -p shelf-cli >&2
  SHELF=$TARGET/$PROFILE/shelf
else
  cargo build -p shelf-cli >&2
  SHELF=$TARGET/$PROFILE/shelf
fi
EXAMPLES=${EXAMPLES:-$TARGET/release/examples}
if [[ -n "$N" && -z "${BIN:-}" ]]; then
  cargo build --release -p shelf-documents --example search_corpus --example search_vectors >&2
fi
# The relevance and latency commands' extra arguments: every mode asked for, Recall@100.
NDCG_ARGS=(--modes $MODES)
[[ -z "${RECALL:-}" ]] || NDCG_ARGS+=(--recall)
LAT_ARGS=(--modes $MODES)
[[ -z "${REPEAT:-}" ]] || LAT_ARGS+=(--repeat "$REPEAT")

source bench/workdir.sh
export SHELF_LLM_PROVIDER=mock SHELF_LOG_LEVEL=warn

start_api() { # data dir -> sets BASE
  SHELF_DATA_DIR="$1" "$SHELF" api --port 0 >"$1.api.out" 2>"$1.api.err" &
  PIDS+=($!)
  BASE=""
  for _ in $(seq 1 200); do
    BASE=$(sed -n 's/^shelf api listening on //p' "$1.api.out" 2>/dev/null)
    [[ -n "$BASE" ]] && break
    sleep 0.1
  done
  [[ -n "$BASE" ]] || { echo "shelf api did not start:" >&2; cat "$1.api.err" >&2; exit 1; }
}

# 1. Cranfield through the real pipeline: upload, run (mock provider), index.
DATA="$WORK/cranfield"
if [[ "${CRANFIELD:-1}" != 0 ]]; then
SHELF_DATA_DIR="$DATA" "$SHELF" migrate >/dev/null
start_api "$DATA"
SHELF_DATA_DIR="$DATA" "$SHELF" worker >"$WORK/worker.out" 2>"$WORK/worker.err" &
PIDS+=($!)
WORKER_PID=$!
API_PID=${PIDS[0]}
python3 bench/search.py load --base-url "$BASE"
if [[ -n "$PG" ]]; then
  echo "## nDCG@10, Cranfield, PostgreSQL" && python3 bench/search.py ndcg --base-url "$BASE"
  echo "## latency, Cranfield, PostgreSQL" && python3 bench/search.py latency --base-url "$BASE" --documents 1400
  if [[ -n "$N" ]]; then
    # A second database on the same server for the N documents (replaced on each run).
    BIG_DB="shelf_search_$N"
    BIG_URL="${SHELF_DATABASE_URL%/*}/$BIG_DB"
    psql -q "$SHELF_DATABASE_URL" -c "DROP DATABASE IF EXISTS $BIG_DB" -c "CREATE DATABASE $BIG_DB"
    BIG="$WORK/big"
    mkdir -p "$BIG"
    SHELF_DATABASE_URL="$BIG_URL" "$EXAMPLES/search_corpus" "$BIG" "$N" 2>&1 | tail -1 >&2
    SHELF_DATABASE_URL="$BIG_URL" start_api "$BIG"
    echo "## latency, $N documents, PostgreSQL" && python3 bench/search.py latency --base-url "$BASE" --documents "$N"
    psql -qtA "$BIG_URL" -c "SELECT 'index sizes: search_cleaned ' || pg_size_pretty(pg_total_relation_size('search_cleaned')) || ', search_raw ' || pg_size_pretty(pg_total_relation_size('search_raw')) || ', database ' || pg_size_pretty(pg_database_size(current_database()))"
  fi
  exit 0
fi
echo "## nDCG@10, Cranfield" && python3 bench/search.py ndcg --base-url "$BASE" --raw-db "$DATA/shelf.sqlite" "${NDCG_ARGS[@]}"
echo "## latency, Cranfield" && python3 bench/search.py latency --base-url "$BASE" --db "$DATA/shelf.sqlite" "${LAT_ARGS[@]}"
if [[ -n "$MODEL" ]]; then
  # Peak RSS of both processes, and how the model file is mapped in each (one shared, read-only
  # mapping: Rss counts its resident pages once per process, Pss splits them between them).
  echo "## memory, Cranfield, model loaded"
  python3 - "$API_PID" "$WORKER_PID" "$DATA/shelf.sqlite" <<'PY'
import re, sqlite3, sys
api, worker, db = sys.argv[1:4]
print("passages:", sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(
    "SELECT count(*), count(DISTINCT document_id), min(model) FROM document_passages").fetchone())
for name, pid in (("shelf api", api), ("shelf worker", worker)):
    status = open(f"/proc/{pid}/status").read()
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) // 1024
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) // 1024
    maps, cur = [], None
    for line in open(f"/proc/{pid}/smaps"):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            cur = {"range": line.split()[0], "perms": line.split()[1]} if "model.safetensors" in line else None
            if cur is not None:
                maps.append(cur)
        elif cur is not None and ":" in line:
            k, v = line.split(":", 1)
            if k in ("Size", "Rss", "Pss", "Private_Dirty", "Shared_Clean", "Private_Clean"):
                cur[k] = v.strip()
    print(f"{name} (pid {pid}): VmHWM {hwm} MiB, VmRSS {rss} MiB, model.safetensors mappings: {maps}")
PY
fi
fi

# 2. N documents loaded directly (Cranfield, then recombined Cranfield sentences).
if [[ -n "$N" ]]; then
  BIG="$WORK/big"
  mkdir -p "$BIG"
  "$EXAMPLES/search_corpus" "$BIG" "$N" 2>&1 | tail -1 >&2
  if [[ -n "$MODEL" ]]; then
    IDENTITY=${MODEL_IDENTITY:-}
    [[ -n "$IDENTITY" ]] || IDENTITY=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT model FROM document_passages LIMIT 1').fetchone()[0])" "$DATA/shelf.sqlite")
    "$EXAMPLES/search_vectors" "$BIG" "$IDENTITY" 2>&1 | tail -1 >&2
  fi
  start_api "$BIG"
  echo "## latency, $N documents" && python3 bench/search.py latency --base-url "$BASE" --db "$BIG/shelf.sqlite" "${LAT_ARGS[@]}"
fi
