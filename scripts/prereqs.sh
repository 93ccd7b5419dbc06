#!/usr/bin/env bash
# Installs what `make up`, `make test` and CI need on a fresh Debian/Ubuntu machine, and
# nothing when it is all there (a second run installs and downloads nothing).
#
# usage: scripts/prereqs.sh up|test|ci|bench-egress|go-path
#
#   up       for `make up`: system packages, Go, a Docker daemon that answers, a Compose tool;
#            a missing Docker daemon is an error
#   test     for `make test`: the same; without a Docker daemon the tests that need it skip
#            (a warning), except with CI=true, where it is an error
#   ci       for .ci/run: `test`, then the tool versions
#   bench-egress  for `make bench-egress` only: Go, and Debian's squid (the benchmark's
#            third proxy; never installed for `make test`)
#   go-path  print the Go command to use: `go` when the one on PATH is Go >= 1.26, else the
#            pinned toolchain's path in the cache (installed by the other modes)
#
# What it installs, when missing:
#   - Debian packages: make, git, curl, unzip, gcc and libc6-dev (for -race), flock,
#     sha256sum, debootstrap and the Debian archive keyring (for the offline images),
#     ca-certificates, the Docker client and daemon (docker.io) and docker-compose, and the
#     GitHub CLI (gh: the GitHub relay's tests drive it), Chromium (the console's
#     e2e test drives it headless), and Prometheus (for promtool: the alert rules and a
#     live /metrics are checked with it; the Prometheus service itself is not used);
#   - Go: when Go >= 1.26 is not on PATH, the pinned Go 1.26.8 toolchain from the Go module
#     proxy, checked against its go.sum hash, into ~/.cache/ironcurtain/toolchain.
# Packages are installed as root, or through password-less sudo; otherwise it stops and
# prints the one command to run.
#
# Environment: IC_GO_PROXY (default https://proxy.golang.org), IC_TOOLCHAIN_CACHE.
set -euo pipefail

go_version=1.26.8
go_min_minor=26
# h1 hash (go.sum format) of golang.org/toolchain@v0.0.1-go1.26.8.linux-amd64, as recorded
# by the checksum database (sum.golang.org); a download that does not match is refused.
go_toolchain_h1="h1:ZOmGe1OnfREDMIdb1Qi4G9JSuDPBLGExZMQ4nis1RXM="
go_proxy=${IC_GO_PROXY:-https://proxy.golang.org}
toolchain_cache=${IC_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ironcurtain/toolchain}
goroot=$toolchain_cache/go$go_version

mode=${1:-}
ci=${CI:-}

note() { printf 'prereqs: %s\n' "$*" >&2; }
die() {
  printf 'prereqs: error: %s\n' "$*" >&2
  exit 1
}

# as_root runs a command as root: directly, or through password-less sudo. Without either
# it stops with the command for the user to run.
as_root() {
  if ((EUID == 0)); then
    "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    die "need root (or password-less sudo); run this once, then try again:
    sudo $*"
  fi
}

apt_install() {
  command -v apt-get >/dev/null || die "missing $* and there is no apt-get to install them: install them yourself"
  note "installing: $*"
  if ((EUID != 0)) && ! { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
    die "need root (or password-less sudo) to install $*; run this once, then try again:
    sudo apt-get update && sudo apt-get install -y --no-install-recommends $*"
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

install_packages() {
  local -a missing=()
  local pair cmd pkg
  # command-or-file:package
  for pair in make:make git:git curl:curl unzip:unzip gcc:gcc flock:util-linux \
    sha256sum:coreutils debootstrap:debootstrap \
    /usr/share/keyrings/debian-archive-keyring.gpg:debian-archive-keyring \
    /usr/include/stdlib.h:libc6-dev /etc/ssl/certs/ca-certificates.crt:ca-certificates \
    docker:docker.io gh:gh chromium:chromium promtool:prometheus; do
    cmd=${pair%%:*}
    pkg=${pair#*:}
    if [[ $cmd == /* ]]; then
      [[ -e $cmd ]] || missing+=("$pkg")
    else
      command -v "$cmd" >/dev/null || missing+=("$pkg")
    fi
  done
  if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
    missing+=(docker-compose)
  fi
  ((${#missing[@]} == 0)) || apt_install "${missing[@]}"
}

# go_ok reports whether the Go command $1 is Go 1.<go_min_minor> or newer.
go_ok() {
  local v
  command -v "$1" >/dev/null || return 1
  v=$(GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null) || return 1
  [[ $v =~ ^go1\.([0-9]+) ]] || return 1
  ((BASH_REMATCH[1] >= go_min_minor))
}

# h1_of_tree prints the go.sum "h1:" hash of the files under $1 (relative names), the
# algorithm of golang.org/x/mod/sumdb/dirhash.Hash1.
h1_of_tree() {
  local hex
  hex=$(cd "$1" && find . -type f -printf '%P\0' | LC_ALL=C sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-64)
  printf 'h1:%s\n' "$(printf '%b' "$(sed 's/../\\x&/g' <<<"$hex")" | base64)"
}

install_go() {
  if go_ok go; then
    return
  fi
  if go_ok "$goroot/bin/go"; then
    note "using the cached Go toolchain in $goroot"
    return
  fi
  local tmp module=golang.org/toolchain@v0.0.1-go$go_version.linux-amd64 got
  [[ $(uname -m) == x86_64 ]] || die "Go >= 1.$go_min_minor is missing and the pinned toolchain is linux-amd64 only (this is $(uname -m)): install Go yourself"
  tmp=$(mktemp -d)
  note "downloading Go $go_version from $go_proxy"
  curl -fsSL --retry 3 -o "$tmp/go.zip" "$go_proxy/golang.org/toolchain/@v/v0.0.1-go$go_version.linux-amd64.zip"
  mkdir "$tmp/x"
  unzip -q "$tmp/go.zip" -d "$tmp/x"
  got=$(h1_of_tree "$tmp/x")
  if [[ $got != "$go_toolchain_h1" ]]; then
    rm -rf "$tmp"
    die "the downloaded Go toolchain hashes to $got, not $go_toolchain_h1: refusing it"
  fi
  # Module zips carry no file modes; cmd/go marks these executable when it unpacks them.
  chmod -R a+x "$tmp/x/$module/bin" "$tmp/x/$module/pkg/tool"
  mkdir -p "$toolchain_cache"
  rm -rf "$goroot"
  mv "$tmp/x/$module" "$goroot"
  rm -rf "$tmp"
  go_ok "$goroot/bin/go" || die "the Go toolchain in $goroot does not run"
  note "installed Go $go_version in $goroot"
}

go_path() {
  if go_ok go; then
    echo go
  else
    echo "$goroot/bin/go"
  fi
}

docker_ok() { docker info >/dev/null 2>&1; }

# ensure_docker makes sure the Docker daemon answers, starting it when it is installed but
# down. $1 says whether a missing daemon is an error (1) or a warning (0).
ensure_docker() {
  local required=$1 i
  docker_ok && return
  if command -v dockerd >/dev/null || [[ -x /etc/init.d/docker ]]; then
    note "the Docker daemon does not answer; trying to start it"
    if command -v service >/dev/null && [[ -x /etc/init.d/docker ]]; then
      as_root service docker start >/dev/null 2>&1 || true
    elif command -v systemctl >/dev/null && systemctl list-unit-files docker.service >/dev/null 2>&1; then
      as_root systemctl start docker || true
    fi
    if ! docker_ok && command -v dockerd >/dev/null; then
      note "starting dockerd in the background (log: /var/log/ironcurtain-dockerd.log)"
      as_root sh -c 'nohup dockerd >>/var/log/ironcurtain-dockerd.log 2>&1 &'
    fi
    for i in $(seq 1 30); do
      docker_ok && return
      sleep 1
    done
  fi
  local why
  why=$(docker info 2>&1 | tail -n 1)
  if ((required)); then
    die "the Docker daemon does not answer ($why); start it (for example: sudo service docker start) or check that you may use /var/run/docker.sock"
  fi
  note "WARNING: no Docker daemon ($why); the tests that need it will skip (they fail when CI=true)"
}

versions() {
  local gocmd compose builder
  gocmd=$(go_path)
  "$gocmd" version
  if docker_ok; then
    docker version --format 'docker: client {{.Client.Version}}, engine {{.Server.Version}}, API {{.Server.APIVersion}} (client negotiated {{.Client.APIVersion}})'
  fi
  if docker compose version >/dev/null 2>&1; then
    compose="docker compose (v2): $(docker compose version --short)"
  elif command -v docker-compose >/dev/null; then
    compose="docker-compose (v1 tool): $(docker-compose version --short 2>/dev/null)"
  else
    compose="none"
  fi
  echo "compose: $compose"
  if docker buildx version >/dev/null 2>&1; then
    builder="BuildKit (buildx $(docker buildx version | awk '{print $2}'))"
  else
    builder="classic builder (no buildx)"
  fi
  echo "builder: $builder"
  echo "debootstrap: $(debootstrap --version 2>/dev/null || echo missing)"
  echo "promtool: $(promtool --version 2>/dev/null | head -n 1 || echo missing)"
  echo "make: $(make --version | head -n 1)"
  echo "CI=${ci:-<unset>}; cores: $(nproc); memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
}

case $mode in
  go-path)
    go_path
    ;;
  up)
    install_packages
    install_go
    ensure_docker 1
    ;;
  test)
    install_packages
    install_go
    ensure_docker "$([[ $ci == true ]] && echo 1 || echo 0)"
    ;;
  ci)
    install_packages
    install_go
    ensure_docker "$([[ $ci == true ]] && echo 1 || echo 0)"
    versions
    ;;
  bench-egress)
    install_go
    [[ -x /usr/sbin/squid ]] || command -v squid >/dev/null || apt_install squid
    ;;
  *)
    die "usage: scripts/prereqs.sh up|test|ci|bench-egress|go-path"
    ;;
esac
