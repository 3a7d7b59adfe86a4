#!/usr/bin/env bash
# Resume check (not a test; the black-box suite kills a 40-file import): a directory import of
# the same mixed files as bench/import.sh, once straight through and once SIGKILLed after
# KILL_AFTER seconds and finished with `--resume`; then compares what the two left: documents,
# the converted tree (names and SHA-256 of every output), and the manifests' summaries.
#
#   BULK=DIR N=1000 bash bench/import_resume.sh      # DIR from fetch-bulk-docs.sh
#
# MODE (default process, local provider), KILL_AFTER (default 4), BIN=PATH as in import.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${CORPUS:-/work/shared/corpus}
TARGET=${CARGO_TARGET_DIR:-target}
if [[ -n "${BIN:-}" ]]; then SHELF=$BIN; else
  cargo build --release -p shelf-cli >&2
  SHELF=$TARGET/release/shelf
fi
MODE=${MODE:-process}
WORK=$(mktemp -d)
trap '[[ -n "${KEEP:-}" ]] && echo "kept $WORK" >&2 || rm -rf "$WORK"' EXIT
export SHELF_LOG_LEVEL=warn OMP_THREAD_LIMIT=1 SHELF_LLM_PROVIDER=local

ROOT=$WORK/root
mkdir -p "$ROOT/mixed"
for d in office pdf transcripts; do cp -r "$CORPUS/$d" "$ROOT/mixed/"; done
if [[ -n "${BULK:-}" ]]; then
  mkdir -p "$ROOT/mixed/bulk"
  head -n "${N:-1000}" "$BULK/FILES.txt" | while read -r f; do
    cp "$BULK/$f" "$ROOT/mixed/bulk/$(echo "$f" | tr / _)"
  done
fi
echo "files: $(find "$ROOT/mixed" -type f | wc -l)" >&2

import() { # data dir, extra args...
  local data=$1; shift
  SHELF_DATA_DIR=$data "$SHELF" import "$ROOT/mixed" --recursive --mode "$MODE" \
    --manifest "$data.manifest.json" --json "$@"
}
state() { # data dir -> what an import leaves, in a comparable form
  local data=$1
  python3 - "$data" <<'PY'
import hashlib, json, os, sqlite3, sys
data = sys.argv[1]
db = sqlite3.connect(f"file:{data}/shelf.sqlite?mode=ro", uri=True)
docs = sorted(r[0] for r in db.execute("SELECT id FROM documents"))
statuses = sorted(db.execute("SELECT status, count(*) FROM documents GROUP BY status").fetchall())
runs = sorted(db.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall())
tree = {}
root = os.path.join(data, "converted")
for d, _, files in os.walk(root):
    for f in files:
        p = os.path.join(d, f)
        if f.endswith(".pages.json"):
            tree[os.path.relpath(p, root)] = "sidecar"
        else:
            tree[os.path.relpath(p, root)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
m = json.load(open(data + ".manifest.json"))
s = m["summary"]
print(json.dumps({"documents": len(docs), "ids": hashlib.sha256("".join(docs).encode()).hexdigest(),
                  "document_statuses": statuses, "run_statuses": runs,
                  "outputs": len(tree), "tree": hashlib.sha256(json.dumps(tree, sort_keys=True).encode()).hexdigest(),
                  "files": s["files"], "failed": s["failed"], "done": s["done"]}))
PY
}

t0=$(date +%s.%N)
import "$WORK/a" >/dev/null || true
t1=$(date +%s.%N)
echo "straight through: $(python3 -c "print(round($t1-$t0,1))") s" >&2

# exec: the background job's pid is the shelf process itself, so the SIGKILL reaches it.
(exec env SHELF_DATA_DIR="$WORK/b" "$SHELF" import "$ROOT/mixed" --recursive --mode "$MODE" \
  --manifest "$WORK/b.manifest.json" --json >/dev/null) &
PID=$!
sleep "${KILL_AFTER:-4}"
kill -KILL "$PID"; wait "$PID" 2>/dev/null || true
echo "killed after ${KILL_AFTER:-4} s: $(python3 -c "import json;print(json.load(open('$WORK/b.manifest.json'))['summary'])")" >&2
import "$WORK/b" --resume > "$WORK/b.resume.json" || true
python3 -c "import json;s=json.load(open('$WORK/b.resume.json'))['summary'];print('resume:', s)" >&2

A=$(state "$WORK/a"); B=$(state "$WORK/b")
echo "uninterrupted: $A"
echo "resumed:       $B"
python3 - "$A" "$B" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
diff = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
print("same result" if not diff else f"DIFFERENT: {diff}")
sys.exit(1 if diff else 0)
PY
