#!/usr/bin/env bash
# Shelf end to end on the bundled example documents, offline: build, ingest and process
# (extract, clean, classify, summarize, index with the offline `local` provider), search.
# Uses a throwaway data directory unless SHELF_DATA_DIR is set.
set -euo pipefail
cd "$(dirname "$0")/.."
# Tesseract, Leptonica, poppler and LibreOffice from Debian (installed when run as root; else
# the apt-get command to run is printed).
scripts/install-system-packages
cargo build --release --quiet -p shelf-cli
shelf="${CARGO_TARGET_DIR:-target}/release/shelf"
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
