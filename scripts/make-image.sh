#!/usr/bin/env bash
# `make image`: the unisched image from the binaries already built, and the
# agent launch check inside it. Outside `make test` (docs/deploy.md).
#
#   scripts/make-image.sh [all|deps|base|image|check|cgroups]   (default: all)
#
# 1. deps:  podman, runc, debootstrap and what podman needs, from Debian,
#           with no service started (the policy-rc.d of install-deps.sh).
# 2. base:  a Debian 12 root made by debootstrap (variant minbase), kept as
#           $CACHE/debian-12-minbase.tar so that a second run reuses it, and
#           imported into podman as $BASE (no registry is reachable here).
# 3. image: podman build --runtime runc of docker/Dockerfile as $IMAGE.
# 4. check: the launch check: a daemon in one container, an agent in a
#           second one sharing its network namespace; a job submitted to
#           the agent's pool must end COMPLETED with exit code 0. Exits
#           non-zero otherwise. Containers, volumes and the libpod_parent
#           cgroups podman leaves are removed whatever the outcome.
# cgroups: only that removal (after `podman-compose down`, say).
#
# Environment: BUILD (build), IMAGE (localhost/unisched:latest), BASE
# (localhost/debian:12), CACHE ($BUILD/image, inside the repository),
# MIRROR (deb.debian.org), EXTRA_PACKAGES (for the image, see
# docker/Dockerfile).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
IMAGE=${IMAGE:-localhost/unisched:latest}
BASE=${BASE:-localhost/debian:12}
CACHE=${CACHE:-$BUILD/image}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
EXTRA_PACKAGES=${EXTRA_PACKAGES:-}
step=${1:-all}

# podman reads docker/containers.conf instead of the host's: runc, rlimits
# under this host's hard limits, cgroupfs, no journald (the file says why).
export CONTAINERS_CONF=$ROOT/docker/containers.conf
# The same on every command line, for a podman that ignores CONTAINERS_CONF.
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs --events-backend file)
ULIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=4096:4096)

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
now() { date +%s.%N; }
took() { printf '%.1f' "$(echo "$(now) - $1" | bc)"; }
say() { echo "make-image: $*"; }

deps() {
  local packages=(podman runc conmon debootstrap uidmap fuse-overlayfs slirp4netns containernetworking-plugins
    bc)
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "deps: all packages present"
    return
  fi
  # As scripts/install-deps.sh: no package's service starts while these
  # install (podman's socket and API units), through a policy-rc.d that is
  # there only during the install, unless the machine has one of its own.
  local policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# make-image.sh of unisched: no service starts while it installs\nexit 101\n' |
      as_root tee "$policy" >/dev/null
    as_root chmod 755 "$policy"
    trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  say "deps: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ -e "$policy" ] && grep -q 'make-image.sh of unisched' "$policy"; then
    as_root rm -f "$policy"
    trap - EXIT
  fi
}

base() {
  local tar=$CACHE/debian-12-minbase.tar
  mkdir -p "$CACHE"
  if [ ! -s "$tar" ]; then
    local t0 rootfs=$CACHE/rootfs
    t0=$(now)
    say "base: debootstrap --variant=minbase bookworm from $MIRROR"
    as_root rm -rf "$rootfs"
    as_root debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
      { tail -20 "$CACHE/debootstrap.log"; exit 1; }
    # The image's apt looks where debootstrap looked, security updates too.
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
      "$MIRROR" "$MIRROR" | as_root tee "$rootfs/etc/apt/sources.list" >/dev/null
    as_root rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    as_root tar --numeric-owner -C "$rootfs" -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    as_root rm -rf "$rootfs"
    say "base: $tar made in $(took "$t0") s"
  else
    say "base: reusing $tar"
  fi
  # Imported again when the tar is newer than the image (or there is none).
  local created tar_time
  created=$("${PODMAN[@]}" image inspect --format '{{.Created.Unix}}' "$BASE" 2>/dev/null || echo 0)
  tar_time=$(stat -c %Y "$tar")
  if [ "$created" -lt "$tar_time" ]; then
    "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' "$tar" "$BASE" >/dev/null
    say "base: imported as $BASE"
  else
    say "base: $BASE is there"
  fi
}

image() {
  local b
  for b in unisched unisched-supervisor unisched-sandbox; do
    [ -x "$BUILD/$b" ] || { echo "make-image: $BUILD/$b is missing: make build first (make image does)" >&2; exit 1; }
  done
  local t0
  t0=$(now)
  # The binaries without their debug sections (RelWithDebInfo's unisched is
  # about 370 MB, 30 MB without); the symbols stay, for backtraces. The
  # staging folder is in the build context (the repository).
  local bin=$CACHE/bin
  case "$(realpath -m "$bin")" in "$ROOT"/*) ;; *) echo "make-image: CACHE must be inside $ROOT" >&2; exit 1 ;; esac
  mkdir -p "$bin"
  for b in unisched unisched-supervisor unisched-sandbox; do
    objcopy --strip-debug "$BUILD/$b" "$bin/$b.tmp" && mv "$bin/$b.tmp" "$bin/$b"
  done
  local previous
  previous=$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  "${PODMAN[@]}" build --format docker "${ULIMITS[@]}" \
    --build-arg BASE="$BASE" --build-arg BIN="$(realpath --relative-to="$ROOT" "$bin")" \
    --build-arg EXTRA_PACKAGES="$EXTRA_PACKAGES" \
    -f docker/Dockerfile -t "$IMAGE" . >"$CACHE/build.log" 2>&1 || { tail -30 "$CACHE/build.log"; exit 1; }
  say "image: $IMAGE built in $(took "$t0") s, $("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE" |
    awk '{printf "%.0f MB", $1 / 1e6}')"
  # The image it replaces, untagged now, unless a container still uses it.
  if [ -n "$previous" ] && [ "$previous" != "$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$IMAGE")" ]; then
    "${PODMAN[@]}" rmi "$previous" >/dev/null 2>&1 || true
  fi
  # Every library the daemon links is in the image, and the two it opens at
  # run time (libpq for a PostgreSQL store, libcurl for object stores).
  if "${PODMAN[@]}" run --rm --network none --no-healthcheck "${ULIMITS[@]}" "$IMAGE" sh -c \
    'ldd /usr/local/bin/unisched; for l in libpq.so.5 libcurl.so.4; do
       ldconfig -p | grep -q "$l " || echo "$l => not found"; done' |
    grep 'not found'; then
    echo "make-image: libraries missing in the image" >&2
    exit 1
  fi
  # And the configs it carries are valid.
  "${PODMAN[@]}" run --rm --network none --no-healthcheck "${ULIMITS[@]}" "$IMAGE" sh -c \
    'for c in /etc/unisched/*.yaml; do printf "%s: " "$c"; unisched validate-config "$c" || exit 1; done'
}

# ---- the launch check ----
RUN_ID=unisched-check-$$
cleanup_check() {
  # The agent first: it is in the daemon's network namespace.
  "${PODMAN[@]}" rm -f -v -t 0 "$RUN_ID-agent" >/dev/null 2>&1 || true
  "${PODMAN[@]}" rm -f -v -t 0 "$RUN_ID-daemon" >/dev/null 2>&1 || true
  "${PODMAN[@]}" volume rm -f "$RUN_ID-state" "$RUN_ID-tokens" >/dev/null 2>&1 || true
  remove_libpod_cgroups
}

# podman with cgroupfs leaves its parent group behind in every hierarchy
# (toolchain.md §5); only empty ones are removed (rmdir fails otherwise), so
# another user's running containers keep theirs.
remove_libpod_cgroups() {
  local dir
  for dir in /sys/fs/cgroup/*/libpod_parent /sys/fs/cgroup/unified/libpod_parent; do
    [ -d "$dir" ] || continue
    find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

check() {
  local t0 config=/etc/unisched/agents.yaml pool=cpu-pool node=x86-c1m1-agent-01
  t0=$(now)
  trap cleanup_check EXIT
  "${PODMAN[@]}" volume create "$RUN_ID-state" >/dev/null
  "${PODMAN[@]}" volume create "$RUN_ID-tokens" >/dev/null
  # The daemon: no job runs here (agent nodes only), so no privilege; a
  # network namespace of its own with loopback only, which the agent joins.
  "${PODMAN[@]}" run -d --name "$RUN_ID-daemon" --network none --no-healthcheck "${ULIMITS[@]}" \
    --cap-drop all --security-opt no-new-privileges \
    -v "$RUN_ID-state:/var/lib/unisched" "$IMAGE" \
    server --config "$config" --state-dir /var/lib/unisched >/dev/null
  # A node token for the pool, made with the admin token of the daemon's state.
  "${PODMAN[@]}" run --rm --network "container:$RUN_ID-daemon" --no-healthcheck "${ULIMITS[@]}" \
    -v "$RUN_ID-state:/var/lib/unisched:ro" -v "$RUN_ID-tokens:/tokens" "$IMAGE" \
    /usr/local/bin/unisched-node-tokens http://127.0.0.1:8642 /var/lib/unisched/admin.token /tokens "$pool"
  # The agent: privileged, because it makes cgroups, switches to the job's
  # account and makes namespaces for sandboxed pools (docs/deploy.md).
  "${PODMAN[@]}" run -d --name "$RUN_ID-agent" --network "container:$RUN_ID-daemon" --no-healthcheck "${ULIMITS[@]}" \
    --privileged -v "$RUN_ID-tokens:/tokens:ro" "$IMAGE" \
    agent --server http://127.0.0.1:8642 --token-file "/tokens/$pool.token" --node "$node" --pool "$pool" \
    --state-dir "/var/lib/unisched-agent/$node" >/dev/null
  # A job for the pool, by the CLI in the daemon's container, with its token.
  local out
  if out=$("${PODMAN[@]}" exec "$RUN_ID-daemon" sh -c \
    'UNISCHED_TOKEN=$(cat /var/lib/unisched/admin.token) exec timeout 120 unisched submit --kind hpc --wait -- \
       /bin/sh -c "echo launch-check on \$(hostname) as \$(id -un)"' 2>&1); then
    local id
    id=$(printf '%s\n' "$out" | grep -o 'Job [0-9A-Za-z_-]*' | head -n 1 | cut -d' ' -f2)
    local log job
    log=$("${PODMAN[@]}" exec "$RUN_ID-daemon" sh -c \
      "UNISCHED_TOKEN=\$(cat /var/lib/unisched/admin.token) unisched log $id" 2>&1 || true)
    job=$("${PODMAN[@]}" exec "$RUN_ID-daemon" sh -c \
      "UNISCHED_TOKEN=\$(cat /var/lib/unisched/admin.token) unisched job $id" 2>&1 || true)
    echo "$out"
    echo "$job" | sed 's/^/  /'
    echo "  log: $log"
    if printf '%s\n' "$out" | grep -q 'COMPLETED' && printf '%s\n' "$job" | grep -q "$node" &&
      printf '%s\n' "$log" | grep -q 'launch-check on .* as unisched-job'; then
      say "check: PASSED in $(took "$t0") s: job $id ran on agent node $node as unisched-job and ended COMPLETED (exit 0)"
      return 0
    fi
  else
    echo "$out"
  fi
  echo "make-image: check FAILED; the daemon's and the agent's logs:" >&2
  "${PODMAN[@]}" logs "$RUN_ID-daemon" 2>&1 | tail -30 >&2
  "${PODMAN[@]}" logs "$RUN_ID-agent" 2>&1 | tail -30 >&2
  exit 1
}

case "$step" in
  deps) deps ;;
  base) deps && base ;;
  image) image ;;
  check) check ;;
  cgroups) remove_libpod_cgroups ;;
  all)
    t_all=$(now)
    deps
    base
    image
    check
    say "all done in $(took "$t_all") s"
    ;;
  *) echo "usage: $0 [all|deps|base|image|check|cgroups]" >&2; exit 2 ;;
esac
