#!/usr/bin/env bash
# scripts/bench.sh BUILD_DIR: the benchmark (`make bench`). Runs the four
# unisched-bench modes, each against a fresh daemon on a free loopback port
# with a throw-away state directory, so no mode inherits another's backlog.
# Prints the machine, the store's synchronous mode and the figures.
#
# Knobs (environment): SECTIONS (all; or a list of: http stores failover
# access arrays workflows console cycle agents gangs sandboxes ledger disk staging replay) FAILOVERS (50) BASELINE_BUILD (stores: another
# revision's build directory, benchmarked first) SUBMIT_CONNECTIONS (64) SUBMIT_SECONDS (10)
# E2E_JOBS (5000) E2E_CONNECTIONS (16) LATENCY_RUNS (200) CONFIG
# (config/unisched.yaml) CYCLE_RUNS (the cycle bench 100: a p99 of fewer runs is
# their slowest; the array and pass benches 7) LEDGER_ENTRIES (10000000; the ledger
# bench writes them all through the store, about 6 minutes here) DISK_JOBS
# (100000) BENCH_JSON
# (a file to which each mode's JSON line is appended).
set -euo pipefail

BUILD=${1:?usage: scripts/bench.sh BUILD_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
CONFIG=${CONFIG:-$ROOT/config/unisched.yaml}
SUBMIT_CONNECTIONS=${SUBMIT_CONNECTIONS:-64}
SUBMIT_SECONDS=${SUBMIT_SECONDS:-10}
E2E_JOBS=${E2E_JOBS:-5000}
E2E_CONNECTIONS=${E2E_CONNECTIONS:-16}
LATENCY_RUNS=${LATENCY_RUNS:-200}

for bin in "$BUILD/unisched" "$BUILD/unisched-bench" "$BUILD/unisched-cycle-bench" "$BUILD/unisched-ledger-bench" \
  "$BUILD/unisched-array-bench" "$BUILD/unisched-pass-bench" \
  "$BUILD/unisched-agents-bench" "$BUILD/unisched-sandbox-bench" "$BUILD/unisched-spawn-floor" "$BUILD/unisched-stage-bench"; do
  [[ -x $bin ]] || { echo "bench: $bin is missing; build first (make build)" >&2; exit 1; }
done

WORK=$(mktemp -d -t unisched-bench.XXXXXX)
# Jobs run as an unprivileged user and must reach their work directory
# inside the state dir: let them traverse (not list) this one.
chmod 0711 "$WORK"
DAEMON_PID=""
URL=""
STATE=""

stop_daemon() {
  [[ -n $DAEMON_PID ]] || return 0
  if kill -0 "$DAEMON_PID" 2>/dev/null; then
    kill -TERM "$DAEMON_PID" 2>/dev/null || true
    for _ in $(seq 300); do
      kill -0 "$DAEMON_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$DAEMON_PID" 2>/dev/null; then
      echo "bench: the daemon did not stop within 30 s of SIGTERM; killing it" >&2
      kill -KILL "$DAEMON_PID" 2>/dev/null || true
    fi
  fi
  wait "$DAEMON_PID" 2>/dev/null || true
  DAEMON_PID=""
}

cleanup() {
  stop_daemon
  # Each daemon's attempt control files on the tmpfs (docs/execution.md):
  # the file runtime-dir in its state directory says where.
  for runtime in "$WORK"/*/runtime-dir; do
    [[ -s $runtime ]] && rm -rf "$(dirname "$(head -n 1 "$runtime")")"
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_daemon NAME: a daemon with state in $WORK/NAME; sets URL and STATE.
start_daemon() {
  STATE=$WORK/$1
  mkdir -p "$STATE"
  # Without UNISCHED_ADMIN_TOKEN the daemon writes a fresh admin token to
  # $STATE/admin.token, which is what the benchmark uses.
  env -u UNISCHED_ADMIN_TOKEN "$BUILD/unisched" server --config "$CONFIG" --listen 127.0.0.1:0 \
    --state-dir "$STATE" >"$WORK/$1.log" 2>&1 &
  DAEMON_PID=$!
  for _ in $(seq 300); do
    if [[ -s $STATE/endpoint && -s $STATE/admin.token ]]; then
      URL=$(head -n 1 "$STATE/endpoint")
      return 0
    fi
    if ! kill -0 "$DAEMON_PID" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "bench: the daemon did not start (no $STATE/endpoint after 30 s); its log:" >&2
  tail -n 40 "$WORK/$1.log" >&2 || true
  exit 1
}

# run_mode LABEL MODE ARGS...: one unisched-bench mode on a fresh daemon.
# With DRAIN="node ...", those nodes are drained first (jobs then queue
# without running, which isolates the admission path: HTTP, validation,
# routing, durable commit).
run_mode() {
  local label=$1 name=$2
  shift 2
  start_daemon "$label"
  for node in ${DRAIN:-}; do
    curl -fsS -o /dev/null -H "Authorization: Bearer $(cat "$STATE/admin.token")" \
      -X POST "$URL/v1/nodes/$node/drain" -d '{"reason":"benchmark: admission path only"}'
  done
  [[ -z ${DRAIN:-} ]] || echo "($label: drained ${DRAIN}; submitted jobs are committed and queued, none runs)"
  # With --json the human lines come on stderr (sent on to our stdout here)
  # and the one JSON object on stdout (kept in a file).
  if ! "$BUILD/unisched-bench" "$name" --url "$URL" --token-file "$STATE/admin.token" --json "$@" \
      2>&1 >"$WORK/$label.json"; then
    echo "bench: $label failed; the daemon's log ends with:" >&2
    tail -n 20 "$WORK/$label.log" >&2 || true
    stop_daemon
    return 1
  fi
  [[ -z ${BENCH_JSON:-} ]] || cat "$WORK/$label.json" >>"$BENCH_JSON"
  stop_daemon
  echo
}

synchronous_mode() {
  # store.synchronous in the config; the config module's default is "full".
  local mode
  mode=$(awk '
    /^[^[:space:]#]/ { in_store = ($0 ~ /^store:/) }
    in_store && $1 == "synchronous:" { gsub(/["'\'']/, "", $2); print $2; exit }
  ' "$CONFIG")
  echo "${mode:-full (default)}"
}

echo "unisched benchmark ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
echo "  machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), \
$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) memory"
echo "  kernel:  $(uname -r)"
echo "  config:  $CONFIG (store synchronous: $(synchronous_mode))"
echo "  binary:  $BUILD/unisched"
echo "  note:    the load generator and the daemon share this machine's CPUs"
echo

SECTIONS=${SECTIONS:-http stores failover access arrays workflows console cycle agents gangs sandboxes ledger disk staging replay}
section() { [[ " $SECTIONS " == *" $1 "* ]]; }

status=0
if section http; then
# (a) first on the admission path alone: the elastic nodes drained, so the
# accepted jobs are committed and queue, and the two cores serve only HTTP,
# validation, routing and durable commits. Then the same while the jobs run
# (then job starts, each a real sandboxed process, share the same two cores).
DRAIN="x86-c256m512-elastic-01 x86-c256m512-elastic-02" \
  run_mode submit-admission submit --connections "$SUBMIT_CONNECTIONS" --duration "$SUBMIT_SECONDS" || status=1
run_mode submit submit --connections "$SUBMIT_CONNECTIONS" --duration "$SUBMIT_SECONDS" || status=1
run_mode e2e e2e --jobs "$E2E_JOBS" --connections "$E2E_CONNECTIONS" || status=1
# The same with HPC jobs: cgroups and an unprivileged account, no namespaces
# (what a Slurm job gets; the agent kind above adds the sandbox).
run_mode e2e-hpc e2e --jobs "$E2E_JOBS" --connections "$E2E_CONNECTIONS" --kind hpc || status=1
run_mode latency latency --runs "$LATENCY_RUNS" || status=1
# The host's floor under (b): trivial processes started and reaped with
# nothing of unisched in the way, plain and in fresh namespaces (a sandboxed
# agent job has both, and a supervisor beside it).
echo "== spawn floor: /bin/true started and reaped, no daemon"
"$BUILD/unisched-spawn-floor" --seconds 3 || status=1
echo
fi

if section stores; then
# The store's two backends side by side (docs/store.md#postgresql): durable
# submissions/s (the admission path alone, elastic nodes drained) and
# end-to-end jobs/s, on SQLite (synchronous: full) and on PostgreSQL 15 on
# this same machine (a throw-away cluster, tests/pg/cluster.sh, with fsync
# and synchronous_commit on: a 201 is on disk either way). Each run gets a
# fresh state directory and, on PostgreSQL, a fresh database.
# BASELINE_BUILD=<the build directory of another revision> adds its figures
# (both stores) first: a before/after of a change in the same run.
PG_DIR=$WORK/pg
if PG_FSYNC=on "$ROOT/tests/pg/cluster.sh" start "$PG_DIR" >/dev/null; then
  SAVED_CONFIG=$CONFIG
  SAVED_BUILD=$BUILD
  store_runs() {  # LABEL: the admission and end-to-end runs on $CONFIG with $BUILD
    DRAIN="x86-c256m512-elastic-01 x86-c256m512-elastic-02" \
      run_mode "$1-admission" submit --connections "$SUBMIT_CONNECTIONS" --duration "$SUBMIT_SECONDS" || status=1
    run_mode "$1-e2e" e2e --jobs "$E2E_JOBS" --connections "$E2E_CONNECTIONS" || status=1
  }
  pg_runs() {  # LABEL: the same on PostgreSQL, each run on a fresh database
    local run
    for run in admission e2e; do
      psql -h "$PG_DIR" -U unisched -d postgres -qAtc "CREATE DATABASE ${1//-/_}_$run" >/dev/null
      CONFIG=$WORK/$1-$run.yaml
      sed "s|^store:\$|store:\n  backend: postgresql\n  postgresql:\n    conninfo: \"host=$PG_DIR user=unisched dbname=${1//-/_}_$run\"|" \
        "$SAVED_CONFIG" >"$CONFIG"
      if [[ $run == admission ]]; then
        DRAIN="x86-c256m512-elastic-01 x86-c256m512-elastic-02" \
          run_mode "$1-admission" submit --connections "$SUBMIT_CONNECTIONS" --duration "$SUBMIT_SECONDS" || status=1
      else
        run_mode "$1-e2e" e2e --jobs "$E2E_JOBS" --connections "$E2E_CONNECTIONS" || status=1
      fi
    done
    CONFIG=$SAVED_CONFIG
  }
  PG_VERSION=$(psql -h "$PG_DIR" -U unisched -d postgres -qAtc 'SHOW server_version')
  if [[ -n ${BASELINE_BUILD:-} ]]; then
    BUILD=$(cd "$BASELINE_BUILD" && pwd)
    echo "== stores: SQLite, baseline build $BUILD"
    store_runs sqlite-baseline
    echo "== stores: PostgreSQL $PG_VERSION, fsync on, baseline build $BUILD"
    pg_runs postgresql-baseline
    BUILD=$SAVED_BUILD
  fi
  echo "== stores: SQLite"
  store_runs sqlite
  echo "== stores: PostgreSQL $PG_VERSION, fsync on"
  pg_runs postgresql
  CONFIG=$SAVED_CONFIG
  "$ROOT/tests/pg/cluster.sh" stop "$PG_DIR"
else
  echo "bench: cannot start PostgreSQL (scripts/install-deps.sh installs it)" >&2
  status=1
fi
fi

if section failover; then
# Daemon replicas (docs/replicas.md): the leader killed with -9, FAILOVERS
# (50) times; the time from the kill to the new leader's first 201.
echo "== failover: two replicas on PostgreSQL"
if "$ROOT/scripts/bench-failover.sh" "$BUILD" "$WORK"; then
  [[ -z ${BENCH_JSON:-} ]] || cat "$WORK/failover.json" >>"$BENCH_JSON"
else
  status=1
fi
echo
fi

if section access; then
# Rate limits (docs/access.md): one user's token floods at FLOOD_RATE
# requests/s; another user's GET /v1/jobs latency, first with the daemon
# idle, then under the flood. Once with the config as it is (no limits), once
# with the user role limited to 100 requests/s (burst 200), so the flood is
# answered 429 at the door.
FLOOD_RATE=${FLOOD_RATE:-8000}
FLOOD_SECONDS=${FLOOD_SECONDS:-20}
flood_run() {
  local label=$1
  start_daemon "$label"
  local admin
  admin=$(cat "$STATE/admin.token")
  for user in flooder victim; do
    curl -fsS -o /dev/null -H "Authorization: Bearer $admin" -X POST "$URL/v1/users" \
      -d "{\"name\": \"$user\", \"role\": \"user\", \"projects\": [\"default\"]}"
    curl -fsS -H "Authorization: Bearer $admin" -X POST "$URL/v1/users/$user/tokens" | jq -r .token >"$WORK/$user.token"
  done
  echo "== flood ($label): one token at $FLOOD_RATE requests/s, another user's latency"
  if ! "$BUILD/unisched-bench" flood --url "$URL" --token-file "$WORK/victim.token" \
      --flood-token "$(cat "$WORK/flooder.token")" --rate "$FLOOD_RATE" --threads 8 --probe-rate 50 \
      --duration "$FLOOD_SECONDS" --json 2>&1 >"$WORK/$label.json"; then
    echo "bench: $label failed" >&2
    status=1
  fi
  [[ -z ${BENCH_JSON:-} ]] || cat "$WORK/$label.json" >>"$BENCH_JSON"
  stop_daemon
  echo
}
flood_run flood-unlimited
SAVED_CONFIG=$CONFIG
CONFIG=$WORK/limited.yaml
{ cat "$SAVED_CONFIG"; printf '\naccess:\n  roles:\n    user: {requests_per_second: 100, burst: 200}\n'; } >"$CONFIG"
flood_run flood-limited
CONFIG=$SAVED_CONFIG
fi

if section arrays; then
# Job arrays (docs/arrays.md): a 100,000-task array submitted in one request
# (curl's time from send to the 201, and the rows it made), then the daemon's
# cycle code on that array against 100,000 ordinary pending jobs.
echo "== arrays: a 100,000-task array in one request; its cycle against 100,000 ordinary jobs"
start_daemon arrays
TOKEN=$(cat "$STATE/admin.token")
# A dependency on a sleeping job keeps the array waiting while it is measured.
BLOCKER=$(curl -sf -H "Authorization: Bearer $TOKEN" -X POST "$URL/v1/jobs" \
  -d '{"workload": {"kind": "hpc"}, "command": ["sleep", "600"]}' | sed -E 's/.*"id":"([0-9]+)".*/\1/')
for run in 1 2 3; do
  curl -s -o "$WORK/array.json" -w "  submit 100,000 tasks (run $run): %{http_code} in %{time_total} s\n" \
    -H "Authorization: Bearer $TOKEN" -X POST "$URL/v1/jobs" \
    -d "{\"workload\": {\"kind\": \"hpc\"}, \"command\": [\"true\"], \"dependency\": \"afterok:$BLOCKER\",
         \"array\": {\"indices\": \"0-99999\"}}" || status=1
done
curl -s -o /dev/null -w "  one ordinary job for comparison: %{http_code} in %{time_total} s\n" \
  -H "Authorization: Bearer $TOKEN" -X POST "$URL/v1/jobs" \
  -d "{\"workload\": {\"kind\": \"hpc\"}, \"command\": [\"true\"], \"dependency\": \"afterok:$BLOCKER\"}" || status=1
echo "  rows in the store's jobs table: $(sqlite3 "$STATE/unisched.db" 'SELECT count(*) FROM jobs' 2>/dev/null || echo '?')"
stop_daemon
"$BUILD/unisched-array-bench" --runs "${CYCLE_RUNS:-7}" || status=1
[[ -z ${BENCH_JSON:-} ]] || "$BUILD/unisched-array-bench" --runs "${CYCLE_RUNS:-7}" >>"$BENCH_JSON"
echo
fi

if section workflows; then
# Workflows (docs/workflows.md): one request of 10,000 task instances (a
# root, a 10,000-way scatter, a gather), run to the end on this machine's
# own pools; the scheduling cycle's p99 while it ran, from the daemon's own
# histogram (the bucket bound at or above the 99th percentile).
WORKFLOW_INSTANCES=${WORKFLOW_INSTANCES:-10000}
echo "== workflows: $WORKFLOW_INSTANCES task instances in one request, run to the end"
start_daemon workflows
TOKEN=$(cat "$STATE/admin.token")
ITEMS=$(seq -s '","' 1 "$WORKFLOW_INSTANCES")
JOB='{"workload": {"kind": "hpc"}, "resources": {"cpus": 1, "memory_mb": 64}, "command": ["true"]}'
printf '{"name": "bench", "tasks": [{"name": "prep", "job": %s}, {"name": "work", "after": ["prep"], "scatter": {"over": ["%s"]}, "job": %s}, {"name": "gather", "after": ["work"], "job": %s}]}' \
  "$JOB" "$ITEMS" "$JOB" "$JOB" >"$WORK/workflow.json"
echo "  request: $(wc -c <"$WORK/workflow.json") bytes"
STARTED=$(date +%s.%N)
WORKFLOW=$(curl -s -w '\n%{http_code} %{time_total}' -H "Authorization: Bearer $TOKEN" -X POST "$URL/v1/workflows" \
  --data-binary @"$WORK/workflow.json")
echo "  submit: $(tail -n 1 <<<"$WORKFLOW" | awk '{ print $1 " in " $2 " s" }')"
WORKFLOW_ID=$(head -n 1 <<<"$WORKFLOW" | jq -r .id)
STATE_NOW=""
for _ in $(seq 3600); do
  STATE_NOW=$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/v1/workflows?limit=1" | sed -E 's/.*"state":"([A-Z]+)".*/\1/')
  [[ $STATE_NOW == RUNNING ]] || break
  sleep 1
done
ENDED=$(date +%s.%N)
echo "  workflow $WORKFLOW_ID: $STATE_NOW after $(awk -v a="$STARTED" -v b="$ENDED" 'BEGIN { printf "%.1f", b - a }') s"
curl -s "$URL/metrics" | awk '
  /^unisched_scheduler_cycle_seconds_bucket/ {
    match($0, /le="[^"]+"/); le = substr($0, RSTART + 4, RLENGTH - 5); n[le] += $NF; if (!(le in seen)) { order[++k] = le; seen[le] = 1 }
  }
  /^unisched_scheduler_cycle_seconds_count/ { total += $NF }
  /^unisched_scheduler_cycle_seconds_sum/ { sum += $NF }
  END {
    for (i = 1; i <= k; ++i) if (n[order[i]] >= 0.99 * total) { p99 = order[i]; break }
    printf "  scheduling cycles while it ran: %d, mean %.1f ms, p99 <= %s s\n", total, total ? 1000 * sum / total : 0, p99
  }'
stop_daemon
echo
fi

if section console; then
# The web console (docs/console.md): the jobs page's first render in
# Debian's Chromium with 10,000 and then 100,000 jobs waiting in the store
# (every node drained), navigation to table drawn.
echo "== console: the jobs page's first render with many jobs in the store"
if CONSOLE_TEST_INSTALL_ONLY=1 bash "$ROOT/scripts/console-test.sh" "$BUILD" && [[ -x ${CHROMIUM:-/usr/bin/chromium} ]]; then
  start_daemon console
  TOKEN=$(cat "$STATE/admin.token")
  for node in $(curl -s -H "Authorization: Bearer $TOKEN" "$URL/v1/nodes" | jq -r '.nodes[].name'); do
    curl -fsS -o /dev/null -H "Authorization: Bearer $TOKEN" -X POST "$URL/v1/nodes/$node/drain" -d '{"reason":"benchmark"}' || true
  done
  CONSOLE_URL=$URL CONSOLE_ADMIN_TOKEN=$TOKEN CHROMIUM=${CHROMIUM:-/usr/bin/chromium} \
    NODE_PATH=$BUILD/tools/console-test/node_modules node "$ROOT/tests/console/render.bench.cjs" || status=1
  stop_daemon
else
  echo "  skipped: no Chromium or no console test tools"
fi
echo
fi

if section cycle; then
# The scheduling cycle alone (the core, no daemon): 10,000 nodes, 100,000
# pending jobs; p50/p99 cycle time and peak memory per backfill policy.
echo "== cycle: one scheduling cycle, 10,000 nodes, 100,000 pending jobs"
"$BUILD/unisched-cycle-bench" --runs "${CYCLE_RUNS:-100}" || status=1
[[ -n ${BENCH_JSON:-} ]] && "$BUILD/unisched-cycle-bench" --runs "${CYCLE_RUNS:-100}" >>"$BENCH_JSON"
echo
# The daemon's passes (BuildCycleSnapshot, KeptOrder, Decide): a tick's full
# pass, and an event pass at the default depth of 1,000 for three queue
# lengths (it must not grow with them).
echo "== passes: the daemon's full and event passes, 10,000 nodes, 25,000 / 100,000 / 200,000 pending"
"$BUILD/unisched-pass-bench" --runs "${CYCLE_RUNS:-7}" | tee -a "${BENCH_JSON:-/dev/null}" || status=1
echo
fi

if section agents; then
# Node agents (docs/agents.md): 1,000 simulated agents on a daemon whose
# config declares them (heartbeat every 2 s, timeout 10 s): heartbeats/s
# absorbed, then the time from one agent's death to its job running elsewhere.
AGENTS=${AGENTS:-1000}
AGENTS_CONFIG=$WORK/agents.yaml
{
  printf 'server:\n  scheduler_tick_seconds: 1.0\nhealth:\n  heartbeat_interval_seconds: 2\n  heartbeat_timeout_seconds: 10\n'
  printf 'pools:\n  - name: sim\n    kind: cpu\n    nodes:\n'
  for i in $(seq 1 "$AGENTS"); do printf '      - x86-c8m16-sim-%04d\n' "$i"; done
  printf 'nodes:\n'
  for i in $(seq 1 "$AGENTS"); do printf '  - {name: x86-c8m16-sim-%04d, cpus: 8, memory_mb: 16384, agent: true}\n' "$i"; done
  printf 'queues:\n  - name: sim\n    pool: sim\nprojects:\n  - name: default\n'
} >"$AGENTS_CONFIG"
echo "== agents: $AGENTS simulated node agents, heartbeats absorbed and failover"
SAVED_CONFIG=$CONFIG
CONFIG=$AGENTS_CONFIG
start_daemon agents
AGENTS_JSON=$("$BUILD/unisched-agents-bench" --url "$URL" --token-file "$STATE/admin.token" --agents "$AGENTS" \
  --threads 8 --seconds 10 --jobs 10) || status=1
stop_daemon
CONFIG=$SAVED_CONFIG
echo "$AGENTS_JSON"
[[ -z ${BENCH_JSON:-} ]] || echo "$AGENTS_JSON" >>"$BENCH_JSON"
echo
fi

if section gangs; then
# Multi-node launch (docs/execution.md, "Multi-node jobs"): 8 real agents on
# loopback; submit to every task running for gangs of 1-8 nodes, and for
# steps started inside a running job.
if [[ $(id -u) -eq 0 ]]; then
  GANGS_OUT=$(bash "$ROOT/scripts/bench-gangs.sh" "$BUILD") || status=1
  echo "$GANGS_OUT"
  [[ -z ${BENCH_JSON:-} ]] || echo "$GANGS_OUT" | tail -n 1 >>"$BENCH_JSON"
  echo
else
  echo "== gangs: skipped (jobs run as their accounts: needs root)"
fi
fi

if section sandboxes; then
# Agent sandboxes (docs/sandboxes.md): cold and warm create + first exec of
# `true`, exec round trip, and 500 idle instances with their memory. Needs
# root (namespaces, cgroups, a uid per instance).
if [[ $(id -u) -eq 0 ]]; then
  echo "== sandboxes: create + exec latency (cold, warm), exec round trip, ${SANDBOX_IDLE:-500} idle instances"
  SANDBOX_CONFIG=$WORK/sandboxes.yaml
  { cat "$ROOT/config/unisched.yaml"; printf '\nimages:\n  - {name: host, version: "1", warm: 8}\n'; } >"$SANDBOX_CONFIG"
  SAVED_CONFIG=$CONFIG
  CONFIG=$SANDBOX_CONFIG
  start_daemon sandboxes
  SANDBOX_JSON=$("$BUILD/unisched-sandbox-bench" --url "$URL" --token-file "$STATE/admin.token" \
    --daemon-pid "$DAEMON_PID" --iterations "${SANDBOX_ITERATIONS:-300}" --execs "${SANDBOX_EXECS:-2000}" \
    --idle "${SANDBOX_IDLE:-500}") || status=1
  stop_daemon
  CONFIG=$SAVED_CONFIG
  echo "$SANDBOX_JSON"
  [[ -z ${BENCH_JSON:-} ]] || echo "$SANDBOX_JSON" >>"$BENCH_JSON"
  echo
else
  echo "== sandboxes: skipped (needs root)"
fi
fi

if section ledger; then
# The accounting ledger (docs/ledger.md): entries/s through the store's
# writer, then usage queries grouped by project and queue over all of them,
# all time and a one-week window, against a plain scan of the table.
echo "== ledger: ${LEDGER_ENTRIES:-10000000} entries through the store, usage queries over them"
LEDGER_JSON=$("$BUILD/unisched-ledger-bench" --entries "${LEDGER_ENTRIES:-10000000}") || status=1
echo "$LEDGER_JSON"
[[ -z ${BENCH_JSON:-} ]] || echo "$LEDGER_JSON" >>"$BENCH_JSON"
echo
fi

if section disk; then
# Disk per finished job (docs/store.md, "Keeping it bounded"): DISK_JOBS
# trivial HPC jobs (`true`) end to end on one daemon, then the bytes of its
# database (the file and its WAL) and the inodes under its state directory
# and its tmpfs runtime directory, per job. Each job leaves its row, its
# attempts, events and ledger entries; a job that wrote nothing leaves no
# directory (the executor removes an empty work directory at its end).
DISK_JOBS=${DISK_JOBS:-100000}
echo "== disk: $DISK_JOBS trivial jobs, then the database's bytes and the inodes per job"
start_daemon disk
# A backlog of 100,000 drains at about 160 jobs/s here: allow an hour.
if "$BUILD/unisched-bench" e2e --url "$URL" --token-file "$STATE/admin.token" --jobs "$DISK_JOBS" \
    --connections "$E2E_CONNECTIONS" --kind hpc --timeout 3600; then
  runtime=$(head -n 1 "$STATE/runtime-dir" 2>/dev/null || true)
  db_bytes=$(cat "$STATE"/unisched.db "$STATE"/unisched.db-wal 2>/dev/null | wc -c)
  state_inodes=$(find "$STATE" -xdev | wc -l)
  runtime_inodes=$([[ -n $runtime && -d $runtime ]] && find "$runtime" | wc -l || echo 0)
  work_dirs=$(find "$STATE/work" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  echo "database: $db_bytes bytes ($(awk -v b="$db_bytes" -v n="$DISK_JOBS" 'BEGIN { printf "%.0f", b / n }') per job)"
  echo "inodes: $state_inodes under the state directory, $runtime_inodes under the runtime directory" \
    "($(awk -v a="$state_inodes" -v r="$runtime_inodes" -v n="$DISK_JOBS" 'BEGIN { printf "%.4f", (a + r) / n }') per job);" \
    "work directories left: $work_dirs"
  [[ -z ${BENCH_JSON:-} ]] || printf '{"mode":"disk","jobs":%s,"db_bytes":%s,"state_inodes":%s,"runtime_inodes":%s,"work_dirs":%s}\n' \
    "$DISK_JOBS" "$db_bytes" "$state_inodes" "$runtime_inodes" "$work_dirs" >>"$BENCH_JSON"
else
  echo "bench: disk failed; the daemon's log ends with:" >&2
  tail -n 20 "$WORK/disk.log" >&2 || true
  status=1
fi
stop_daemon
echo
fi

if section staging; then
# Data staging (docs/data.md): 1 GiB out and in through the executor's
# staging code beside curl alone, against radosgw on loopback (memstore, 6 GiB).
echo "== staging: 1 GiB stage-out and stage-in against curl, radosgw on loopback"
S3_DIR="$WORK/s3"
S3_PORT=$(( 30000 + RANDOM % 5000 * 2 ))
if MEMSTORE_BYTES=$((6 << 30)) bash "$ROOT/tests/s3/radosgw.sh" start "$S3_DIR" "$S3_PORT" > "$WORK/s3.log" 2>&1; then
  # shellcheck disable=SC1091
  . "$S3_DIR/env"
  "$BUILD/unisched-stage-bench" "$UNISCHED_TEST_S3_URL" "$UNISCHED_TEST_S3_ACCESS" "$UNISCHED_TEST_S3_SECRET" \
    "${STAGE_BYTES:-1073741824}" 16 4 | tee -a "${BENCH_JSON:-/dev/null}" || status=1
  bash "$ROOT/tests/s3/radosgw.sh" stop "$S3_DIR" > /dev/null 2>&1 || true
else
  echo "bench: radosgw did not start (see $WORK/s3.log)"; cat "$WORK/s3.log"; status=1
fi
echo
fi

if section replay; then
# Trace replay through the same scheduling code (docs/simulate.md).
echo "== replay: KTH SP2 and HPC2N-2002 against pyss job by job, Philly on GPUs"
bash "$ROOT/scripts/trace-replay.sh" "$BUILD" || status=1
fi
exit $status

