#!/usr/bin/env bash
# One `shelf worker` draining a queue it does not share: N documents imported and queued first
# (`shelf import --mode queue`, no worker running), then runs/s = runs / (worker start → last
# run terminal), with the worker's CPU seconds and its context switches per thread kind (from
# /proc/PID/task/*/status). Default settings, mock provider. Used for the third pass of
# docs/PERFORMANCE.md, Throughput (1,046 documents: every tenth file of the scaling set).
#
#   bash bench/drain.sh LABEL [BIN] [DOCS_DIR]     env: OUT (work dir, /tmp/drain)
#
# FROM=DIR starts from a copy of the data directory DIR (a queue imported earlier and not yet
# drained) instead of importing DOCS_DIR, so that two binaries drain the very same queue.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
LABEL=$1
BIN=${2:-$HERE/target/release/shelf}
DOCS=${3:-/tmp/bench-text-1k}
OUT=${OUT:-/tmp/drain}
D=$OUT/$LABEL
rm -rf "$D"; mkdir -p "$D"
export SHELF_DATA_DIR=$D SHELF_LLM_PROVIDER=mock SHELF_LOG_LEVEL=warn
if [[ -n ${FROM:-} ]]; then
  cp -a "$FROM/." "$D/"
else
  "$BIN" migrate >/dev/null
  # Exit code 1: some files failed to convert; the rest are queued.
  "$BIN" import "$DOCS" --recursive --mode queue --json >"$D/import.json" 2>"$D/import.err" || [[ $? == 1 ]]
fi
count() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1], timeout=30).execute(\"SELECT count(*) FROM runs WHERE status IN $2\").fetchone()[0])" "$D/shelf.sqlite"; }
total=$(count x "('queued','running')")
start=$(date +%s.%N)
"$BIN" worker >"$D/worker.log" 2>&1 & W=$!
trap 'kill $W 2>/dev/null || true' EXIT
while [[ $(count x "('queued','running')") != 0 ]]; do sleep 0.05; done
end=$(date +%s.%N)
switches=$(for t in /proc/$W/task/*; do
  printf '%s %s\n' "$(cat "$t/comm")" "$(awk '/ctxt_switches/ { s += $2 } END { print s }' "$t/status")"
done | awk '{ n[$1] += $2; all += $2 } END { for (k in n) printf "%s %d, ", k, n[k]; printf "all %d", all }')
cpu=$(awk '{ print ($14 + $15) / 100 }' "/proc/$W/stat")
rss=$(awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$W/status")
python3 -c "import sys; t=float(sys.argv[2])-float(sys.argv[1]); n=int(sys.argv[3]); print(f'{sys.argv[4]}: {n} runs in {t:.1f} s, {n/t:.1f} runs/s, worker CPU {sys.argv[5]} s ({float(sys.argv[5])*1000/n:.1f} ms per run), peak RSS {sys.argv[6]} MiB, context switches {sys.argv[7]}')" \
  "$start" "$end" "$total" "$LABEL" "$cpu" "$rss" "$switches"
echo "$LABEL: runs by status $(count x "('succeeded')") succeeded, $(count x "('failed')") failed"
