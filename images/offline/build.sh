#!/usr/bin/env bash
# Builds the offline images from Debian's packages, for machines without a container
# registry:
#
#   ironcurtain/base-offline:bookworm   debootstrap minbase + git, openssh-client,
#                                       ca-certificates; user ironcurtain (uid 10001)
#   ironcurtain/postgres-offline:15     Debian's PostgreSQL 15 on that base, started like
#                                       the official postgres image (see postgres/)
#
# usage: build.sh [--force] [base|postgres|all]     (default: all)
#
# Each image carries the label dev.ironcurtain.inputs-hash: the SHA-256 of everything
# its build reads from this directory (and, for postgres, the base image ID). When the
# image exists with the same hash nothing is rebuilt, so a second run is a no-op.
# --force (or FORCE=1) rebuilds anyway, e.g. to pick up Debian security updates.
#
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian),
# DEBIAN_SECURITY_MIRROR (default http://deb.debian.org/debian-security),
# OFFLINE_BASE_IMAGE and OFFLINE_POSTGRES_IMAGE (other tags than the two above).
# Needs root (or password-less sudo) for debootstrap and a reachable Docker daemon.
# Only the classic builder is used: no BuildKit, no registry, nothing is pulled.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

suite=bookworm
base_tag=${OFFLINE_BASE_IMAGE:-ironcurtain/base-offline:bookworm}
postgres_tag=${OFFLINE_POSTGRES_IMAGE:-ironcurtain/postgres-offline:15}
base_packages=git,openssh-client,ca-certificates
app_uid=10001
label=dev.ironcurtain.inputs-hash
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
force=${FORCE:-0}
[[ $force == 0 || $force == 1 ]] || force=1

log() { printf 'offline-images: [%3ds] %s\n' "$SECONDS" "$*"; }
die() { printf 'offline-images: error: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

what=all
while (($#)); do
  case $1 in
    --force) force=1 ;;
    base | postgres | all) what=$1 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument \"$1\" (usage: build.sh [--force] [base|postgres|all])" ;;
  esac
  shift
done

# as_root runs a command as root: directly, or through password-less sudo.
as_root() {
  if ((EUID == 0)); then
    "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    die "building the base image needs root for debootstrap: run as root or allow password-less sudo"
  fi
}

# image_hash prints the inputs-hash label of an image, or nothing when it does not exist.
image_hash() {
  docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$1" 2>/dev/null || true
}

# up_to_date reports whether image $1 exists with inputs hash $2 (and --force is off).
up_to_date() {
  [[ $force == 0 && "$(image_hash "$1")" == "$2" ]]
}

# drop_replaced removes the image ID $1 when a rebuild left it without a tag; best effort
# (a container may still use it).
drop_replaced() {
  local old=$1 tag=$2 new
  new=$(docker image inspect --format '{{.Id}}' "$tag")
  if [[ -n $old && $old != "$new" ]]; then
    docker image rm "$old" >/dev/null 2>&1 || true
  fi
}

# run_logged runs a command with its output in $logfile; on failure it shows the tail.
run_logged() {
  local step=$1
  shift
  if ! "$@" >>"$logfile" 2>&1; then
    printf 'offline-images: %s failed; last lines of %s:\n' "$step" "$logfile" >&2
    tail -n 40 "$logfile" >&2
    exit 1
  fi
}

hash_files() {
  (cd "$here" && sha256sum "$@") | sha256sum | cut -d' ' -f1
}

base_hash() {
  # The package list, user and suite are in build.sh itself.
  hash_files build.sh base/dpkg-slim.cfg base/apt-slim.conf
}

workdir=
rootfs=
cleanup() {
  local rc=$?
  if [[ -n $rootfs && -d $rootfs ]]; then
    # Never leave a mount behind (ours, or debootstrap's after it was killed), deepest
    # first, and never cross one while deleting.
    local m
    while read -r m; do
      as_root umount -l "$m" || true
    done < <(findmnt -rn -o TARGET | grep -F "$rootfs/" | sort -r)
    as_root rm -rf --one-file-system "$rootfs" || true
  fi
  if [[ -n $workdir && -d $workdir ]]; then rm -rf "$workdir"; fi
  return $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

build_base() {
  local hash old
  hash=$(base_hash)
  if up_to_date "$base_tag" "$hash"; then
    log "$base_tag is up to date (inputs ${hash:0:12})"
    return
  fi
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install -y debootstrap)"
  [[ -r $keyring ]] || die "$keyring is missing (apt-get install -y debian-archive-keyring); the Release signature is always checked"
  old=$(docker image inspect --format '{{.Id}}' "$base_tag" 2>/dev/null || true)

  workdir=$(mktemp -d "${TMPDIR:-/tmp}/ironcurtain-base.XXXXXX")
  rootfs=$workdir/rootfs
  logfile=$workdir/build.log
  local start=$SECONDS

  # debootstrap needs device nodes that work (it checks the same way): an unprivileged
  # container may create them but not open them. Say so, with the way out, before starting.
  if ! as_root sh -c 'mknod "$1/dev-null-check" c 1 3 && echo check >"$1/dev-null-check"' sh "$workdir" 2>/dev/null; then
    as_root rm -rf "$workdir"
    die "debootstrap cannot work here: device nodes created in $workdir cannot be opened (an unprivileged container?). Build the offline images once where Docker runs, with: make images-offline   (or run this container with --privileged)"
  fi
  as_root rm -f "$workdir/dev-null-check"
  log "building $base_tag: debootstrap $suite minbase + $base_packages from $mirror"
  run_logged debootstrap as_root debootstrap --variant=minbase --keyring="$keyring" \
    --include="$base_packages" "$suite" "$rootfs" "$mirror"

  log "configuring the root filesystem (security updates, user ironcurtain:$app_uid, slimming)"
  as_root install -m 0644 "$here/base/dpkg-slim.cfg" "$rootfs/etc/dpkg/dpkg.cfg.d/ironcurtain-slim"
  as_root install -m 0644 "$here/base/apt-slim.conf" "$rootfs/etc/apt/apt.conf.d/90ironcurtain-slim"
  printf '%s\n' \
    "deb $mirror $suite main" \
    "deb $mirror $suite-updates main" \
    "deb $security_mirror $suite-security main" |
    as_root tee "$rootfs/etc/apt/sources.list" >/dev/null
  as_root mount -t proc proc "$rootfs/proc"
  run_logged "apt-get upgrade" as_root chroot "$rootfs" /usr/bin/env -i \
    PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    sh -ec 'apt-get update; apt-get -y -o Dpkg::Options::=--force-confold upgrade; apt-get clean'
  run_logged "useradd" as_root chroot "$rootfs" /usr/sbin/useradd --uid "$app_uid" --user-group \
    --create-home --home-dir /home/ironcurtain --shell /usr/sbin/nologin ironcurtain
  as_root umount "$rootfs/proc"
  # What the image must not carry: package indexes and caches, logs, the host's resolver
  # and name, documentation the dpkg filter would have excluded.
  as_root sh -ec '
    cd "$1"
    rm -rf var/lib/apt/lists/* var/cache/apt/* var/cache/debconf/*-old var/lib/dpkg/*-old
    find var/log -type f -exec truncate -s 0 {} +
    rm -rf tmp/* var/tmp/* root/.bash_history
    : > etc/resolv.conf
    rm -f etc/hostname
    find usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
    find usr/share/doc -mindepth 1 -type d -empty -delete
    rm -rf usr/share/man/* usr/share/info/* usr/share/groff/* usr/share/lintian/* usr/share/linda/*
    find usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  ' sh "$rootfs"

  log "importing into Docker as $base_tag"
  as_root tar --numeric-owner --xattrs -C "$rootfs" -c . |
    docker import \
      --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      --change "ENV LANG=C.UTF-8" \
      --change 'CMD ["bash"]' \
      --change "LABEL $label=$hash" \
      --change "LABEL org.opencontainers.image.title=\"ironcurtain-base-offline\"" \
      --change "LABEL org.opencontainers.image.description=\"Debian $suite minbase with $base_packages, built by images/offline/build.sh\"" \
      --message "images/offline/build.sh base ($suite)" \
      - "$base_tag" >/dev/null
  drop_replaced "$old" "$base_tag"
  log "built $base_tag in $((SECONDS - start))s ($(docker image inspect --format '{{.Size}}' "$base_tag" | awk '{printf "%.0f MB", $1/1e6}'))"
  cleanup
  workdir= rootfs=
}

build_postgres() {
  local base_id hash old start=$SECONDS
  base_id=$(docker image inspect --format '{{.Id}}' "$base_tag" 2>/dev/null) ||
    die "$base_tag does not exist: build it first (build.sh base)"
  hash=$( (hash_files build.sh postgres/Dockerfile postgres/docker-entrypoint.sh; echo "$base_id") | sha256sum | cut -d' ' -f1)
  if up_to_date "$postgres_tag" "$hash"; then
    log "$postgres_tag is up to date (inputs ${hash:0:12})"
    return
  fi
  old=$(docker image inspect --format '{{.Id}}' "$postgres_tag" 2>/dev/null || true)
  workdir=$(mktemp -d "${TMPDIR:-/tmp}/ironcurtain-postgres.XXXXXX")
  logfile=$workdir/build.log
  log "building $postgres_tag from $base_tag (docker build, classic builder)"
  run_logged "docker build" env DOCKER_BUILDKIT=0 docker build --pull=false \
    --build-arg "BASE_IMAGE=$base_tag" \
    --label "$label=$hash" \
    --tag "$postgres_tag" "$here/postgres"
  drop_replaced "$old" "$postgres_tag"
  log "built $postgres_tag in $((SECONDS - start))s ($(docker image inspect --format '{{.Size}}' "$postgres_tag" | awk '{printf "%.0f MB", $1/1e6}'))"
  rm -rf "$workdir"
  workdir=
}

docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable (docker info failed)"

# One build at a time on this machine: concurrent `make test` runs share the daemon.
lock=${TMPDIR:-/tmp}/ironcurtain-offline-images.lock
exec 9>>"$lock"
if ! flock -n 9; then
  log "another build holds $lock; waiting"
  flock 9
fi

case $what in
  base) build_base ;;
  postgres) build_postgres ;;
  all) build_base; build_postgres ;;
esac
