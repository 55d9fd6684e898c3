#!/usr/bin/env bash
# The summary ctest's own line leaves out (docs/testing.md): how many tests
# passed, failed and were skipped, which were skipped (a test that cannot
# run here says so rather than counting as passed), and the slowest ten.
# Reads the JUnit file `ctest --output-junit FILE` wrote.
set -euo pipefail
junit=${1:?usage: test-summary.sh CTEST_JUNIT_FILE}
[ -f "$junit" ] || { echo "test-summary: no $junit (did ctest run?)" >&2; exit 0; }
# One line per test case: status, time, name.
cases=$(grep -o '<testcase name="[^"]*" classname="[^"]*" time="[^"]*" status="[a-z]*"' "$junit" |
  sed -E 's/<testcase name="([^"]*)" classname="[^"]*" time="([^"]*)" status="([a-z]*)"/\3 \2 \1/')
total=$(printf '%s\n' "$cases" | grep -c . || true)
failed=$(printf '%s\n' "$cases" | grep -c '^fail ' || true)
skipped=$(printf '%s\n' "$cases" | grep -cE '^(notrun|disabled) ' || true)
passed=$((total - failed - skipped))
echo
echo "== ${total} tests: ${passed} passed, ${failed} failed, ${skipped} skipped or disabled"
if [ "$skipped" -gt 0 ]; then
  echo "-- not run here (each says why in its output: ctest --output-on-failure -R NAME):"
  printf '%s\n' "$cases" | awk '$1 == "notrun" || $1 == "disabled" {print "   " $3 ($1 == "disabled" ? " (disabled)" : "")}'
fi
echo "-- slowest ten (seconds):"
printf '%s\n' "$cases" | sort -k2,2 -g -r | head -10 | awk '{printf "   %8.2f  %s\n", $2, $3}'
