#!/bin/sh
# Creates a node token for each pool named (POST /v1/node-tokens) and writes
# it to DIR/POOL.token (0600), for agents to read with --token-file. A pool
# whose file exists already is left alone, so a restart makes no new token.
# Run inside the image (docker/compose.yaml's node-tokens service, the launch
# check of scripts/make-image.sh):
#
#   node-tokens.sh URL ADMIN_TOKEN_FILE DIR POOL...
#
# It waits up to 120 s for URL/healthz first. The admin token is the
# daemon's state-dir/admin.token (a volume shared read-only) or a file made
# from UNISCHED_ADMIN_TOKEN.
set -eu
url=$1 admin_file=$2 dir=$3
shift 3

waited=0
until curl -fsS -o /dev/null "$url/healthz"; do
  [ "$waited" -lt 120 ] || { echo "node-tokens: $url/healthz did not answer within 120 s" >&2; exit 1; }
  sleep 1
  waited=$((waited + 1))
done
waited=0
until [ -s "$admin_file" ]; do
  [ "$waited" -lt 30 ] || { echo "node-tokens: no admin token in $admin_file" >&2; exit 1; }
  sleep 1
  waited=$((waited + 1))
done

umask 077
mkdir -p "$dir"
for pool in "$@"; do
  if [ -s "$dir/$pool.token" ]; then
    echo "node-tokens: $dir/$pool.token exists, kept"
    continue
  fi
  answer=$(curl -fsS -H "Authorization: Bearer $(cat "$admin_file")" "$url/v1/node-tokens" \
    -d "{\"pool\": \"$pool\"}")
  # {"token": "usk_...", "pool": "...", ...}: the string after "token".
  token=$(printf '%s' "$answer" | sed -n 's/.*"token" *: *"\([^"]*\)".*/\1/p')
  [ -n "$token" ] || { echo "node-tokens: no token in the answer: $answer" >&2; exit 1; }
  printf '%s\n' "$token" >"$dir/$pool.token.tmp"
  mv "$dir/$pool.token.tmp" "$dir/$pool.token"
  echo "node-tokens: wrote $dir/$pool.token"
done
