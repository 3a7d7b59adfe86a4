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
# Release build (PROFILE=debug uses the debug build: enough for relevance, not for latency),
# loopback only, mock provider, temporary data directories removed at the end (KEEP=1 keeps
# them). Prints Markdown tables and JSON lines; see docs/PERFORMANCE.md and docs/search.md.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-}
PG=${SHELF_DATABASE_URL:-}
PROFILE=${PROFILE:-release}
TARGET=${CARGO_TARGET_DIR:-target}
if [[ "$PROFILE" == release ]]; then
  cargo build --release -p shelf-cli >&2
else
  cargo build -p shelf-cli >&2
fi
SHELF=$TARGET/$PROFILE/shelf
[[ -z "$N" ]] || cargo build --release -p shelf-documents --example search_corpus >&2

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  [[ -n "${KEEP:-}" ]] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
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
SHELF_DATA_DIR="$DATA" "$SHELF" migrate >/dev/null
start_api "$DATA"
SHELF_DATA_DIR="$DATA" "$SHELF" worker >"$WORK/worker.out" 2>"$WORK/worker.err" &
PIDS+=($!)
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
    SHELF_DATABASE_URL="$BIG_URL" "$TARGET/release/examples/search_corpus" "$BIG" "$N" 2>&1 | tail -1 >&2
    SHELF_DATABASE_URL="$BIG_URL" start_api "$BIG"
    echo "## latency, $N documents, PostgreSQL" && python3 bench/search.py latency --base-url "$BASE" --documents "$N"
    psql -qtA "$BIG_URL" -c "SELECT 'index sizes: search_cleaned ' || pg_size_pretty(pg_total_relation_size('search_cleaned')) || ', search_raw ' || pg_size_pretty(pg_total_relation_size('search_raw')) || ', database ' || pg_size_pretty(pg_database_size(current_database()))"
  fi
  exit 0
fi
echo "## nDCG@10, Cranfield" && python3 bench/search.py ndcg --base-url "$BASE" --raw-db "$DATA/shelf.sqlite"
echo "## latency, Cranfield" && python3 bench/search.py latency --base-url "$BASE" --db "$DATA/shelf.sqlite"

# 2. N documents loaded directly (Cranfield, then recombined Cranfield sentences).
if [[ -n "$N" ]]; then
  BIG="$WORK/big"
  mkdir -p "$BIG"
  "$TARGET/release/examples/search_corpus" "$BIG" "$N" 2>&1 | tail -1 >&2
  start_api "$BIG"
  echo "## latency, $N documents" && python3 bench/search.py latency --base-url "$BASE" --db "$BIG/shelf.sqlite"
fi
