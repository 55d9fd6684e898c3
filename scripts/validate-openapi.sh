#!/usr/bin/env bash
# Validates docs/openapi.yaml with a pinned validator from npm, installed into
# build/tools (offline after the first install).
#   validate-openapi.sh --install      install the validator only
#   validate-openapi.sh FILE           validate FILE
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/build/tools"
validator="$tools/node_modules/.bin/swagger-cli"
if [ ! -x "$validator" ]; then
  mkdir -p "$tools"
  (cd "$tools" && npm install --no-audit --no-fund --no-save --no-package-lock --loglevel=error \
     @apidevtools/swagger-cli@4.0.4 >/dev/null)
fi
[ "${1:-}" = "--install" ] && exit 0
exec "$validator" validate "${1:?openapi file}"
