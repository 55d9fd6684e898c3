#!/bin/sh
# First start on an empty $PGDATA: a cluster with the C collation (the order
# unisched's lists expect, docs/store.md), password authentication from any
# address, and POSTGRES_USER owning POSTGRES_DB. Then the server, in front.
set -eu
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "postgres-entrypoint: POSTGRES_PASSWORD is empty" >&2; exit 1; }
  initdb -D "$PGDATA" --username=postgres --auth-local=peer --auth-host=scram-sha-256 \
    --locale=C --encoding=UTF8 >/dev/null
  printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  psql -v ON_ERROR_STOP=1 -q -U postgres -d postgres \
    -v user="$POSTGRES_USER" -v db="$POSTGRES_DB" -v pw="$POSTGRES_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'user', :'pw') \gexec
SELECT format('CREATE DATABASE %I OWNER %I TEMPLATE template0 LOCALE ''C''', :'db', :'user') \gexec
SQL
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "postgres-entrypoint: cluster made in $PGDATA, database $POSTGRES_DB owned by $POSTGRES_USER"
fi
exec postgres -D "$PGDATA"
