#!/usr/bin/env bash
# make bench-egress: the side-by-side egress benchmark (docs/egress.md, "Performance").
# Builds stripe/smokescreen at a pinned version from the Go module proxy into a temporary
# directory (never into the tree), builds the harness (gateway/cmd/benchegress),
# and runs direct / ours / a bare relay (the floor) / smokescreen / Debian's Squid on loopback.
#
# Environment: GO (the Go command), SMOKESCREEN_VERSION (default v0.1.0), BENCH_EGRESS_ARGS
# (extra harness flags, e.g. "-reps 5 -idle 2000"), BENCH_EGRESS_KEEP=1 keeps the
# temporary directory (proxy logs, ours' audit file, Squid's configuration).
set -euo pipefail

go=${GO:-go}
version=${SMOKESCREEN_VERSION:-v0.1.0}
root=$(cd "$(dirname "$0")/.." && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-egress.XXXXXX")
chmod 755 "$tmp" # Squid, started as root, runs as its own user and writes its logs below it
if [[ ${BENCH_EGRESS_KEEP:-} == 1 ]]; then
  echo "bench-egress: keeping $tmp" >&2
else
  trap 'rm -rf "$tmp"' EXIT
fi

squid=/usr/sbin/squid
[[ -x $squid ]] || squid=$(command -v squid) || {
  echo "bench-egress: squid is missing (scripts/prereqs.sh bench-egress installs it)" >&2
  exit 1
}

echo "bench-egress: building github.com/stripe/smokescreen@$version into $tmp" >&2
(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod GOBIN="$tmp/bin" "$go" install "github.com/stripe/smokescreen@$version")
(cd "$root" && "$go" build -o "$tmp/bin/benchegress" ./gateway/cmd/benchegress)

echo "bench-egress: $("$tmp/bin/smokescreen" --version 2>&1 | head -n 1); $("$squid" -v | head -n 1); $("$go" version)" >&2
echo "bench-egress: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# shellcheck disable=SC2086 # BENCH_EGRESS_ARGS is a list of flags
"$tmp/bin/benchegress" -smokescreen "$tmp/bin/smokescreen" -squid "$squid" -dir "$tmp/run" ${BENCH_EGRESS_ARGS:-}
echo "bench-egress: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
