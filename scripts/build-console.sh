#!/usr/bin/env bash
# scripts/build-console.sh [--check] [TOOLS_DIR]: bundles the web console
# (src/console/web, docs/console.md) with the esbuild and uPlot pinned in its
# package-lock.json into src/console/dist, which is committed and embedded in
# the daemon (so `make run` needs no Node). --check bundles into a temporary
# directory instead and fails unless every file is byte for byte the
# committed one (a test runs it: the bundle in the repo is the sources').
# The pinned packages are installed with `npm ci` into TOOLS_DIR (default
# build/tools/console). Exit 77: skipped (no npm, or npm cannot reach its
# registry and nothing is installed yet).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=false
if [[ ${1:-} == --check ]]; then
  check=true
  shift
fi
tools=${1:-$ROOT/build/tools/console}
web=$ROOT/src/console/web
dist=$ROOT/src/console/dist

mkdir -p "$tools"
if ! cmp -s "$web/package-lock.json" "$tools/package-lock.json" || [[ ! -x $tools/node_modules/.bin/esbuild ]]; then
  if ! command -v npm >/dev/null; then
    echo "build-console: skipped: npm is not installed (scripts/install-deps.sh installs it)" >&2
    exit 77
  fi
  cp "$web/package.json" "$web/package-lock.json" "$tools/"
  if ! (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error >"$tools/npm-ci.log" 2>&1); then
    if ! (cd "$tools" && timeout 20 npm ping >/dev/null 2>&1); then
      echo "build-console: skipped: npm cannot reach its registry" >&2
      exit 77
    fi
    cat "$tools/npm-ci.log" >&2
    exit 1
  fi
fi

out=$dist
if $check; then
  out=$(mktemp -d -t unisched-console.XXXXXX)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
# The same flags every time: the bytes depend only on the sources and the pinned esbuild.
common=(--bundle --minify --charset=utf8 --legal-comments=none --log-level=warning)
(cd "$web" && NODE_PATH=$tools/node_modules "$tools/node_modules/.bin/esbuild" src/main.js "${common[@]}" \
  --format=iife --target=es2020 --outfile="$out/app.js")
(cd "$web" && NODE_PATH=$tools/node_modules "$tools/node_modules/.bin/esbuild" src/app.css "${common[@]}" \
  --outfile="$out/app.css")
cp "$web/src/index.html" "$out/index.html"

if $check; then
  status=0
  for f in index.html app.js app.css; do
    if ! cmp -s "$out/$f" "$dist/$f"; then
      echo "build-console: src/console/dist/$f is not what its sources build to: run scripts/build-console.sh and commit" >&2
      status=1
    fi
  done
  [[ $status == 0 ]] && echo "build-console: the committed bundle is the sources' ($(cat "$dist"/app.js "$dist"/app.css | wc -c) bytes)"
  exit $status
fi
echo "build-console: wrote $(ls "$out" | tr '\n' ' ')($(cat "$out"/app.js "$out"/app.css | wc -c) bytes)"
