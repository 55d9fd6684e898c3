#!/usr/bin/env bash
# scripts/kth-replay.sh BUILD_DIR: the trace-replay benchmark and check
# (docs/simulate.md). Replays the KTH SP2 trace on 100 processors with each
# policy, prints the figures, the reference simulator's figures and the wall
# time of each replay, and fails if a figure is more than 2% off. Then
# replays the Philly GPU trace (PHILLY_GPUS, default 1024 GPUs) once.
set -euo pipefail

BUILD=${1:?usage: scripts/kth-replay.sh BUILD_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(cd "$BUILD" && pwd)/unisched
KTH=${KTH:-$ROOT/../shared/traces/hpc-kth-sp2/KTH-SP2-1996.swf.gz}
PHILLY=${PHILLY:-$ROOT/../shared/traces/gpu-philly/philly.csv.gz}
PHILLY_GPUS=${PHILLY_GPUS:-1024}
[[ -x $BIN ]] || { echo "kth-replay: $BIN is missing; build first" >&2; exit 1; }
[[ -r $KTH ]] || { echo "kth-replay: $KTH is missing" >&2; exit 1; }

echo "machine: $(nproc) vCPU, $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
status=0
# policy  avg_wait_seconds  avg_bounded_slowdown (pyss, shared/traces/hpc-kth-sp2/README.md)
while read -r policy ref_wait ref_bsld; do
  start=$(date +%s.%N)
  json=$("$BIN" simulate --trace "$KTH" --processors 100 --policy "$policy" --json 2>/dev/null)
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  wait=$(jq -r .avg_wait_seconds <<<"$json")
  bsld=$(jq -r .avg_bounded_slowdown <<<"$json")
  verdict=$(awk -v w="$wait" -v rw="$ref_wait" -v b="$bsld" -v rb="$ref_bsld" 'BEGIN {
    dw = (w - rw) / rw; db = (b - rb) / rb
    printf "wait %+.2f%%, bsld %+.2f%%", 100 * dw, 100 * db
    if (dw > 0.02 || dw < -0.02 || db > 0.02 || db < -0.02) printf " OFF"; }')
  printf '%-12s wait %10.1f s (ref %10.1f)  bsld %8.2f (ref %8.2f)  %s  in %.2f s\n' \
    "$policy" "$wait" "$ref_wait" "$bsld" "$ref_bsld" "$verdict" "$seconds"
  [[ $verdict == *OFF ]] && status=1
done <<'REF'
fcfs 353776.4 6814.97
easy 6836.9 92.58
conservative 7310.6 89.00
REF

if [[ -r $PHILLY ]]; then
  start=$(date +%s.%N)
  json=$("$BIN" simulate --trace "$PHILLY" --gpus "$PHILLY_GPUS" --json 2>/dev/null)
  printf 'philly (%s GPUs, easy): %s in %.2f s\n' "$PHILLY_GPUS" "$json" "$(echo "$(date +%s.%N) - $start" | bc)"
fi
exit $status
