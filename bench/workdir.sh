# Sourced by the bench scripts (from the repository's root): WORK, a temporary directory, and
# PIDS, the processes a bench starts; on exit every one of them is stopped (SIGTERM, then
# waited for) and WORK removed, unless KEEP is set.
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  [[ -n "${KEEP:-}" ]] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
