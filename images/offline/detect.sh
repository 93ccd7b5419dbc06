#!/usr/bin/env bash
# Decides whether this machine must use the offline images. Prints one line:
#   "1 <reason>"   no container registry is usable: use images/offline
#   "0 <reason>"   a registry answers and the Docker daemon can reach it
# The Makefile calls it once per run when OFFLINE=auto (the default).
#
# Environment: REGISTRY_PROBE_URL (default https://registry-1.docker.io/v2/),
# REGISTRY_PROBE_TIMEOUT in seconds (default 3).
set -uo pipefail

url=${REGISTRY_PROBE_URL:-https://registry-1.docker.io/v2/}
timeout=${REGISTRY_PROBE_TIMEOUT:-3}

# Any HTTP status (Docker Hub answers 401 without a token) means a registry is there;
# "000" means no answer: DNS failure, no route, TLS failure or timeout.
code=$(curl -s -o /dev/null --max-time "$timeout" -w '%{http_code}' "$url" 2>/dev/null)
if [[ ${code:-000} == 000 ]]; then
  echo "1 no registry answered at $url within ${timeout}s"
  exit 0
fi

# The host reaching the registry is not enough: pulls are made by the daemon, which may
# sit behind another network or proxy. `docker search` is answered by the daemon through
# the registry, without pulling anything.
if ! timeout "$((timeout + 7))" docker search --limit 1 debian >/dev/null 2>&1; then
  echo "1 the host reaches $url (HTTP $code) but the Docker daemon cannot search the registry"
  exit 0
fi
echo "0 registry reachable at $url (HTTP $code) from the host and the Docker daemon"
