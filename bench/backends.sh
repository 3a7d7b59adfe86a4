#!/usr/bin/env bash
# Queue throughput on SQLite and on PostgreSQL (issue 12): N documents are imported and queued
# (`shelf import --mode queue`, no worker running), then W `shelf worker` processes drain the
# queue with the mock provider; runs/s = N / (first worker start → last run terminal).
#
#   bash bench/backends.sh DOCS_DIR...         # W = 1 2 4 on both backends
#   N=10000 WORKERS="1 2 4" BACKENDS="sqlite postgres" bash bench/backends.sh DOCS_DIR...
#   SHELF_BIN=/path/to/shelf bash bench/backends.sh DOCS_DIR...   # a given binary, no build
#
# The DOCS_DIRs hold the documents (nested; the first N files over 200 bytes, in path order, are
# copied). The figures in docs/PERFORMANCE.md used the bulk corpus
# (../shared/corpus/fetch-bulk-docs.sh /tmp/bulk-docs, its x/ directory) and the Cranfield
# records written out as text files. PostgreSQL is a
# throwaway cluster started here (initdb + pg_ctl from /usr/lib/postgresql/*/bin, as the
# `postgres` user when run as root), removed at the end. Release build, default settings.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: bench/backends.sh DOCS_DIR..." >&2; exit 2; }
N=${N:-10000}
WORKERS=${WORKERS:-1 2 4}
BACKENDS=${BACKENDS:-sqlite postgres}
TARGET=${CARGO_TARGET_DIR:-target}
if [[ -n ${SHELF_BIN:-} ]]; then
  SHELF=$SHELF_BIN
else
  cargo build --release -p shelf-cli >&2
  SHELF=$(pwd)/$TARGET/release/shelf
fi
WORK=$(mktemp -d /tmp/shelf-backends.XXXX)
chmod 755 "$WORK"
PIDS=()
PG_DATA=$WORK/pg
PG_PORT=${PG_PORT:-55432}
as_pg() { if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  [[ -d $PG_DATA ]] && as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export SHELF_LLM_PROVIDER=mock SHELF_LOG_LEVEL=warn

# The same N documents for every configuration.
DOCS=$WORK/docs
mkdir -p "$DOCS"
i=0
find "$@" -type f -size +200c | sort >"$WORK/all-files"
head -n "$N" "$WORK/all-files" | while read -r from; do
  i=$((i + 1)); cp "$from" "$DOCS/$(printf %06d $i)-$(basename "$from")"
done
echo "documents: $(ls "$DOCS" | wc -l) files, $(du -sh "$DOCS" | cut -f1)" >&2

if [[ " $BACKENDS " == *" postgres "* ]]; then
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  mkdir -p "$PG_DATA"
  [[ $(id -u) == 0 ]] && chown postgres "$PG_DATA"
  as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust --no-locale -E UTF8 >/dev/null
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -w -l "$PG_DATA/log" \
    -o "-p $PG_PORT -k $PG_DATA -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=128MB" start >/dev/null
fi

pending() { # backend data-dir db-name -> runs not yet terminal
  if [[ $1 == sqlite ]]; then
    python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT count(*) FROM runs WHERE status IN ('queued','running')\").fetchone()[0])" "$2/shelf.sqlite"
  else
    psql -qtA -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$3" -c "SELECT count(*) FROM runs WHERE status IN ('queued','running')"
  fi
}

printf '| backend | workers | runs | seconds | runs/s | peak RSS per worker (MiB) |\n|---|---:|---:|---:|---:|---:|\n'
for backend in $BACKENDS; do
  for w in $WORKERS; do
    data=$WORK/data-$backend-$w
    db=shelf_bench_$w
    unset SHELF_DATABASE_URL
    if [[ $backend == postgres ]]; then
      psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "CREATE DATABASE $db" postgres
      export SHELF_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/$db"
    fi
    # Exit code 1 means some files failed to convert (hostile or unsupported ones): their
    # documents have no run, the rest are queued.
    SHELF_DATA_DIR=$data "$SHELF" import "$DOCS" --mode queue --output-mode workspace --json >"$data.import.json" 2>"$data.import.err" ||
      [[ $? == 1 ]] || { echo "import failed:" >&2; tail "$data.import.err" >&2; exit 1; }
    total=$(pending "$backend" "$data" "$db")
    start=$(date +%s.%N)
    wpids=()
    for i in $(seq "$w"); do
      SHELF_DATA_DIR=$data "$SHELF" worker >"$data.worker$i.log" 2>&1 &
      wpids+=($!); PIDS+=($!)
    done
    while [[ $(pending "$backend" "$data" "$db") != 0 ]]; do sleep 0.2; done
    end=$(date +%s.%N)
    rss=$(for p in "${wpids[@]}"; do awk '/VmHWM/ { printf "%.0f ", $2 / 1024 }' "/proc/$p/status"; done)
    for p in "${wpids[@]}"; do kill -TERM "$p"; wait "$p" 2>/dev/null || true; done
    python3 -c "import sys; t=float(sys.argv[2])-float(sys.argv[1]); n=int(sys.argv[3]); print(f'| {sys.argv[4]} | {sys.argv[5]} | {n} | {t:.1f} | {n/t:.1f} | {sys.argv[6]} |')" \
      "$start" "$end" "$total" "$backend" "$w" "$rss"
  done
done
