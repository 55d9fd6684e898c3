#!/usr/bin/env bash
# scripts/bench-failover.sh BUILD_DIR WORK_DIR: the failover benchmark of
# daemon replicas (`make bench`, section failover; docs/replicas.md). Two
# `unisched server` replicas on one PostgreSQL 15 database (a throw-away
# cluster on this machine, fsync on); FAILOVERS times (50): kill -9 the
# leader, then POST /v1/jobs to the standby every 10 ms until one answers
# 201, and take the time from the kill to that 201; then start the killed
# replica again (it stands by) for the next round, which kills the other.
# Prints the median, the 90th percentile and the maximum, against Slurm's
# default SlurmctldTimeout of 120 s.
set -euo pipefail

BUILD=${1:?usage: scripts/bench-failover.sh BUILD_DIR WORK_DIR}
WORK=${2:?usage: scripts/bench-failover.sh BUILD_DIR WORK_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FAILOVERS=${FAILOVERS:-50}
LEASE_SECONDS=${LEASE_SECONDS:-10}

PG_DIR=$WORK/failover-pg
PG_FSYNC=on "$ROOT/tests/pg/cluster.sh" start "$PG_DIR" >/dev/null
psql -h "$PG_DIR" -U unisched -d postgres -qAtc "CREATE DATABASE bench_failover" >/dev/null

free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 20000))
    (: </dev/tcp/127.0.0.1/$port) 2>/dev/null || { echo "$port"; return; }
  done
}

declare -A PORT PID
for r in a b; do
  PORT[$r]=$(free_port)
  mkdir -p "$WORK/replica-$r"
  cat >"$WORK/replica-$r.yaml" <<EOF
server:
  replica: {name: $r, lease_seconds: $LEASE_SECONDS}
store:
  backend: postgresql
  postgresql: {conninfo: "host=$PG_DIR user=unisched dbname=bench_failover"}
pools:
  - {name: cpu, kind: cpu, nodes: [x86-c64m256-hpc-01]}
nodes:
  - {name: x86-c64m256-hpc-01, cpus: 64, memory_mb: 262144, agent: true}
queues:
  - {name: batch, pool: cpu}
projects:
  - name: default
EOF
done

start_replica() {  # NAME
  env -u UNISCHED_ADMIN_TOKEN "$BUILD/unisched" server --config "$WORK/replica-$1.yaml" \
    --listen "127.0.0.1:${PORT[$1]}" --state-dir "$WORK/replica-$1" >>"$WORK/replica-$1.log" 2>&1 &
  PID[$1]=$!
  for _ in $(seq 600); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORT[$1]}/healthz") == 200 ]] && return 0
    sleep 0.05
  done
  echo "bench: replica $1 did not answer /healthz; its log:" >&2
  tail -n 20 "$WORK/replica-$1.log" >&2
  exit 1
}

stop_all() {
  for r in a b; do
    [[ -n ${PID[$r]:-} ]] && kill -KILL "${PID[$r]}" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  "$ROOT/tests/pg/cluster.sh" stop "$PG_DIR" >/dev/null 2>&1 || true
}
trap stop_all EXIT

start_replica a
# a starts first and takes the lease; wait until it leads.
for _ in $(seq 600); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORT[a]}/readyz") == 200 ]] && break
  sleep 0.05
done
start_replica b
TOKEN=$(cat "$WORK/replica-a/admin.token")
JOB='{"queue": "batch", "workload": {"kind": "hpc"}, "resources": {"cpus": 1, "memory_mb": 64}, "command": ["true"]}'

now_ms() { echo $(($(date +%s%N) / 1000000)); }

leader=a
times=()
for i in $(seq "$FAILOVERS"); do
  standby=$([[ $leader == a ]] && echo b || echo a)
  # The leader must answer before it is killed.
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    -X POST "http://127.0.0.1:${PORT[$leader]}/v1/jobs" -d "$JOB")
  [[ $code == 201 ]] || { echo "bench: round $i: the leader $leader answered $code" >&2; exit 1; }
  kill -KILL "${PID[$leader]}"
  killed=$(now_ms)
  wait "${PID[$leader]}" 2>/dev/null || true
  while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $TOKEN" \
      -X POST "http://127.0.0.1:${PORT[$standby]}/v1/jobs" -d "$JOB")
    [[ $code == 201 ]] && break
    if (($(now_ms) - killed > 120000)); then
      echo "bench: round $i: no 201 from $standby within 120 s" >&2
      exit 1
    fi
    sleep 0.01
  done
  took=$(($(now_ms) - killed))
  times+=("$took")
  start_replica "$leader"  # comes back as a standby
  leader=$standby
done

sorted=$(printf '%s\n' "${times[@]}" | sort -n)
pick() { echo "$sorted" | sed -n "$1p"; }
n=${#times[@]}
median=$(pick $(((n + 1) / 2)))
p90=$(pick $(((n * 9 + 9) / 10)))
max=$(pick "$n")
echo "failover: $n kills of the leader (kill -9), lease ${LEASE_SECONDS} s, PostgreSQL $(psql -h "$PG_DIR" -U unisched \
  -d postgres -qAtc 'SHOW server_version') on this machine"
echo "  kill to the new leader's first 201: median ${median} ms, p90 ${p90} ms, max ${max} ms (Slurm's default SlurmctldTimeout: 120000 ms)"
printf '{"mode":"failover","failovers":%d,"lease_seconds":%d,"median_ms":%d,"p90_ms":%d,"max_ms":%d}\n' \
  "$n" "$LEASE_SECONDS" "$median" "$p90" "$max" >"$WORK/failover.json"
