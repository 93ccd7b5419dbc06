#!/usr/bin/env bash
# Builds the gateway and agent images (images/gateway, images/agent):
#
#   ironcurtain/gateway:dev   ironcurtain serve + CLI, git, ssh, the base policy
#   ironcurtain/agent:dev     the credential-less runner on scratch
#   ironcurtain/agent-shell:dev   a Debian shell for off-the-shelf agents: git, gh, curl,
#                             configured to go through the gateway, no credentials
#                             (images/agent-shell, docs/agents.md); apt-get in the build,
#                             so the build's container must reach a Debian mirror
#
# usage: images/build.sh [--force] [gateway|agent|agent-shell|all]     (default: all)
#
# Environment (the Makefile's `images` target sets them):
#   BASE_IMAGE      runtime base (required): debian:bookworm-slim, or
#                   ironcurtain/base-offline:bookworm on a machine without a registry
#   PREBUILT        1: COPY the host's static binaries from build/bin (`make build` first;
#                   offline machines, where containers cannot reach the Go module proxy);
#                   0 (default): compile in the builder stage
#   BUILDER_IMAGE   builder stage (default golang:1.26-bookworm; with PREBUILT=1 the base
#                   image, since the stage only copies a file)
#   GATEWAY_IMAGE, AGENT_IMAGE, AGENT_SHELL_IMAGE   tags (default ironcurtain/gateway:dev,
#                   ironcurtain/agent:dev, ironcurtain/agent-shell:dev)
#   AGENT_SHELL_GATEWAY_URL   the gateway URL baked into the agent shell's /etc/gitconfig
#                   (default http://gateway:8080, the Compose service)
#
# Cache: each image carries the label dev.ironcurtain.inputs-hash, the SHA-256 of what its
# build reads (Dockerfile, binary or sources, policy, config, transcripts, this script, the
# base and builder image IDs and the build arguments). When the image exists with that hash
# nothing is built. --force (or FORCE=1) builds anyway.
#
# With PREBUILT=1 the build context is a small directory (build/image-context/<image>)
# holding only the files the Dockerfile reads, at their repository paths; otherwise it is
# the repository root, filtered by /.dockerignore. The agent shell compiles nothing: its
# context is always the small directory. Its packages are whatever the mirror has when it
# is built: FORCE=1 (or a new base image) picks up updates.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

label=dev.ironcurtain.inputs-hash
base=${BASE_IMAGE:?BASE_IMAGE must name the runtime base image (make images sets it)}
prebuilt=${PREBUILT:-0}
[[ $prebuilt == 0 || $prebuilt == 1 ]] || { echo "images: PREBUILT must be 0 or 1, not \"$prebuilt\"" >&2; exit 2; }
if [[ $prebuilt == 1 ]]; then builder=${BUILDER_IMAGE:-$base}; else builder=${BUILDER_IMAGE:-golang:1.26-bookworm}; fi
gateway_tag=${GATEWAY_IMAGE:-ironcurtain/gateway:dev}
agent_tag=${AGENT_IMAGE:-ironcurtain/agent:dev}
agent_shell_tag=${AGENT_SHELL_IMAGE:-ironcurtain/agent-shell:dev}
agent_shell_gateway=${AGENT_SHELL_GATEWAY_URL:-http://gateway:8080}
force=${FORCE:-0}
[[ $force == 0 || $force == 1 ]] || force=1

log() { printf 'images: [%3ds] %s\n' "$SECONDS" "$*"; }
die() { printf 'images: error: %s\n' "$*" >&2; exit 1; }

what=all
while (($#)); do
  case $1 in
    --force) force=1 ;;
    gateway | agent | agent-shell | all) what=$1 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument \"$1\" (usage: images/build.sh [--force] [gateway|agent|agent-shell|all])" ;;
  esac
  shift
done

docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable (docker info failed)"

# The classic builder when BuildKit (buildx) is missing, as on the offline machine; the
# Dockerfiles work with both.
if docker buildx version >/dev/null 2>&1; then builder_env=(); else builder_env=(env DOCKER_BUILDKIT=0); fi

image_id() { docker image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }
image_hash() { docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$1" 2>/dev/null || true; }

# inputs_of prints, one per line, the repository files image $1 is built from.
inputs_of() {
  local name=$1
  case $name in
    gateway)
      printf '%s\n' images/gateway/Dockerfile images/gateway/gateway.yaml \
        gateway/policies/base/compiled-policy.json gateway/policies/base/dynamic-lists.json \
        gateway/policies/base/tool-annotations.json
      if [[ $prebuilt == 1 ]]; then echo build/bin/ironcurtain; else sources gateway agent migrations; fi
      ;;
    agent)
      echo images/agent/Dockerfile
      find agent/transcripts -type f | LC_ALL=C sort
      if [[ $prebuilt == 1 ]]; then echo build/bin/ironcurtain-agent; else sources agent; fi
      ;;
    agent-shell)
      find images/agent-shell -type f | LC_ALL=C sort
      ;;
  esac
}

# sources lists the Go module files the builder stage compiles (tracked and untracked, not
# ignored; plain find outside a git checkout).
sources() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- "$@" | while read -r f; do [[ -f $f ]] && echo "$f"; done
  else
    find "$@" -type f -not -path '*/testdata/fuzz/*'
  fi | LC_ALL=C sort -u
}

build_one() {
  local name=$1 tag dockerfile hash old context start=$SECONDS base_id builder_id
  case $name in
    gateway) tag=$gateway_tag ;;
    agent) tag=$agent_tag ;;
    agent-shell) tag=$agent_shell_tag ;;
  esac
  dockerfile=images/$name/Dockerfile

  local -a files
  mapfile -t files < <(inputs_of "$name")
  local f
  for f in "${files[@]}"; do
    [[ -f $f ]] || die "$f is missing$([[ $f == build/bin/* ]] && echo ' (run make build, or let make images do it)')"
  done
  base_id=$(image_id "$base")
  builder_id=$(image_id "$builder")
  if [[ $name == agent-shell ]]; then
    # No builder stage: the hash names the base only.
    builder_id=-
    [[ $prebuilt == 0 || -n $base_id ]] || die "base image $base does not exist (make images-offline builds the offline one)"
  elif [[ $prebuilt == 1 ]]; then
    # Nothing is pulled for an offline build: both images must exist.
    [[ -n $base_id ]] || die "base image $base does not exist (make images-offline builds the offline one)"
    [[ -n $builder_id ]] || die "builder image $builder does not exist"
  fi
  hash=$( {
    sha256sum "${files[@]}" images/build.sh .dockerignore
    echo "base=$base $base_id builder=$builder $builder_id prebuilt=$prebuilt"
    if [[ $name == agent-shell ]]; then echo "gateway-url=$agent_shell_gateway"; fi
  } | sha256sum | cut -d' ' -f1)
  if [[ $force == 0 && "$(image_hash "$tag")" == "$hash" ]]; then
    log "$tag is up to date (inputs ${hash:0:12})"
    return
  fi
  old=$(image_id "$tag")

  if [[ $prebuilt == 1 || $name == agent-shell ]]; then
    context=build/image-context/$name
    rm -rf "$context"
    mkdir -p "$context"
    # Hard links when possible: the binaries are large.
    cp --parents -l "${files[@]}" "$context/" 2>/dev/null || cp --parents "${files[@]}" "$context/"
  else
    context=.
  fi

  # Build arguments only the agent shell reads (bash 3.2 safe when empty).
  local -a extra_args=(--build-arg "PREBUILT=$prebuilt")
  if [[ $name == agent-shell ]]; then
    extra_args+=(--build-arg "GATEWAY_URL=$agent_shell_gateway")
  else
    # The build the binaries report when the builder stage compiles (the context has no .git).
    extra_args+=(--build-arg "VERSION=${BUILD_VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}")
    extra_args+=(--build-arg "REVISION=${BUILD_REVISION:-$(git rev-parse HEAD 2>/dev/null || true)}")
  fi
  log "building $tag ($(if [[ $name == agent-shell ]]; then echo "Debian packages through apt-get"; elif [[ $prebuilt == 1 ]]; then echo "host-built binary"; else echo "compiled in $builder"; fi), base $base)"
  local logfile
  logfile=$(mktemp "${TMPDIR:-/tmp}/ironcurtain-image-$name.XXXXXX")
  if ! "${builder_env[@]}" docker build --pull=false \
    --file "$dockerfile" \
    --build-arg "BASE_IMAGE=$base" \
    --build-arg "BUILDER_IMAGE=$builder" \
    "${extra_args[@]}" \
    --label "$label=$hash" \
    --label "org.opencontainers.image.title=ironcurtain-$name" \
    --tag "$tag" "$context" >"$logfile" 2>&1; then
    echo "images: docker build of $tag failed; last lines of $logfile:" >&2
    tail -n 40 "$logfile" >&2
    exit 1
  fi
  rm -f "$logfile"
  if [[ $context != . ]]; then rm -rf "$context"; fi
  local new
  new=$(image_id "$tag")
  if [[ -n $old && $old != "$new" ]]; then
    docker image rm "$old" >/dev/null 2>&1 || true
  fi
  log "built $tag in $((SECONDS - start))s ($(docker image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
}

# One build at a time on this machine (e2e may call `make images` while another runs).
lock=${TMPDIR:-/tmp}/ironcurtain-app-images.lock
exec 9>>"$lock"
if ! flock -n 9; then
  log "another build holds $lock; waiting"
  flock 9
fi

case $what in
  gateway | agent | agent-shell) build_one "$what" ;;
  all) build_one gateway; build_one agent; build_one agent-shell ;;
esac
