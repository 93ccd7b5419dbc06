#!/usr/bin/env bash
# make bench-mcp-load: audited MCP calls/s through the real gateway binary, this tree's against a
# baseline's (docs/performance.md, "Audited MCP calls/s"). Builds `ironcurtain` from this tree and
# from the baseline commit (extracted with `git archive` into a temporary directory, never into
# the tree), builds the harness (gateway/cmd/benchmcp) and runs both binaries in turn, alternating
# which goes first, against a Postgres container from the offline image (testcontainers).
#
# Environment: GO, BASE (a commit; default: scripts/bench-baseline), BENCH_MCP_ARGS (harness flags,
# default "-sessions 1,256 -reps 3 -duration 10s"), IC_POSTGRES_IMAGE (default the offline image).
set -euo pipefail

go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
base=${BASE:-$(tr -d '[:space:]' <"$root/scripts/bench-baseline")}
export TESTCONTAINERS_RYUK_DISABLED=true
export IC_POSTGRES_IMAGE=${IC_POSTGRES_IMAGE:-ironcurtain/postgres-offline:15}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-mcp-load.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! git -C "$root" cat-file -e "$base^{commit}" 2>/dev/null; then
  echo "bench-mcp-load: baseline $base is not a commit here (fetch it, or set BASE)" >&2
  exit 1
fi
mkdir -p "$tmp/base" "$tmp/bin"
git -C "$root" archive "$base" | tar -x -C "$tmp/base"
echo "bench-mcp-load: building base $base and this tree" >&2
(cd "$tmp/base" && "$go" build -o "$tmp/bin/ironcurtain-base" ./gateway/cmd/ironcurtain)
(cd "$root" && "$go" build -o "$tmp/bin/ironcurtain-new" ./gateway/cmd/ironcurtain)
(cd "$root" && "$go" build -o "$tmp/bin/benchmcp" ./gateway/cmd/benchmcp)

echo "bench-mcp-load: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $("$go" version)" >&2
cd "$root"
# shellcheck disable=SC2086 # BENCH_MCP_ARGS is a list of flags
"$tmp/bin/benchmcp" -bin "base=$tmp/bin/ironcurtain-base" -bin "new=$tmp/bin/ironcurtain-new" \
  -dir "$tmp/run" ${BENCH_MCP_ARGS:--sessions 1,256 -reps 3 -duration 10s}
echo "bench-mcp-load: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
