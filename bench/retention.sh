#!/usr/bin/env bash
# Run retention (issue 21): the database after every document of DOCS_DIR has been reprocessed
# ROUNDS times, with retention effectively off and with the default SHELF_RUN_RETENTION=3.
# Each document is imported and queued, then reprocessed round by round through the API
# (`POST /documents/{id}/reprocess` with `processing_mode: queue`, one keep-alive connection),
# each round drained by the API's in-process workers (`shelf api --workers WORKERS`, mock
# provider) before the next starts. Sizes are the database file plus its WAL after a
# `wal_checkpoint(TRUNCATE)`, with the API stopped.
#
#   bash bench/retention.sh [BIN] [DOCS_DIR]
#   env: OUT (work dir, /tmp/retention), ROUNDS (10), WORKERS (4)
#
# Scenarios:
#   off       SHELF_RUN_RETENTION=1000: every run's texts, pages and events stay.
#   off+3     a copy of `off`, then `SHELF_RUN_RETENTION=3 shelf admin db-maintain` (pruning
#             alone: freed pages stay in the file for later writes), then `--vacuum`.
#   3         SHELF_RUN_RETENTION=3 from the start, with `shelf admin db-maintain` after each
#             round (standing in for the API's background pass, which starts every 5 minutes):
#             the file reuses the pages pruning frees, so it stops growing without a vacuum.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$HERE/target/release/shelf}
DOCS=${2:-/tmp/bench-cran-1k}
OUT=${OUT:-/tmp/retention}
ROUNDS=${ROUNDS:-10}
WORKERS=${WORKERS:-4}
mkdir -p "$OUT"

sql() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1], timeout=30).execute(sys.argv[2]).fetchone()[0])" "$1/shelf.sqlite" "$2"; }

# Database file + WAL bytes after a truncating checkpoint, and what is in it.
report() {
  local label=$1 d=$2
  python3 - "$label" "$d/shelf.sqlite" <<'EOF'
import os, sqlite3, sys
label, path = sys.argv[1], sys.argv[2]
c = sqlite3.connect(path, timeout=30)
c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
size = os.path.getsize(path) + (os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0)
one = lambda q: c.execute(q).fetchone()[0]
page = one("PRAGMA page_size")
free = one("PRAGMA freelist_count") * page
print(f"{label:>8}: {size / 2**20:7.1f} MiB (file + WAL; {free / 2**20:.1f} MiB of it free pages, "
      f"{(size - free) / 2**20:.1f} MiB in use); runs {one('SELECT count(*) FROM runs')}, "
      f"texts {one('SELECT count(*) FROM document_texts')}, "
      f"text bytes {one('SELECT coalesce(sum(length(body)), 0) FROM document_texts') / 2**20:.1f} MiB, "
      f"events {one('SELECT count(*) FROM run_events')}, "
      f"page records {one('SELECT count(*) FROM document_pages')}")
EOF
}

drained() {
  while [[ $(sql "$1" "SELECT count(*) FROM runs WHERE status IN ('queued', 'running')") != 0 ]]; do
    sleep 0.2
  done
}

# Reprocesses every document of the import report once, queued, over one connection.
reprocess_all() {
  python3 - "$1" "$2" <<'EOF'
import http.client, json, sys
port, report = sys.argv[1], sys.argv[2]
ids = sorted({f["document_id"] for f in json.load(open(report))["files"] if f.get("document_id")})
conn = http.client.HTTPConnection("127.0.0.1", int(port))
for doc in ids:
    conn.request("POST", f"/documents/{doc}/reprocess", body=json.dumps({"processing_mode": "queue"}),
                 headers={"content-type": "application/json"})
    reply = conn.getresponse()
    reply.read()
    if reply.status != 201:
        sys.exit(f"reprocess {doc}: HTTP {reply.status}")
EOF
}

# scenario LABEL KEEP PRUNE_EACH_ROUND
scenario() {
  local label=$1 keep=$2 prune=$3
  local d=$OUT/$label
  rm -rf "$d"; mkdir -p "$d"
  export SHELF_DATA_DIR=$d SHELF_LLM_PROVIDER=mock SHELF_LOG_LEVEL=warn SHELF_RUN_RETENTION=$keep
  "$BIN" migrate >/dev/null
  # Exit code 1: some files failed to convert; the rest are queued.
  "$BIN" import "$DOCS" --recursive --mode queue --json >"$d/import.json" 2>"$d/import.err" || [[ $? == 1 ]]
  "$BIN" api --port 0 --workers "$WORKERS" >"$d/api.out" 2>"$d/api.log" & local api=$!
  trap "kill $api 2>/dev/null || true" EXIT
  local port=""
  while [[ -z $port ]]; do
    sleep 0.1
    port=$(sed -n 's/^shelf api listening on http:\/\/[^:]*:\([0-9]*\)$/\1/p' "$d/api.out")
  done
  drained "$d"
  local start=$(date +%s.%N)
  for ((round = 1; round <= ROUNDS; round++)); do
    reprocess_all "$port" "$d/import.json"
    drained "$d"
    if [[ $prune == yes ]]; then
      "$BIN" admin db-maintain --json >"$d/maintain-$round.json"
    fi
  done
  local end=$(date +%s.%N)
  kill -TERM "$api"; wait "$api" || true
  trap - EXIT
  echo "$label: $(sql "$d" "SELECT count(*) FROM runs WHERE status = 'succeeded'") runs succeeded over $ROUNDS rounds in $(python3 -c "print(f'{$end - $start:.0f}')") s"
  report "$label" "$d"
}

scenario off 1000 no
rm -rf "$OUT/off+3"; cp -a "$OUT/off" "$OUT/off+3"
export SHELF_DATA_DIR=$OUT/off+3 SHELF_RUN_RETENTION=3
start=$(date +%s.%N)
pruned=$("$BIN" admin db-maintain --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pruned_runs"])')
end=$(date +%s.%N)
echo "off+3: db-maintain pruned $pruned runs in $(python3 -c "print(f'{$end - $start:.1f}')") s"
report "off+3" "$OUT/off+3"
"$BIN" admin db-maintain --vacuum --json >/dev/null
report "vacuumed" "$OUT/off+3"
scenario 3 3 yes
