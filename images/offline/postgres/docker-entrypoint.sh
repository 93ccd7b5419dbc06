#!/usr/bin/env bash
# Entrypoint of ironcurtain/postgres-offline: on the first start (empty PGDATA) it runs
# initdb, sets the superuser password, creates POSTGRES_DB and runs
# /docker-entrypoint-initdb.d, then it replaces itself with the server, which therefore
# receives the container's signals as PID 1. Compatible with the official image for:
#   POSTGRES_PASSWORD (required unless POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_USER
#   (default postgres), POSTGRES_DB (default $POSTGRES_USER), POSTGRES_INITDB_ARGS,
#   POSTGRES_HOST_AUTH_METHOD (default scram-sha-256), and VAR_FILE for each VAR.
# Started as root (e.g. a bind-mounted PGDATA), it fixes ownership and drops to postgres.
set -Eeuo pipefail
shopt -s nullglob

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" "$*"; }
die() { log "error: $*" >&2; exit 1; }

# file_env VAR [DEFAULT]: VAR comes from the environment, or from the file named by
# VAR_FILE (Docker secrets), or DEFAULT. Setting both is an error.
file_env() {
  local var=$1 default=${2:-} file_var="${1}_FILE" value
  if [[ -n ${!var:-} && -n ${!file_var:-} ]]; then
    die "both $var and $file_var are set; set only one"
  fi
  value=$default
  if [[ -n ${!var:-} ]]; then
    value=${!var}
  elif [[ -n ${!file_var:-} ]]; then
    [[ -r ${!file_var} ]] || die "$file_var names ${!file_var}, which is not readable"
    value=$(<"${!file_var}")
  fi
  export "$var=$value"
  unset "$file_var"
}

if [[ ${1:-} == -* ]]; then
  set -- postgres "$@"
fi
if [[ ${1:-} != postgres ]]; then
  exec "$@"
fi

if [[ $(id -u) == 0 ]]; then
  install -d -o postgres -g postgres -m 0700 "$PGDATA"
  find "$PGDATA" \! -user postgres -exec chown postgres:postgres '{}' +
  install -d -o postgres -g postgres -m 3777 /var/run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

mkdir -p "$PGDATA"
chmod 0700 "$PGDATA" 2>/dev/null || true

initialise() {
  file_env POSTGRES_PASSWORD
  file_env POSTGRES_USER postgres
  file_env POSTGRES_DB "$POSTGRES_USER"
  file_env POSTGRES_INITDB_ARGS
  local auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
  case $auth in
    trust | password | md5 | scram-sha-256) ;;
    *) die "POSTGRES_HOST_AUTH_METHOD=$auth is not one of trust, password, md5, scram-sha-256" ;;
  esac
  if [[ -z $POSTGRES_PASSWORD && $auth != trust ]]; then
    die "POSTGRES_PASSWORD is not set: the database would refuse every network login. Set POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE), or POSTGRES_HOST_AUTH_METHOD=trust for throw-away test databases only"
  fi

  local -a initdb_args=(--username="$POSTGRES_USER" --encoding=UTF8 --locale=C.UTF-8
    --auth-local=trust --auth-host="$auth")
  local pwfile=
  if [[ -n $POSTGRES_PASSWORD ]]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb_args+=(--pwfile="$pwfile")
  fi
  log "initialising a new database cluster in $PGDATA"
  # POSTGRES_INITDB_ARGS is split on spaces, as in the official image; later options win.
  # shellcheck disable=SC2086
  initdb "${initdb_args[@]}" $POSTGRES_INITDB_ARGS
  [[ -z $pwfile ]] || rm -f "$pwfile"
  printf '\n# Added by docker-entrypoint.sh: connections from any address.\nhost all all all %s\n' \
    "$auth" >>"$PGDATA/pg_hba.conf"

  # A temporary server on the Unix socket only: nobody can connect over the network (and
  # a TCP health check stays red) until initialisation is complete.
  pg_ctl --pgdata="$PGDATA" --wait --timeout=120 \
    --options="-c listen_addresses='' -p 5432" start
  local -a psql=(psql --no-psqlrc --no-password --set=ON_ERROR_STOP=1 --username="$POSTGRES_USER")
  if [[ $POSTGRES_DB != postgres ]]; then
    log "creating database $POSTGRES_DB"
    "${psql[@]}" --dbname=postgres --set=db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
  fi
  local f
  for f in /docker-entrypoint-initdb.d/*; do
    case $f in
      *.sh)
        if [[ -x $f ]]; then
          log "running $f"
          "$f"
        else
          log "sourcing $f"
          # shellcheck disable=SC1090
          . "$f"
        fi
        ;;
      *.sql) log "running $f"; "${psql[@]}" --dbname="$POSTGRES_DB" --file="$f" ;;
      *.sql.gz) log "running $f"; gzip -dc "$f" | "${psql[@]}" --dbname="$POSTGRES_DB" ;;
      *) log "ignoring $f" ;;
    esac
  done
  pg_ctl --pgdata="$PGDATA" --wait --mode=fast stop
  unset POSTGRES_PASSWORD
  log "PostgreSQL init process complete; ready for start up."
}

if [[ ! -s $PGDATA/PG_VERSION ]]; then
  initialise
else
  log "PostgreSQL database directory appears to contain a database; skipping initialisation"
fi

exec "$@"
