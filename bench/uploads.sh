#!/usr/bin/env bash
# Uploads alone, with a Rust load client (cli/examples/upload_load.rs) instead of the peer
# bench's Python client, which saturates its one core first: the peer bench's 1,000 documents
# (written out by peer_bench.py's own loader) POSTed to a fresh `shelf api` (+ an idle
# `shelf worker`, as in the peer bench) at concurrency C. Prints the client's JSON line and the
# API's CPU seconds and peak RSS.
#   bash bench/uploads.sh LABEL [BIN] [C=8]    env: OUT (/tmp/uploads), PORT (18392), PYTHON
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
LABEL=$1
BIN=${2:-$HERE/target/release/shelf}
C=${3:-8}
OUT=${OUT:-/tmp/uploads}
PORT=${PORT:-18392}
PYTHON=${PYTHON:-/tmp/bench-venv/bin/python}
LOAD=$HERE/target/release/examples/upload_load
[[ -x $LOAD ]] || cargo build --release -p shelf-cli --example upload_load
DOCS=$OUT/docs
if [[ ! -d $DOCS ]]; then
  mkdir -p "$DOCS"
  "$PYTHON" - "$HERE/../shared/bench/peer_bench.py" "$DOCS" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("peer_bench", sys.argv[1])
pb = importlib.util.module_from_spec(spec); sys.modules["peer_bench"] = pb; spec.loader.exec_module(pb)
for d in pb.load_docs(1000, "auto"):
    open(f"{sys.argv[2]}/{d.name}", "wb").write(d.data)
PY
fi
D=$OUT/data-$LABEL
rm -rf "$D"; mkdir -p "$D"
export SHELF_DATA_DIR=$D SHELF_LLM_PROVIDER=mock SHELF_LOG_LEVEL=warn
"$BIN" migrate >/dev/null
"$BIN" api --port "$PORT" > "$D/api.log" 2>&1 & A=$!
"$BIN" worker > "$D/worker.log" 2>&1 & W=$!
trap 'kill $A $W 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.1; done
cpu() { awk '{ print ($14 + $15) / 100 }' "/proc/$1/stat"; }
before=$(cpu $A)
line=$("$LOAD" "http://127.0.0.1:$PORT" "$DOCS" 1000 "$C")
after=$(cpu $A)
echo "$LABEL: $line api_cpu_s $(python3 -c "print(round($after - $before, 2))") api_peak_rss_mib $(awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' /proc/$A/status)"
