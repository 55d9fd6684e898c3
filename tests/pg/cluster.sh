#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for the tests (docs/store.md, "Testing"):
#
#   tests/pg/cluster.sh start DIR [PORT]   initdb DIR/data if it is new, start it
#   tests/pg/cluster.sh stop DIR           fast shutdown by the postmaster's PID
#   tests/pg/cluster.sh standby DIR PORT PRIMARY_DIR PRIMARY_PORT
#                                          a streaming-replication standby of the
#                                          cluster in PRIMARY_DIR (pg_basebackup -R),
#                                          started; the primary then commits
#                                          synchronously to it
#   tests/pg/cluster.sh promote DIR        the standby becomes a primary
#
# The server listens only on a Unix socket in DIR (no TCP port is taken),
# trusts local connections for the role `unisched` (the role unisched_pw
# must give a password), and runs as an
# unprivileged account: as `nobody` when called by root (PostgreSQL refuses
# to run as root). fsync is off (PG_FSYNC=on in the environment turns it on,
# as the benchmark does): the tests crash the daemon and the server, never
# the machine, and a crashed server recovers from its WAL without it.
# Debian's default cluster is never created or started (scripts/install-deps.sh).
set -euo pipefail
cmd=${1:?usage: $0 start|stop|standby|promote DIR [PORT]}
dir=${2:?usage: $0 start|stop|standby|promote DIR [PORT]}
port=${3:-5432}

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bindir/pg_ctl" ] || { echo "cluster.sh: PostgreSQL's server is not installed: run scripts/install-deps.sh" >&2; exit 1; }

unprivileged() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
  else
    "$@"
  fi
}

start_server() {
  unprivileged "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-k $dir -p $port -c listen_addresses='' -c fsync=${PG_FSYNC:-off} -c max_connections=300" start >/dev/null ||
    { cat "$dir/server.log" >&2; exit 1; }
}

case "$cmd" in
  standby)
    primary_dir=${4:?usage: $0 standby DIR PORT PRIMARY_DIR PRIMARY_PORT}
    primary_port=${5:?usage: $0 standby DIR PORT PRIMARY_DIR PRIMARY_PORT}
    mkdir -p "$dir"
    chmod 0755 "$dir"
    [ "$(id -u)" -ne 0 ] || chown nobody:nogroup "$dir"
    # -R writes primary_conninfo and standby.signal; the application name is
    # what synchronous_standby_names matches.
    unprivileged "$bindir/pg_basebackup" -D "$dir/data" -R -X stream -h "$primary_dir" -p "$primary_port" -U unisched \
      -d "application_name=standby" >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    start_server
    psql -h "$primary_dir" -p "$primary_port" -U unisched -d postgres -qAt \
      -c "ALTER SYSTEM SET synchronous_standby_names = 'standby'" -c "SELECT pg_reload_conf()" >/dev/null
    # Until the standby streams, a synchronous commit would wait.
    for _ in $(seq 600); do
      state=$(psql -h "$primary_dir" -p "$primary_port" -U unisched -d postgres -qAt \
        -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'")
      [ "$state" = sync ] && exit 0
      sleep 0.1
    done
    echo "cluster.sh: the standby in $dir never became synchronous" >&2
    exit 1
    ;;
  promote)
    unprivileged "$bindir/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
    ;;
  start)
    mkdir -p "$dir"
    chmod 0755 "$dir"
    [ "$(id -u)" -ne 0 ] || chown nobody:nogroup "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      unprivileged "$bindir/initdb" -D "$dir/data" -A trust -U unisched -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    # The role unisched_pw must give its password (the tests of
    # store.postgresql.password_file); every other local role is trusted.
    hba="$dir/data/pg_hba.conf"
    if ! grep -q '^local all unisched_pw scram-sha-256' "$hba"; then
      { echo "local all unisched_pw scram-sha-256"; cat "$hba"; } >"$hba.new"
      cat "$hba.new" >"$hba" && rm -f "$hba.new"
      unprivileged "$bindir/pg_ctl" -D "$dir/data" reload >/dev/null 2>&1 || true
    fi
    # Already running (a run that was interrupted before its stop): keep it.
    if unprivileged "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then exit 0; fi
    start_server
    ;;
  stop)
    pidfile="$dir/data/postmaster.pid"
    [ -f "$pidfile" ] || exit 0
    pid=$(head -1 "$pidfile")
    kill -INT "$pid" 2>/dev/null || exit 0
    for _ in $(seq 600); do
      kill -0 "$pid" 2>/dev/null || exit 0
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    ;;
  *)
    echo "usage: $0 start|stop|standby|promote DIR [PORT]" >&2
    exit 2
    ;;
esac
