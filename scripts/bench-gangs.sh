#!/usr/bin/env bash
# scripts/bench-gangs.sh BUILD_DIR: multi-node launch latency (issue 19,
# point 6), the `gangs` section of `make bench`. A daemon and 8 real
# `unisched agent` processes on loopback (2 cpus each); for N = 1, 2, 4, 8
# nodes: the time from a per_node job's submission to its last task running
# (each task writes its start time, `date +%s%N`, as its first act), RUNS
# times each; then the same for a step launched with `unisched step --nodes
# N` inside a running batch job. "Submission" is the daemon's receipt (the
# job's submitted_at, the step's started_at, both in ms): the figures are
# the scheduler's, not curl's or the CLI's start-up (30-40 ms of a process
# here), which the second figure of each line includes (from just before
# the curl or `unisched step` command). Prints p50 and max per N, and one
# JSON line. Knobs: RUNS (10).
set -euo pipefail

BUILD=$(cd "${1:?usage: scripts/bench-gangs.sh BUILD_DIR}" && pwd)
RUNS=${RUNS:-10}
NODES=8
WORK=$(mktemp -d -t unisched-gangs.XXXXXX)
chmod 0711 "$WORK"
SHARED=$WORK/shared
mkdir -p "$SHARED" && chmod 0777 "$SHARED"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  pkill -KILL -f "$WORK" 2>/dev/null || true
  [[ -s $WORK/daemon/runtime-dir ]] && rm -rf "$(dirname "$(head -n 1 "$WORK/daemon/runtime-dir")")"
  rm -rf "$WORK"
}
trap cleanup EXIT

node() { printf 'x86-c2m1-gang-%02d' "$1"; }
{
  printf 'server:\n  scheduler_tick_seconds: 1.0\nhealth:\n  heartbeat_interval_seconds: 5\n  heartbeat_timeout_seconds: 30\n'
  printf 'pools:\n  - name: gang\n    kind: cpu\n    nodes: ['
  for i in $(seq 1 $NODES); do printf '%s%s' "$(node "$i")" "$([[ $i -lt $NODES ]] && echo ', ')"; done
  printf ']\nnodes:\n'
  for i in $(seq 1 $NODES); do printf '  - {name: %s, cpus: 2, memory_mb: 1024, agent: true}\n' "$(node "$i")"; done
  printf 'queues:\n  - name: batch\n    pool: gang\nprojects:\n  - name: default\n'
} >"$WORK/gangs.yaml"

mkdir -p "$WORK/daemon"
env -u UNISCHED_ADMIN_TOKEN "$BUILD/unisched" server --config "$WORK/gangs.yaml" --listen 127.0.0.1:0 \
  --state-dir "$WORK/daemon" >"$WORK/daemon.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 300); do [[ -s $WORK/daemon/endpoint && -s $WORK/daemon/admin.token ]] && break; sleep 0.1; done
URL=$(head -n 1 "$WORK/daemon/endpoint")
TOKEN=$(cat "$WORK/daemon/admin.token")
api() { curl -fsS -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' "$@"; }
api -X POST "$URL/v1/node-tokens" -d '{"pool": "gang"}' | jq -r .token >"$WORK/node.token"
for i in $(seq 1 $NODES); do
  "$BUILD/unisched" agent --server "$URL" --token-file "$WORK/node.token" --node "$(node "$i")" --pool gang \
    --state-dir "$WORK/agent-$i" --cpus 2 --memory-mb 1024 >"$WORK/agent-$i.log" 2>&1 &
  PIDS+=($!)
done
for _ in $(seq 600); do
  [[ $(api "$URL/v1/nodes" | jq '[.nodes[] | select(.state == "up")] | length') == "$NODES" ]] && break
  sleep 0.1
done

now_ns() { date +%s%N; }
wait_done() {  # JOB: until it ended
  for _ in $(seq 600); do
    case $(api "$URL/v1/jobs/$1" | jq -r .state) in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) return 0 ;; esac
    sleep 0.05
  done
  echo "bench-gangs: job $1 did not end" >&2
  return 1
}
# stats LABEL FILE: p50 and max (ms) of the numbers (ns) in FILE.
stats() {
  sort -n "$2" | awk -v label="$1" '{ v[NR] = $1 / 1e6 } END {
    p50 = v[int((NR + 1) / 2)]; printf "  %-24s p50 %7.1f ms   max %7.1f ms   (%d runs)\n", label, p50, v[NR], NR }'
}
json_stats() {  # FILE: {"p50_ms": .., "max_ms": ..}
  sort -n "$1" | awk '{ v[NR] = $1 / 1e6 } END { printf "{\"p50_ms\": %.1f, \"max_ms\": %.1f}", v[int((NR + 1) / 2)], v[NR] }'
}

echo "== gangs: submit to every task running, per_node jobs on N of $NODES agents (loopback, $RUNS runs each)"
JSON="{\"bench\": \"gangs\", \"agents\": $NODES"
for n in 1 2 4 8; do
  : >"$WORK/gang-$n.txt"
  for run in $(seq 1 "$RUNS"); do
    dir=$SHARED/g$n-$run
    mkdir -p "$dir" && chmod 0777 "$dir"
    body=$(jq -nc --arg dir "$dir" --argjson n "$n" '{queue: "batch", workload: {kind: "hpc"}, launch: "per_node",
      resources: {nodes: $n, cpus: 1, memory_mb: 64}, command: ["/bin/sh", "-c", ("date +%s%N > " + $dir + "/$UNISCHED_RANK")]}')
    t0=$(now_ns)
    id=$(api -X POST "$URL/v1/jobs" -d "$body" | jq -r .id)
    wait_done "$id"
    submitted=$(date -d "$(api "$URL/v1/jobs/$id" | jq -r .submitted_at)" +%s%N)
    last=$(cat "$dir"/* | sort -n | tail -n 1)
    echo $((last - submitted)) >>"$WORK/gang-$n.txt"
    echo $((last - t0)) >>"$WORK/gang-client-$n.txt"
  done
  stats "gang, $n node(s)" "$WORK/gang-$n.txt"
  stats "  with curl's start" "$WORK/gang-client-$n.txt"
  JSON+=", \"gang_$n\": $(json_stats "$WORK/gang-$n.txt"), \"gang_client_$n\": $(json_stats "$WORK/gang-client-$n.txt")"
done

echo "== steps: unisched step --nodes N inside a running batch job on $NODES nodes to every rank running ($RUNS runs each)"
script='for n in 1 2 4 8; do for run in $(seq 1 '"$RUNS"'); do d='"$SHARED"'/s$n-$run; mkdir -p $d; chmod 0777 $d;
  date +%s%N > $d/t0; '"$BUILD"'/unisched step --nodes $n -- /bin/sh -c "date +%s%N > $d/\$UNISCHED_RANK"; done; done'
body=$(jq -nc --arg script "$script" --argjson n "$NODES" '{queue: "batch", workload: {kind: "hpc"},
  resources: {nodes: $n, cpus: 1, memory_mb: 64}, command: ["/bin/sh", "-c", $script]}')
id=$(api -X POST "$URL/v1/jobs" -d "$body" | jq -r .id)
wait_done "$id"
[[ $(api "$URL/v1/jobs/$id" | jq -r .state) == COMPLETED ]] || { echo "bench-gangs: the step job failed" >&2; exit 1; }
step=0
for n in 1 2 4 8; do
  : >"$WORK/step-$n.txt"
  for run in $(seq 1 "$RUNS"); do
    step=$((step + 1))  # the script's steps, numbered from 1 in order
    d=$SHARED/s$n-$run
    t0=$(cat "$d/t0")
    started=$(date -d "$(api "$URL/v1/jobs/$id/steps/$step" | jq -r .started_at)" +%s%N)
    last=$(cat $(ls "$d"/* | grep -v '/t0$') | sort -n | tail -n 1)
    echo $((last - started)) >>"$WORK/step-$n.txt"
    echo $((last - t0)) >>"$WORK/step-client-$n.txt"
  done
  stats "step, $n node(s)" "$WORK/step-$n.txt"
  stats "  with the CLI's start" "$WORK/step-client-$n.txt"
  JSON+=", \"step_$n\": $(json_stats "$WORK/step-$n.txt"), \"step_client_$n\": $(json_stats "$WORK/step-client-$n.txt")"
done
echo "$JSON}"
