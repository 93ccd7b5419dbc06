#!/usr/bin/env bash
# Builds the images third-party MCP servers run in (image: mode, docs/tools.md):
#
#   debian-node | debian-python   (make server-images; any machine with a Debian mirror)
#       Debian's nodejs / python3 on BASE_IMAGE running one dependency-free script baked into
#       the image (SCRIPT; default the e2e echo servers of images/servers/testdata). Default
#       tags ironcurtain/mcp-echo-node:dev, ironcurtain/mcp-echo-python:dev (NODE_SERVER_IMAGE,
#       PYTHON_SERVER_IMAGE). The e2e suite runs them (TestConfinedRuntimeServers).
#   node | python                (make server-image RUNTIME=node|python ...; needs a registry)
#       node:22-slim + npm/npx or python:3.12-slim + uv/uvx with PACKAGE at VERSION installed
#       at build time; the running server reaches no registry. TAG names the image
#       (default ironcurtain/mcp-<runtime>-<package>:<version>).
#
# usage: images/servers/build.sh [--force] debian-node|debian-python|debian|node|python
#                                                   (debian: both Debian variants)
# Environment:
#   BASE_IMAGE     the Debian variants' base (required: make sets it, as for images/build.sh)
#   SCRIPT         the script a Debian variant runs (a path under the repository)
#   PACKAGE, VERSION   the npm / PyPI package and its exact version (node, python)
#   BIN            node: the package's executable when it has several (default: its only
#                  one, or the one named like the package); python: the command (default
#                  the package name)
#   REGISTRY       node: npm registry URL (default https://registry.npmjs.org/);
#                  python: index URL (default https://pypi.org/simple)
#   NODE_IMAGE, PYTHON_IMAGE, UV_VERSION   the upstream bases and uv (defaults in the Dockerfiles)
#
# Cache (Debian variants): the label dev.ironcurtain.inputs-hash is the SHA-256 of the
# Dockerfile, the script, this script and the base image ID; an image with the same hash is
# not rebuilt. --force (or FORCE=1) builds anyway (e.g. for Debian security updates). The
# registry variants are always built: the registry, not this tree, decides what VERSION holds.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

label=dev.ironcurtain.inputs-hash
force=${FORCE:-0}
[[ $force == 0 || $force == 1 ]] || force=1

log() { printf 'server-images: [%3ds] %s\n' "$SECONDS" "$*"; }
die() { printf 'server-images: error: %s\n' "$*" >&2; exit 1; }

what=
while (($#)); do
  case $1 in
    --force) force=1 ;;
    debian-node | debian-python | debian | node | python) what=$1 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument \"$1\" (usage: images/servers/build.sh [--force] debian-node|debian-python|debian|node|python)" ;;
  esac
  shift
done
[[ -n $what ]] || die "say what to build: debian-node, debian-python, debian, node or python (--help)"

docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable (docker info failed)"
if docker buildx version >/dev/null 2>&1; then builder_env=(); else builder_env=(env DOCKER_BUILDKIT=0); fi

image_id() { docker image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }
image_hash() { docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$1" 2>/dev/null || true; }

# docker_build CONTEXT TAG ARGS... builds with the output in a log file shown on failure.
docker_build() {
  local context=$1 tag=$2 logfile old new
  shift 2
  old=$(image_id "$tag")
  logfile=$(mktemp "${TMPDIR:-/tmp}/ironcurtain-server-image.XXXXXX")
  if ! "${builder_env[@]}" docker build "$@" --tag "$tag" "$context" >"$logfile" 2>&1; then
    echo "server-images: docker build of $tag failed; last lines of $logfile:" >&2
    tail -n 40 "$logfile" >&2
    exit 1
  fi
  rm -f "$logfile"
  new=$(image_id "$tag")
  if [[ -n $old && $old != "$new" ]]; then docker image rm "$old" >/dev/null 2>&1 || true; fi
}

# build_debian RUNTIME: the Debian variant on BASE_IMAGE with SCRIPT baked in.
build_debian() {
  local runtime=$1 tag script dockerfile base base_id hash context start=$SECONDS
  base=${BASE_IMAGE:?BASE_IMAGE must name the base image (make server-images sets it)}
  dockerfile=images/servers/$runtime/Dockerfile.debian
  case $runtime in
    node) tag=${NODE_SERVER_IMAGE:-ironcurtain/mcp-echo-node:dev}; script=${SCRIPT:-images/servers/testdata/mcp-echo.js} ;;
    python) tag=${PYTHON_SERVER_IMAGE:-ironcurtain/mcp-echo-python:dev}; script=${SCRIPT:-images/servers/testdata/mcp-echo.py} ;;
  esac
  script=${script#./}
  [[ $script != /* && $script != *..* && -f $script ]] || die "SCRIPT $script: a file under the repository, by a relative path"
  base_id=$(image_id "$base")
  [[ -n $base_id ]] || die "base image $base does not exist (make images-offline builds the offline one; docker pull debian:bookworm-slim)"
  hash=$( {
    sha256sum "$dockerfile" "$script" images/servers/build.sh
    echo "base=$base $base_id script=$script"
  } | sha256sum | cut -d' ' -f1)
  if [[ $force == 0 && "$(image_hash "$tag")" == "$hash" ]]; then
    log "$tag is up to date (inputs ${hash:0:12})"
    return
  fi
  # A small context: the Dockerfile and the script, at their repository paths.
  context=$(mktemp -d "${TMPDIR:-/tmp}/ironcurtain-server-context.XXXXXX")
  cp --parents "$dockerfile" "$script" "$context/"
  log "building $tag (Debian's $runtime on $base, running $script)"
  docker_build "$context" "$tag" --pull=false --file "$context/$dockerfile" \
    --build-arg "BASE_IMAGE=$base" --build-arg "SCRIPT=$script" \
    --label "$label=$hash" --label "org.opencontainers.image.title=ironcurtain-mcp-$runtime-debian"
  rm -rf "$context"
  log "built $tag in $((SECONDS - start))s ($(docker image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
}

# build_registry RUNTIME: PACKAGE@VERSION from the npm registry or PyPI on the upstream image.
build_registry() {
  local runtime=$1 package=${PACKAGE:-} version=${VERSION:-} tag context start=$SECONDS
  [[ -n $package ]] || die "PACKAGE: the $runtime package to install (e.g. $([[ $runtime == node ]] && echo @modelcontextprotocol/server-memory || echo mcp-server-time))"
  [[ -n $version ]] || die "VERSION: the exact version of $package (a pinned version: the image never resolves one at run time)"
  local safe=${package#@}
  safe=${safe//\//-}
  tag=${TAG:-ironcurtain/mcp-$runtime-${safe,,}:$version}
  local -a args=(--build-arg "PACKAGE=$package" --build-arg "VERSION=$version")
  [[ -z ${BIN:-} ]] || args+=(--build-arg "BIN=$BIN")
  [[ -z ${REGISTRY:-} ]] || args+=(--build-arg "REGISTRY=$REGISTRY")
  if [[ $runtime == node ]]; then
    [[ -z ${NODE_IMAGE:-} ]] || args+=(--build-arg "NODE_IMAGE=$NODE_IMAGE")
  else
    [[ -z ${PYTHON_IMAGE:-} ]] || args+=(--build-arg "PYTHON_IMAGE=$PYTHON_IMAGE")
    [[ -z ${UV_VERSION:-} ]] || args+=(--build-arg "UV_VERSION=$UV_VERSION")
  fi
  context=$(mktemp -d "${TMPDIR:-/tmp}/ironcurtain-server-context.XXXXXX")
  cp "images/servers/$runtime/Dockerfile" "$context/Dockerfile"
  log "building $tag ($package@$version from the registry)"
  docker_build "$context" "$tag" "${args[@]}" --label "org.opencontainers.image.title=ironcurtain-mcp-$runtime" \
    --label "dev.ironcurtain.server-package=$package@$version"
  rm -rf "$context"
  log "built $tag in $((SECONDS - start))s; its ID (launcher.yaml's image, pinned): $(image_id "$tag")"
}

# One build at a time on this machine.
lock=${TMPDIR:-/tmp}/ironcurtain-server-images.lock
exec 9>>"$lock"
if ! flock -n 9; then
  log "another build holds $lock; waiting"
  flock 9
fi

case $what in
  debian-node) build_debian node ;;
  debian-python) build_debian python ;;
  debian) build_debian node; build_debian python ;;
  node | python) build_registry "$what" ;;
esac
