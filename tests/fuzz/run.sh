#!/usr/bin/env bash
# make fuzz / make fuzz-smoke (docs/fuzzing.md): configures BUILD with clang
# and UNISCHED_FUZZ=ON, builds the libFuzzer targets, and runs each for
# SECONDS on its corpus BUILD/corpus/<name> (new inputs are kept there; the
# seeds of tests/fuzz/corpus/<name> and the inputs of
# tests/fuzz/regressions/<name> are read too). Fails when any target ends
# in a crash, a leak, a sanitizer report or a timeout; the input is then in
# BUILD/artifacts/<name>/ and the report in BUILD/logs/<name>.log. Prints a
# table of each run's final stats, also written to BUILD/fuzz-stats.tsv.
#
#   tests/fuzz/run.sh BUILD SECONDS NAME...
#
# FUZZ_SECONDS_<name> in the environment overrides SECONDS for one target
# (the HTTP and config targets run far fewer inputs per second).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1
seconds=$2
shift 2
[ $# -gt 0 ] || { echo "usage: $0 BUILD SECONDS NAME..." >&2; exit 2; }
jobs=${JOBS:-$(nproc)}

if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DUNISCHED_FUZZ=ON
fi
targets=()
for name in "$@"; do targets+=("${name}_fuzz"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

# Leaks are findings; UBSan's reports carry their stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

final_stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -1; }
stats="$build/fuzz-stats.tsv"
printf 'target\tseconds\texecuted_units\texec_per_sec\tcorpus_files\tcorpus_bytes\tresult\n' >"$stats"
failed=()
for name in "$@"; do
  corpus="$build/corpus/$name"
  artifacts="$build/artifacts/$name"
  log="$build/logs/$name.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  seeds=("tests/fuzz/corpus/$name")
  [ -d "tests/fuzz/regressions/$name" ] && seeds+=("tests/fuzz/regressions/$name")
  dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=("-dict=tests/fuzz/$name.dict")
  override="FUZZ_SECONDS_$name"
  secs=${!override:-$seconds}
  echo "fuzz: $name for ${secs} s (log $log)"
  result=ok
  # -timeout: one input taking a minute is a hang; -rss_limit_mb: the HTTP
  # target's store grows with what the inputs create, within this. The outer
  # timeout: libFuzzer's report of an out-of-memory walks the whole heap,
  # which can take many minutes; a run must not hang CI.
  if ! timeout --kill-after=30 $((secs + 600)) "$build/tests/fuzz/${name}_fuzz" "$corpus" "${seeds[@]}" "${dict[@]}" \
    -max_total_time="$secs" -print_final_stats=1 -timeout=60 -rss_limit_mb=4096 -artifact_prefix="$artifacts/" \
    >"$log" 2>&1; then
    result=FAILED
    failed+=("$name")
    grep -E "^==[0-9]+==ERROR|runtime error|fuzz invariant|deadly signal|Test unit written" "$log" | head -20 || true
  fi
  files=$(find "$corpus" -type f | wc -l)
  bytes=$(find "$corpus" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$secs" "$(final_stat number_of_executed_units "$log")" \
    "$(final_stat average_exec_per_sec "$log")" "$files" "$bytes" "$result" >>"$stats"
done
awk -F'\t' '{printf "%-10s %8s %15s %12s %13s %13s  %s\n", $1, $2, $3, $4, $5, $6, $7}' "$stats"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $build/artifacts/, reports in $build/logs/)" >&2
  exit 1
fi
