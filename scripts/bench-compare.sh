#!/usr/bin/env bash
# make bench-compare: the hot-path benchmarks of this tree against a pinned baseline commit,
# in one run (docs/performance.md, "Running a baseline comparison").
# Builds each listed package's test binary in both trees (the baseline extracted with
# `git archive` into a temporary directory, never into the tree), runs them interleaved
# REPS times (the order of the two sides alternates, so a slow spell of the machine falls on
# both alike), and prints one table: new/base ratio of the medians first, then each side's
# min–median–max; a cost metric more than 10 % slower is marked SLOWER.
#
# Environment: GO, BASE (a commit; default: the one in scripts/bench-baseline), REPS (default 5),
# BENCH_FILTER (a regexp: only list entries whose package or benchmark matches),
# BENCH_FAIL=1 (exit 1 when a row is SLOWER), BENCH_KEEP=1 (keep the temporary directory).
set -euo pipefail

go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
base=${BASE:-$(tr -d '[:space:]' <"$root/scripts/bench-baseline")}
reps=${REPS:-5}
filter=${BENCH_FILTER:-.}

# package (under gateway/) ; benchmark regexp ; -benchtime: the rows of issue-level figures
# (docs/performance.md): policy, hub, MCP over HTTP, relays, egress, git door, audit, scanning.
benches=(
  "policy;^BenchmarkEvaluate(FetchURL|FetchURLUnlisted|DynamicList|NoPathRoles)$;2000x"
  "internal/doors/mcphub;^Benchmark(HubOverheadMedian|MCPOverHTTPShare)$;2000x"
  "internal/doors/githubrelay;^BenchmarkRelayOverhead$;2000x"
  "internal/doors/llmrelay;^BenchmarkRelayOverhead$;2000x"
  "internal/doors/egress;^BenchmarkConnectFirstByte$;2000x"
  "internal/doors/githttp;^BenchmarkPush$;5x"
  "internal/audit;^BenchmarkJSONLRecordDecision$;5000x"
  "secretscan;^BenchmarkScanSource$;2000x"
)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")
if [[ ${BENCH_KEEP:-} == 1 ]]; then
  echo "bench-compare: keeping $tmp" >&2
else
  trap 'rm -rf "$tmp"' EXIT
fi

cd "$root"
git rev-parse --verify --quiet "$base^{commit}" >/dev/null || {
  echo "bench-compare: baseline $base is not a commit here (fetch it, or set BASE)" >&2
  exit 1
}
mkdir -p "$tmp/base" "$tmp/bin"
git archive "$base" | tar -x -C "$tmp/base"
echo "bench-compare: baseline $(git log -1 --format='%h %s' "$base")" >&2
echo "bench-compare: this tree $(git log -1 --format='%h' HEAD)$(git diff --quiet HEAD || echo ' + uncommitted changes')" >&2

# build SIDE TREE INDEX PKG: the package's test binary, or nothing when that tree lacks it.
build() {
  local side=$1 tree=$2 i=$3 pkg=$4
  if [[ -d $tree/gateway/$pkg ]] && (cd "$tree/gateway" && "$go" test -c -o "$tmp/bin/$side-$i.test" "./$pkg") 2>"$tmp/build-$side-$i.log"; then
    return 0
  fi
  echo "bench-compare: $side: no test binary for gateway/$pkg (see $tmp/build-$side-$i.log)" >&2
}

selected=()
for i in "${!benches[@]}"; do
  IFS=';' read -r pkg re bt <<<"${benches[$i]}"
  [[ $pkg =~ $filter || $re =~ $filter ]] || continue
  selected+=("$i")
  build base "$tmp/base" "$i" "$pkg"
  build new "$root" "$i" "$pkg"
done
[[ ${#selected[@]} -gt 0 ]] || { echo "bench-compare: no benchmark matches BENCH_FILTER=$filter" >&2; exit 1; }

echo "bench-compare: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $reps repetitions" >&2
: >"$tmp/base.txt"
: >"$tmp/new.txt"
for ((r = 1; r <= reps; r++)); do
  order="base new"
  ((r % 2 == 0)) && order="new base"
  for i in "${selected[@]}"; do
    IFS=';' read -r pkg re bt <<<"${benches[$i]}"
    for side in $order; do
      bin=$tmp/bin/$side-$i.test
      [[ -x $bin ]] || continue
      tree=$root
      [[ $side == base ]] && tree=$tmp/base
      (cd "$tree/gateway/$pkg" && "$bin" -test.run '^$' -test.bench "$re" -test.benchtime "$bt" -test.benchmem) >>"$tmp/$side.txt" 2>&1 ||
        echo "bench-compare: $side gateway/$pkg failed in repetition $r (output in $tmp/$side.txt)" >&2
    done
  done
  echo "bench-compare: repetition $r of $reps done" >&2
done
echo "bench-compare: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

fail=()
[[ ${BENCH_FAIL:-} == 1 ]] && fail=(-fail)
(cd "$root/gateway" && "$go" run ./cmd/benchtable "${fail[@]}" "$tmp/base.txt" "$tmp/new.txt")
