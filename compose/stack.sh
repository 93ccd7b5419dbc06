#!/usr/bin/env bash
# Drives the Compose stack for the Makefile (make up, down, approve, deny, escalations,
# logs, ps). Works with `docker compose` (v2) and `docker-compose` (v1.29).
#
# usage: compose/stack.sh env|up|demo|down|ps|logs|audit|escalations|approve ID|deny ID [args...]
#
#   env            create compose/.env (settings) from .env.example unless it exists, and
#                  the secret files under compose/secrets/ (mode 0700) that are missing:
#                  fresh random tokens and database password, empty upstream keys
#   up             start postgres -> migrate -> gateway, wait until the gateway is
#                  healthy, start the agent detached; with the offline demo model, wait
#                  until its deletion is pending as an escalation, print it and how to
#                  approve it, then exit 0 (the agent keeps waiting for the decision)
#   demo           after up: approve the demo's escalation, wait for the agent, show its
#                  output and the audit trail
#   down           stop and remove the containers and networks (VOLUMES=1: volumes too)
#   escalations    ironcurtain escalations list (in the gateway container) [args...]
#   approve ID / deny ID   decide an escalation as the operator [--reason TEXT ...]
#   logs [svc]     follow the logs (default: the agent)
#   audit [args]   ironcurtain audit query --session agent (in the gateway container)
#
# Environment: COMPOSE (default: detected), IC_GATEWAY_IMAGE, IC_AGENT_IMAGE,
# IC_POSTGRES_IMAGE (the Makefile passes its choice), UP_TIMEOUT (seconds, default 180).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
project=ironcurtain
env_file=$here/.env
secrets_dir=$here/secrets
workspaces_dir=$here/workspaces
demo_model=replay:/usr/share/ironcurtain/transcripts/demo.yaml
timeout=${UP_TIMEOUT:-180}

say() { printf 'stack: %s\n' "$*"; }
die() { printf 'stack: error: %s\n' "$*" >&2; exit 1; }

if [[ -z ${COMPOSE:-} ]]; then
  if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"
  elif command -v docker-compose >/dev/null 2>&1; then COMPOSE=docker-compose
  else die "neither 'docker compose' nor 'docker-compose' works"; fi
fi
read -r -a compose_cmd <<<"$COMPOSE"

dc() { "${compose_cmd[@]}" -p "$project" --env-file "$env_file" -f "$here/docker-compose.yml" "$@"; }

random_hex() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }

# env_value prints the value of NAME in compose/.env (last assignment wins, as in Compose).
env_value() { sed -n "s/^$1=//p" "$env_file" | tail -n 1; }

make_env() {
  if [[ -f $env_file ]]; then
    echo "compose/.env exists; keeping it"
  else
    local tmp
    tmp=$(mktemp "$here/.env.XXXXXX")
    chmod 600 "$tmp"
    cp "$here/.env.example" "$tmp"
    mv "$tmp" "$env_file"
    echo "created compose/.env (settings only: images, model, task, port)"
  fi
  make_secrets
}

# write_secret NAME VALUE writes compose/secrets/NAME unless it exists. The directory is
# 0700 (nobody else on the host gets in); the file is 0644 inside it because Compose
# (docker-compose v1: a bind mount) gives it to the containers with the host's owner and
# mode, and their non-root users (the gateway's uid 10001, postgres, the agent) must read it.
write_secret() {
  local file=$secrets_dir/$1 tmp
  [[ -e $file ]] && return 0
  tmp=$(mktemp "$secrets_dir/.$1.XXXXXX")
  printf '%s' "$2" >"$tmp"
  chmod 644 "$tmp"
  mv "$tmp" "$file"
  created+=("$1")
}

# make_secrets writes the missing secret files. A value an older compose/.env still holds
# (before secrets were files) is taken over, so an existing database keeps its password.
make_secrets() {
  local pw created=()
  (umask 077 && mkdir -p "$secrets_dir")
  chmod 700 "$secrets_dir"
  legacy() { [[ -f $env_file ]] && env_value "$1" || true; }
  pw=$(legacy POSTGRES_PASSWORD)
  if [[ -e $secrets_dir/postgres-password ]]; then
    pw=$(cat "$secrets_dir/postgres-password")
  fi
  pw=${pw:-$(random_hex 18)}
  write_secret postgres-password "$pw"
  write_secret database-url "postgres://ironcurtain:$pw@postgres:5432/ironcurtain?sslmode=disable"
  local t
  t=$(legacy IRONCURTAIN_AGENT_TOKEN); write_secret agent-token "${t:-ic-agent-$(random_hex 24)}"
  t=$(legacy IRONCURTAIN_OPERATOR_TOKEN); write_secret operator-token "${t:-ic-operator-$(random_hex 24)}"
  t=$(legacy IRONCURTAIN_METRICS_TOKEN); write_secret metrics-token "${t:-ic-metrics-$(random_hex 24)}"
  t=$(legacy GRAFANA_ADMIN_PASSWORD); write_secret grafana-admin-password "${t:-$(random_hex 16)}"
  # The gateway's upstream credentials: empty (unused) until you put yours in.
  write_secret anthropic-api-key "$(legacy ANTHROPIC_API_KEY)"
  write_secret openai-api-key "$(legacy OPENAI_API_KEY)"
  write_secret github-token "$(legacy GITHUB_TOKEN)"
  if ((${#created[@]} > 0)); then
    echo "created in compose/secrets/ (mode 0700): ${created[*]}"
  else
    echo "compose/secrets/ is complete; keeping it"
  fi
}

# as_gateway_root runs a shell command as root in a throwaway container of the gateway image
# with compose/workspaces/ at /w (no network; only the capabilities to change owners): for a
# directory owned by the gateway's uid that the user may not be able to change.
as_gateway_root() {
  docker run --rm --network none --user 0:0 --cap-drop ALL --cap-add CHOWN --cap-add FOWNER \
    --cap-add DAC_OVERRIDE -v "$workspaces_dir:/w" --entrypoint /bin/sh \
    "${IC_GATEWAY_IMAGE:-ironcurtain/gateway:dev}" -c "$1"
}

# make_workspaces creates compose/workspaces/, the host directory of the gateway's
# session_workspaces.root (gateway.yaml): owned by the gateway's uid 10001, which creates a
# directory per minted session in it, and mode 0711, so that no other user lists it.
# `ironcurtain run` bind-mounts one session's directory into its agent container.
make_workspaces() {
  mkdir -p "$workspaces_dir"
  [[ $(ls -nd "$workspaces_dir" | awk '{ print $1, $3 ":" $4 }') == "drwx--x--x 10001:10001" ]] && return 0
  if [[ $(id -u) == 0 ]]; then
    chown 10001:10001 "$workspaces_dir" && chmod 711 "$workspaces_dir"
  else
    as_gateway_root 'chown 10001:10001 /w && chmod 711 /w' || die "could not give compose/workspaces/ to the gateway's uid 10001"
  fi
  say "created compose/workspaces/ (the gateway's per-session workspaces, owner 10001, mode 0711)"
}

# container_id prints the id of a service's container (empty when there is none).
container_id() { dc ps -q "$1" 2>/dev/null | head -n 1; }

# wait_healthy waits until the gateway's healthcheck passes.
wait_healthy() {
  local id status deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    id=$(container_id gateway)
    if [[ -n $id ]]; then
      status=$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id")
      case $status in
        healthy) return 0 ;;
        exited | dead) break ;;
      esac
      # Docker runs the image's healthcheck every 10 s; probing the same check directly
      # saves most of that interval on start-up.
      if [[ $status == starting ]] && dc exec -T gateway ironcurtain healthcheck --timeout 2s >/dev/null 2>&1; then
        return 0
      fi
    fi
    sleep 2
  done
  echo "the gateway did not become healthy within ${timeout}s; its last log lines:" >&2
  dc logs --tail 40 gateway >&2 || true
  return 1
}

# ops runs `ironcurtain escalations SUB ...` in the gateway container as the operator.
ops() { local sub=$1; shift; dc exec -T gateway ironcurtain escalations "$sub" --token-file /run/secrets/operator_token "$@"; }

# with_database runs ironcurtain in the gateway container with the database URL taken from
# its secret file (inside the container, never on a command line).
with_database() {
  dc exec -T gateway /bin/sh -c 'IRONCURTAIN_DATABASE_URL=$(cat /run/secrets/database_url) && export IRONCURTAIN_DATABASE_URL && exec ironcurtain "$@"' ironcurtain "$@"
}

pending() { ops list --status pending --session agent; }

up() {
  [[ -f $env_file ]] || die "compose/.env is missing (run: compose/stack.sh env, or make up)"
  [[ -f $secrets_dir/agent-token ]] || die "compose/secrets/ is missing (run: compose/stack.sh env, or make up)"
  local start=$SECONDS model
  make_workspaces
  say "starting postgres -> migrate -> gateway ($COMPOSE)"
  dc up -d --remove-orphans postgres migrate gateway
  wait_healthy || die "the gateway is not healthy"
  say "gateway healthy after $((SECONDS - start))s; ops API on http://127.0.0.1:$(env_value IRONCURTAIN_OPS_PORT | grep . || echo 8081)"

  model=$(env_value IRONCURTAIN_MODEL)
  model=${model:-$demo_model}
  say "starting the agent (model $model), detached"
  dc up -d --no-deps --force-recreate agent

  if [[ $model != "$demo_model" ]]; then
    say "the agent runs your task; follow it with: make logs"
    return 0
  fi

  # The demo's last step deletes its note: that must wait for a human.
  local deadline=$((SECONDS + timeout)) list id state
  while ((SECONDS < deadline)); do
    list=$(pending 2>/dev/null || true)
    if [[ $(printf '%s\n' "$list" | awk 'NR > 1 && NF' | wc -l) -gt 0 ]]; then
      break
    fi
    id=$(container_id agent)
    state=$(docker inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$id" 2>/dev/null || echo "missing 1")
    if [[ $state != running* ]]; then
      dc logs --tail 60 agent >&2 || true
      die "the agent stopped ($state) before its deletion was escalated"
    fi
    sleep 1
  done
  if [[ $(printf '%s\n' "$list" | awk 'NR > 1 && NF' | wc -l) -eq 0 ]]; then
    dc logs --tail 60 agent >&2 || true
    die "no escalation became pending within ${timeout}s"
  fi
  local esc_id
  esc_id=$(printf '%s\n' "$list" | awk 'NR == 2 { print $1 }')
  cat <<EOF

The demo agent has written and read a note in /workspace (allowed) and was refused a write
to /etc (denied). Its deletion of the note now waits for a human (escalated):

$list

  make approve ID=$esc_id        approve it (the agent's call runs, the demo ends)
  make deny ID=$esc_id           deny it (the agent is told it was refused)
  make escalations                list pending escalations
  make logs                       follow the agent's output
  make audit                      the audit trail of the session (tool calls, decisions)
  make down                       stop the stack (VOLUMES=1 also deletes its data)

Nobody deciding within the escalation timeout (10 minutes) counts as a denial.
The stack came up in $((SECONDS - start))s.
EOF
}

# demo approves the pending deletion of the demo (after up), waits for the agent to finish
# and shows what it printed and what the audit trail holds.
demo() {
  local id state deadline=$((SECONDS + timeout))
  id=$(pending | awk 'NR == 2 { print $1 }')
  [[ -n $id ]] || die "no pending escalation of session agent (run make up first)"
  say "approving escalation $id as the operator"
  ops approve "$id" --reason "make demo"
  while ((SECONDS < deadline)); do
    state=$(docker inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$(container_id agent)")
    [[ $state == running* ]] || break
    sleep 1
  done
  echo
  echo "---- the agent's output"
  dc logs --no-color agent | sed 's/^[^|]*| //'
  echo "---- the audit trail of session agent (newest first)"
  with_database audit query --session agent --limit 20
  [[ $state == "exited 0" ]] || die "the agent ended with: $state"
  echo "demo: the agent finished (exit 0)"
}

down() {
  if [[ -f $env_file ]]; then
    if [[ ${VOLUMES:-0} == 1 ]]; then dc down --remove-orphans --volumes; else dc down --remove-orphans; fi
    # The session workspaces are data too (owned by the gateway's uid: emptied as it).
    if [[ ${VOLUMES:-0} == 1 && -d $workspaces_dir ]]; then
      as_gateway_root 'find /w -mindepth 1 -delete' || say "could not empty compose/workspaces/"
    fi
  else
    # No compose/.env: nothing can be running that this file did not start.
    "${compose_cmd[@]}" -p "$project" -f "$here/docker-compose.yml" down --remove-orphans $([[ ${VOLUMES:-0} == 1 ]] && echo --volumes)
  fi
}

cmd=${1:-}
[[ -n $cmd ]] || die "usage: compose/stack.sh env|up|down|ps|logs|escalations|approve ID|deny ID"
shift
case $cmd in
  env) make_env ;;
  up) up ;;
  demo) demo ;;
  down) down ;;
  ps) dc ps ;;
  logs) dc logs -f --tail 200 "${@:-agent}" ;;
  escalations) ops list "$@" ;;
  approve | deny)
    [[ $# -ge 1 && -n $1 ]] || die "usage: make $cmd ID=<escalation id>"
    ops "$cmd" "$@"
    ;;
  audit) with_database audit query --session agent "$@" ;;
  *) die "unknown command \"$cmd\"" ;;
esac
