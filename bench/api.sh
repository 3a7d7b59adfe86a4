#!/usr/bin/env bash
# Benchmark of the HTTP API (not a test): requests per second and p50/p99 latency of
# GET /documents/{id} and GET /health at concurrency 1 and 64 under wrk, and the throughput of
# one 100 MB upload with the server's peak RSS. Release build, loopback only, bounded in time.
#
#   apt-get install -y wrk      # the load generator (Debian)
#   bash bench/api.sh           # DURATION=10s by default; prints a Markdown table
#
# Everything runs against a temporary data directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
UPLOAD_MB=${UPLOAD_MB:-100}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 2; }
command -v curl >/dev/null || { echo "curl is missing" >&2; exit 2; }

cargo build --release -p shelf-cli >&2
SHELF=target/release/shelf

WORK=$(mktemp -d)
API_PID=""
cleanup() {
  if [[ -n "$API_PID" ]]; then kill -TERM "$API_PID" 2>/dev/null || true; wait "$API_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

export SHELF_DATA_DIR="$WORK/data"
export SHELF_LLM_PROVIDER=mock
export SHELF_LOG_LEVEL=warn
# The upload below must fit (100 MB < 100 MiB, the default), and nothing else is limited.
export SHELF_API_MAX_UPLOAD_BYTES=$((UPLOAD_MB * 1000 * 1000 + 1))
"$SHELF" migrate >/dev/null

"$SHELF" api --port 0 >"$WORK/api.out" 2>"$WORK/api.err" &
API_PID=$!
for _ in $(seq 1 100); do
  grep -q "listening on" "$WORK/api.out" 2>/dev/null && break
  sleep 0.1
done
BASE=$(sed -n 's/^shelf api listening on //p' "$WORK/api.out")
[[ -n "$BASE" ]] || { echo "shelf api did not start:" >&2; cat "$WORK/api.err" >&2; exit 1; }

printf 'A small document for the benchmark.\nIt has two lines.\n' >"$WORK/doc.txt"
DOC=$(curl -sf -F "file=@$WORK/doc.txt" "$BASE/documents" | sed -n 's/.*"id":"\(doc_[0-9a-f]*\)".*/\1/p')
[[ -n "$DOC" ]] || { echo "upload failed" >&2; exit 1; }

# wrk --latency prints "Requests/sec: N" and a distribution with "50%" and "99%" lines.
measure() { # path connections threads
  local out
  out=$(wrk -t"$3" -c"$2" -d"$DURATION" --latency "$BASE$1")
  local rps p50 p99
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  local errors
  errors=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
  printf '| `GET %s` | %s | %s | %s | %s | %s |\n' "$1" "$2" "$rps" "$p50" "$p99" "${errors:-0}"
}

echo "| request | concurrency | requests/s | p50 | p99 | non-2xx |"
echo "|---|---|---|---|---|---|"
measure "/health" 1 1
measure "/health" 64 2
measure "/documents/$DOC" 1 1
measure "/documents/$DOC" 64 2

# One large upload: throughput seen by the client, and the server's peak resident memory
# (VmHWM, the high-water mark since the process started) before and after.
head -c $((UPLOAD_MB * 1000 * 1000)) < <(yes 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.') >"$WORK/big.txt"
hwm() { awk '/^VmHWM:/ {printf "%.1f MiB", $2 / 1024}' "/proc/$API_PID/status"; }
BEFORE=$(hwm)
read -r CODE SECONDS_TOTAL SPEED < <(curl -s -o "$WORK/upload.json" -w '%{http_code} %{time_total} %{speed_upload}\n' \
  -H 'Expect:' -F "file=@$WORK/big.txt" "$BASE/documents")
AFTER=$(hwm)
echo
echo "| upload | status | seconds | MB/s | server peak RSS before | after |"
echo "|---|---|---|---|---|---|"
awk -v c="$CODE" -v t="$SECONDS_TOTAL" -v s="$SPEED" -v mb="$UPLOAD_MB" -v b="$BEFORE" -v a="$AFTER" \
  'BEGIN { printf "| %d MB text file | %s | %.2f | %.1f | %s | %s |\n", mb, c, t, s / 1000000, b, a }'
