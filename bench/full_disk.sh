#!/bin/sh
# A full disk (issue 22): on a 48 MiB tmpfs (needs root) filled to 0 bytes free, one document
# stored before, what an upload, `/ready` and a DELETE of that document answer.
#
#   sh bench/full_disk.sh BIN [MIN_FREE_BYTES]    (default 8388608; 0 turns the floor off)
set -eu
BIN=$1
M=$(mktemp -d)
mount -t tmpfs -o size=48m tmpfs "$M"
trap 'kill $API 2>/dev/null; wait $API 2>/dev/null; umount "$M"; rm -rf "$M" "$M.out"' EXIT
export SHELF_DATA_DIR="$M/data" SHELF_LLM_PROVIDER=mock SHELF_LOG_LEVEL=error
export SHELF_MIN_FREE_BYTES="${2:-8388608}"
"$BIN" migrate >/dev/null 2>&1
"$BIN" api --port 0 >"$M.out" 2>/dev/null &
API=$!
while ! grep -q listening "$M.out"; do sleep 0.1; done
BASE=$(sed -n 's/.*listening on //p' "$M.out")
D=$(mktemp -d)
for i in 1 2; do printf 'document %s about wings\n' "$i" >"$D/d$i.txt"; done
ID=$(curl -s -F file=@"$D/d1.txt" "$BASE/documents" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
dd if=/dev/zero of="$M/filler" bs=1M 2>/dev/null || true
echo "free bytes: $(stat -f -c '%a %S' "$M" | awk '{print $1 * $2}')"
echo "upload: $(curl -s -w ' %{http_code}' -F file=@"$D/d2.txt" "$BASE/documents")"
echo "ready: $(curl -s -w ' %{http_code}' "$BASE/ready")"
echo "delete: $(curl -s -w ' %{http_code}' -X DELETE "$BASE/documents/$ID")"
rm -rf "$D"
