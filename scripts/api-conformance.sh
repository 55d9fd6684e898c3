#!/usr/bin/env bash
# The API contract under third-party tools (docs/testing.md, "API conformance"):
# starts a real daemon, runs dredd against docs/openapi.yaml and it, then a
# Prism validating proxy in front of it with a driver that calls every
# operation of the document and its documented error answers. Both tools are
# pinned in tests/api/package-lock.json and installed into build/tools/api
# (offline after the first install).
#   api-conformance.sh --install          install the tools only
#   api-conformance.sh [BUILD_DIR]         run (default build/; needs BUILD_DIR/unisched)
# Exit 0: zero failures either way; 77: skipped (no tools and npm cannot
# reach its registry); anything else: a failure, with its output above.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/build/tools/api"
skip=77

# Installed already, from the same lock file: nothing to fetch.
install_tools() {
  if [[ -x $tools/node_modules/.bin/dredd && -x $tools/node_modules/.bin/prism ]] &&
     cmp -s "$root/tests/api/package-lock.json" "$tools/package-lock.json"; then
    return 0
  fi
  if ! command -v npm >/dev/null; then
    echo "api-conformance: skipped: npm is not installed and the tools are not in $tools" >&2
    exit $skip
  fi
  mkdir -p "$tools"
  cp "$root/tests/api/package.json" "$root/tests/api/package-lock.json" "$tools/"
  if ! (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error >"$tools/npm-ci.log" 2>&1); then
    # Only a registry that cannot be reached is a reason to skip.
    if ! (cd "$tools" && timeout 20 npm ping >/dev/null 2>&1); then
      echo "api-conformance: skipped: npm cannot reach its registry and the tools are not installed in $tools" >&2
      rm -f "$tools/package-lock.json"
      exit $skip
    fi
    cat "$tools/npm-ci.log" >&2
    rm -f "$tools/package-lock.json"
    echo "api-conformance: npm ci failed" >&2
    exit 1
  fi
}

install_tools
[[ ${1:-} == --install ]] && exit 0

build=$(cd "${1:-$root/build}" && pwd)
[[ -x $build/unisched ]] || { echo "api-conformance: no $build/unisched: build first (make build)" >&2; exit 1; }
export PATH="$tools/node_modules/.bin:$PATH" NODE_PATH="$tools/node_modules"
started=$(date +%s%N)
# Seconds since $1 (date +%s%N), one decimal.
since() { local ms=$((($(date +%s%N) - $1) / 1000000)); printf "%d.%d" $((ms / 1000)) $((ms % 1000 / 100)); }

work=$(mktemp -d /tmp/unisched-conformance-XXXXXX)
chmod 711 "$work"
daemon_pid="" prism_pid=""
# shellcheck source=scripts/lib/test-daemon.sh
. "$root/scripts/lib/test-daemon.sh"
cleanup() {
  local status=$?
  set +e
  if [[ -n $prism_pid ]]; then
    kill "$prism_pid" 2>/dev/null
    wait "$prism_pid" 2>/dev/null
  fi
  if [[ -n $daemon_pid ]]; then
    # Jobs outlive a daemon that stops (docs/execution.md): cancel the
    # fixtures' long ones first, and give their supervisors a moment.
    [[ -n ${CONFORMANCE_URL:-} ]] && timeout 30 node -e '
      const h = {Authorization: "Bearer " + process.env.CONFORMANCE_ADMIN_TOKEN};
      (async () => {
        for (const state of ["RUNNING", "PENDING", "HELD"]) {
          const r = await fetch(process.env.CONFORMANCE_URL + "/v1/jobs?limit=1000&state=" + state, {headers: h});
          for (const j of (await r.json()).jobs) {
            await fetch(process.env.CONFORMANCE_URL + "/v1/jobs/" + j.id, {method: "DELETE", headers: h});
          }
        }
        // (The agent pool has no processes here: its job ends with no agent to say so.)
        for (let i = 0; i < 100; ++i) {
          let left = 0;
          for (const pool of ["cpu-hpc-pool", "gpu-train-pool"]) {
            const r = await fetch(process.env.CONFORMANCE_URL + "/v1/jobs?limit=0&state=RUNNING&pool=" + pool, {headers: h});
            left += (await r.json()).total;
          }
          if (left === 0) break;
          await new Promise((ok) => setTimeout(ok, 100));
        }
      })().catch(() => {});' 2>/dev/null
  fi
  finish_test_daemon "$work" "$daemon_pid" "$status" 40
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The default config, plus what the agent endpoints need (a pool of one
# agent node and its queue), a small sandbox file limit (so that 413 is
# reachable) and a project alice does not belong to.
node "$root/tests/api/conformance-config.js" "$root/config/unisched.yaml" >"$work/config.yaml"
mkdir -p "$work/state" && chmod 711 "$work/state"
env -u UNISCHED_ADMIN_TOKEN "$build/unisched" server --config "$work/config.yaml" --listen 127.0.0.1:0 \
  --state-dir "$work/state" >"$work/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 300); do
  [[ -s $work/state/endpoint && -s $work/state/admin.token ]] && break
  kill -0 "$daemon_pid" 2>/dev/null || { echo "api-conformance: the daemon exited while starting" >&2; exit 1; }
  sleep 0.1
done
[[ -s $work/state/endpoint ]] || { echo "api-conformance: the daemon did not start" >&2; exit 1; }
export CONFORMANCE_URL=$(head -n 1 "$work/state/endpoint")
export CONFORMANCE_ADMIN_TOKEN=$(cat "$work/state/admin.token")
export CONFORMANCE_SPEC="$root/docs/openapi.yaml"
export CONFORMANCE_WORK="$work"
until curl -fsS -o /dev/null "$CONFORMANCE_URL/readyz"; do sleep 0.1; done

# Prism's validating proxy (part b) starts now: its start-up overlaps dredd's run.
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
prism proxy --errors -h 127.0.0.1 -p "$port" "$root/docs/openapi.yaml" "$CONFORMANCE_URL" >"$work/prism.log" 2>&1 &
prism_pid=$!

status=0
# a. dredd: every transaction of the document against the live daemon; the
# hooks make each one's request (tests/api/dredd-hooks.js).
echo "== dredd $(dredd --version | cut -d' ' -f2) against $CONFORMANCE_URL"
t0=$(date +%s%N)
if ! dredd "$root/docs/openapi.yaml" "$CONFORMANCE_URL" --hookfiles="$root/tests/api/dredd-hooks.js" \
     --loglevel=warn --reporter=xunit --output="$work/dredd.xml" >"$work/dredd.out" 2>&1; then
  status=1
fi
# What failed, and the summary line (the full output is long).
grep -v "^warn: API description parser warning\|padLevels\|trace-warnings" "$work/dredd.out" |
  sed 's/\x1b\[[0-9;]*m//g' | grep -E -A12 "^fail:" | head -200 || true
sed 's/\x1b\[[0-9;]*m//g' "$work/dredd.out" | grep -E "^(complete|error):" || true
echo "dredd: $(since "$t0") s"

# b. Prism's validating proxy in front of the daemon, and a driver that
# calls every operation through it (tests/api/prism-driver.js).
echo "== prism $(prism --version) proxy --errors on 127.0.0.1:$port"
t0=$(date +%s%N)
for _ in $(seq 600); do
  grep -q "Prism is listening" "$work/prism.log" && break
  kill -0 "$prism_pid" 2>/dev/null || { cat "$work/prism.log" >&2; echo "api-conformance: prism exited" >&2; exit 1; }
  sleep 0.1
done
export CONFORMANCE_PRISM_URL="http://127.0.0.1:$port" CONFORMANCE_PRISM_LOG="$work/prism.log"
if ! node "$root/tests/api/prism-driver.js"; then status=1; fi
echo "prism: $(since "$t0") s"
echo "api-conformance: $(since "$started") s in all, $([[ $status -eq 0 ]] && echo passed || echo FAILED)"
exit $status
