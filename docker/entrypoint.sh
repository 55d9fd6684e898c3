#!/bin/sh
# The image's entry point: `unisched ARGS...` (server, agent, or any client
# command), or ARGS as a command of their own when the first is a path or a
# shell (`podman run IMAGE sh`).
#
# UNISCHED_WAIT_FOR="FILE ..." first waits (up to UNISCHED_WAIT_SECONDS, 120)
# until each FILE exists and is not empty: an agent's node token, written by
# the node-tokens service of docker/compose.yaml once the daemon answers.
set -eu

if [ -n "${UNISCHED_WAIT_FOR:-}" ]; then
  for file in $UNISCHED_WAIT_FOR; do
    waited=0
    until [ -s "$file" ]; do
      if [ "$waited" -ge "${UNISCHED_WAIT_SECONDS:-120}" ]; then
        echo "unisched-entrypoint: $file did not appear within ${UNISCHED_WAIT_SECONDS:-120} s" >&2
        exit 1
      fi
      sleep 1
      waited=$((waited + 1))
    done
  done
fi

case "${1:-}" in
  /* | sh | bash) exec "$@" ;;
  *) exec /usr/local/bin/unisched "$@" ;;
esac
