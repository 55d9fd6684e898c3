# Sourced by the scripts that run a throw-away daemon for a test
# (scripts/console-test.sh, scripts/api-conformance.sh).
#
# finish_test_daemon WORK PID STATUS LINES: stops the daemon PID (if any)
# and waits for it; when STATUS is not 0, prints the last LINES lines of
# WORK/daemon.log; removes the attempts' control files on the tmpfs
# (docs/execution.md: WORK/state/runtime-dir names them) and WORK.
finish_test_daemon() {
  local work=$1 pid=$2 status=$3 lines=$4
  if [[ -n $pid ]]; then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  if [[ $status -ne 0 && -f $work/daemon.log ]]; then
    echo "--- the daemon's log (last $lines lines):" >&2
    tail -n "$lines" "$work/daemon.log" >&2
  fi
  if [[ -s $work/state/runtime-dir ]]; then rm -rf "$(dirname "$(head -n 1 "$work/state/runtime-dir")")"; fi
  rm -rf "$work"
}
