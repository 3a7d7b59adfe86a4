#!/usr/bin/env bash
# Embedding throughput (issue 27): all-MiniLM-L6-v2 on the CPU through shelf-embed, passages of
# about WORDS words cut from the Cranfield corpus, embedded with 1 and 2 threads; prints
# passages/s per thread count. Builds the example in release mode (only shelf-embed).
#
#   bash bench/embed.sh      env: PASSAGES (512), WORDS (200), THREADS ("1,2"),
#                                 SHELF_EMBEDDING_MODEL_DIR (default: scripts/fetch-embedding-model),
#                                 CORPUS (../shared/corpus/ir/cranfield/corpus.jsonl)
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${SHELF_EMBEDDING_MODEL_DIR:-$("$HERE/scripts/fetch-embedding-model" | tail -1)}
CORPUS=${CORPUS:-$HERE/../shared/corpus/ir/cranfield/corpus.jsonl}
cd "$HERE"
cargo run --quiet --release -p shelf-embed --example throughput -- \
  "$MODEL" "$CORPUS" "${PASSAGES:-512}" "${WORDS:-200}" "${THREADS:-1,2}"
