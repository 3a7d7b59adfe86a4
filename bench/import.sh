#!/usr/bin/env bash
# Import benchmark (not a test): files/s and peak RSS of a directory import of mixed real
# documents, `processing_mode` none and process (local provider), through `shelf import` and
# through `POST /imports` on `shelf api`.
#
#   bash bench/import.sh                     # /work/shared/corpus (office, PDF, transcripts)
#   BULK=DIR N=2000 bash bench/import.sh     # plus N files of a bulk corpus fetched with
#                                            # /work/shared/corpus/fetch-bulk-docs.sh DIR
#
# Release build, loopback only, a fresh data directory per case, a manifest written after
# every file (as a real import would), outputs in workspace mode. Temporary directories are
# removed at the end (KEEP=1 keeps them). BIN=PATH uses that binary instead of building.
# Prints a Markdown table; see docs/PERFORMANCE.md.
set -euo pipefail
cd "$(dirname "$0")/.."

CORPUS=${CORPUS:-/work/shared/corpus}
TARGET=${CARGO_TARGET_DIR:-target}
if [[ -n "${BIN:-}" ]]; then SHELF=$BIN; else
  cargo build --release -p shelf-cli >&2
  SHELF=$TARGET/release/shelf
fi

source bench/workdir.sh
export SHELF_LOG_LEVEL=warn OMP_THREAD_LIMIT=1

# The import root: the corpus's documents (not its hostile files or page scans), then bulk.
ROOT=$WORK/root
mkdir -p "$ROOT/mixed"
for d in office pdf transcripts; do cp -r "$CORPUS/$d" "$ROOT/mixed/"; done
if [[ -n "${BULK:-}" ]]; then
  mkdir -p "$ROOT/mixed/bulk"
  head -n "${N:-2000}" "$BULK/FILES.txt" | while read -r f; do
    cp "$BULK/$f" "$ROOT/mixed/bulk/$(echo "$f" | tr / _)"
  done
fi
FILES=$(find "$ROOT/mixed" -type f | wc -l)
BYTES=$(du -sb "$ROOT/mixed" | cut -f1)
echo "corpus: $FILES files, $BYTES bytes" >&2

now() { date +%s.%N; }
rate() { python3 -c "import sys; n,t=int(sys.argv[1]),float(sys.argv[2]); print(f'{n/t:.1f}')" "$1" "$2"; }

echo "| front end | processing_mode | files | converted | failed | seconds | files/s | peak RSS (MiB) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for mode in none process; do
  # CLI: one process, peak RSS from GNU time.
  data=$WORK/cli-$mode
  SHELF_DATA_DIR=$data SHELF_LLM_PROVIDER=local "$SHELF" migrate >/dev/null
  start=$(now)
  SHELF_DATA_DIR=$data SHELF_LLM_PROVIDER=local /usr/bin/time -f "%M" -o "$WORK/rss" \
    "$SHELF" import "$ROOT/mixed" --recursive --mode "$mode" --manifest "$WORK/cli-$mode.json" \
    --json >"$WORK/cli-$mode.out" || true
  secs=$(python3 -c "print(round($(now) - $start, 2))")
  read -r converted failed < <(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['summary']; print(s['converted'], s['failed'])" "$WORK/cli-$mode.out")
  rss=$(( $(tail -n 1 "$WORK/rss") / 1024 ))
  echo "| shelf import | $mode | $FILES | $converted | $failed | $secs | $(rate "$FILES" "$secs") | $rss |"

  # API: the server's peak RSS (VmHWM) after the request.
  data=$WORK/api-$mode
  SHELF_DATA_DIR=$data SHELF_LLM_PROVIDER=local "$SHELF" migrate >/dev/null
  SHELF_DATA_DIR=$data SHELF_LLM_PROVIDER=local SHELF_API_IMPORT_ROOT=$ROOT \
    SHELF_API_MAX_IMPORT_FILES=100000 "$SHELF" api --port 0 >"$data.api.out" 2>"$data.api.err" &
  pid=$!
  PIDS+=($pid)
  BASE=""
  for _ in $(seq 1 200); do
    BASE=$(sed -n 's/^shelf api listening on //p' "$data.api.out" 2>/dev/null)
    [[ -n "$BASE" ]] && break
    sleep 0.1
  done
  [[ -n "$BASE" ]] || { echo "shelf api did not start:" >&2; cat "$data.api.err" >&2; exit 1; }
  start=$(now)
  curl -sS --max-time 3600 -H 'content-type: application/json' \
    -d "{\"source_dir\": \"mixed\", \"recursive\": true, \"processing_mode\": \"$mode\", \"manifest_path\": \"api-$mode.json\"}" \
    "$BASE/imports" >"$WORK/api-$mode.out"
  secs=$(python3 -c "print(round($(now) - $start, 2))")
  read -r converted failed < <(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['summary']; print(s['converted'], s['failed'])" "$WORK/api-$mode.out")
  rss=$(( $(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status") / 1024 ))
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  echo "| POST /imports | $mode | $FILES | $converted | $failed | $secs | $(rate "$FILES" "$secs") | $rss |"
done
