#!/usr/bin/env bash
# scripts/console-test.sh [BUILD_DIR]: the web console in a real browser
# (docs/console.md; issue 22 point 4). Starts a daemon on the default config
# (plus a second project), makes two users, and drives Debian's Chromium with
# the pinned puppeteer-core through tests/console/console.test.cjs: log in,
# submit a job from the console, watch it finish and read its log, switch
# to Chinese, drain and resume a node as admin, check that another
# project's user cannot see the job, run axe-core on every page, and keep a
# screenshot of each page (desktop and phone) in BUILD_DIR/console-artifacts.
# Exit 77: skipped (no Chromium, or npm cannot install the pinned tools).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
tools=$build/tools/console-test
chromium=${CHROMIUM:-/usr/bin/chromium}
[[ -x $chromium ]] || { echo "console-test: skipped: no $chromium (scripts/install-deps.sh installs chromium)" >&2; exit 77; }
[[ -x $build/unisched ]] || { echo "console-test: no $build/unisched: build first" >&2; exit 1; }

mkdir -p "$tools"
if ! cmp -s "$root/tests/console/package-lock.json" "$tools/package-lock.json" || [[ ! -d $tools/node_modules/puppeteer-core ]]; then
  command -v npm >/dev/null || { echo "console-test: skipped: npm is not installed" >&2; exit 77; }
  cp "$root/tests/console/package.json" "$root/tests/console/package-lock.json" "$tools/"
  if ! (cd "$tools" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >"$tools/npm-ci.log" 2>&1); then
    if ! (cd "$tools" && timeout 20 npm ping >/dev/null 2>&1); then
      echo "console-test: skipped: npm cannot reach its registry" >&2
      exit 77
    fi
    cat "$tools/npm-ci.log" >&2
    exit 1
  fi
fi

# CONSOLE_TEST_INSTALL_ONLY=1: only the tools (make bench's console section uses them).
[[ ${CONSOLE_TEST_INSTALL_ONLY:-0} == 1 ]] && exit 0

work=$(mktemp -d /tmp/unisched-console-XXXXXX)
chmod 711 "$work"
daemon_pid=""
# shellcheck source=scripts/lib/test-daemon.sh
. "$root/scripts/lib/test-daemon.sh"
cleanup() {
  local status=$?
  set +e
  finish_test_daemon "$work" "$daemon_pid" "$status" 30
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The default config with a second project, for the user who must not see the first's jobs.
awk '{ print } /^projects:$/ { print "  - name: physics"; print "    shares: 1" }' "$root/config/unisched.yaml" \
  >"$work/config.yaml"
mkdir -p "$work/state" && chmod 711 "$work/state"
env -u UNISCHED_ADMIN_TOKEN "$build/unisched" server --config "$work/config.yaml" --listen 127.0.0.1:0 \
  --state-dir "$work/state" >"$work/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 300); do
  [[ -s $work/state/endpoint && -s $work/state/admin.token ]] && break
  kill -0 "$daemon_pid" 2>/dev/null || { echo "console-test: the daemon exited while starting" >&2; exit 1; }
  sleep 0.1
done
export CONSOLE_URL=$(head -n 1 "$work/state/endpoint")
export CONSOLE_ADMIN_TOKEN=$(cat "$work/state/admin.token")
until curl -fsS -o /dev/null "$CONSOLE_URL/readyz"; do sleep 0.1; done
token_of() {
  local user=$1 project=$2
  curl -fsS -H "Authorization: Bearer $CONSOLE_ADMIN_TOKEN" -X POST "$CONSOLE_URL/v1/users" \
    -d "{\"name\": \"$user\", \"role\": \"user\", \"projects\": [\"$project\"]}" >/dev/null
  curl -fsS -H "Authorization: Bearer $CONSOLE_ADMIN_TOKEN" -X POST "$CONSOLE_URL/v1/users/$user/tokens" -d '{}' |
    sed -E 's/.*"token":"([^"]+)".*/\1/'
}
export CONSOLE_ALICE_TOKEN=$(token_of alice default)
export CONSOLE_BOB_TOKEN=$(token_of bob physics)
# A workflow for the workflows pages: a scatter, a gather and an alternative.
curl -fsS -o /dev/null -H "Authorization: Bearer $CONSOLE_ALICE_TOKEN" -X POST "$CONSOLE_URL/v1/workflows" -d '{
  "name": "console", "tasks": [
    {"name": "prepare", "job": {"workload": {"kind": "hpc"}, "command": ["true"]}},
    {"name": "align", "after": ["prepare"], "scatter": {"over": ["a", "b", "c"]},
     "on_failure": {"alternative": "align-other"}, "job": {"workload": {"kind": "hpc"}, "command": ["true"]}},
    {"name": "align-other", "job": {"workload": {"kind": "hpc"}, "command": ["true"]}},
    {"name": "merge", "after": ["align"], "job": {"workload": {"kind": "hpc"}, "command": ["true"]}}]}'
export CONSOLE_ARTIFACTS=$build/console-artifacts
export CHROMIUM=$chromium
rm -rf "$CONSOLE_ARTIFACTS" && mkdir -p "$CONSOLE_ARTIFACTS"
NODE_PATH=$tools/node_modules node "$root/tests/console/console.test.cjs"
