#!/bin/sh
# Runs inside the image while it is built (docker/Dockerfile and
# docker/Dockerfile.build): the Debian 12 packages the three binaries need at
# run time, the account jobs run as, the directories. Nothing else.
#
#   image-setup.sh [EXTRA_PACKAGES...]
#
# The libraries are what `ldd build/unisched` names, by package (dpkg -S),
# and the two it opens at run time when it first needs them (dlopen):
# libpq5 for a PostgreSQL store and libcurl4 for object stores (data
# staging). unisched-supervisor and unisched-sandbox are static (libseccomp
# inside).
# Left out on purpose (docs/deploy.md "What is in the image"):
#  - libopenblas0 and OpenMPI: `unisched baseline` opens them (dlopen) only
#    when its DGEMM runs as a job; a node image that runs the baseline adds
#    them with EXTRA_PACKAGES="libopenblas0-pthread openmpi-bin".
#  - whatever the jobs themselves need (python3, ...): jobs on an agent run
#    in the agent's container, so they are EXTRA_PACKAGES too.
set -eu

runtime_packages="
  libstdc++6 libgcc-s1
  libjemalloc2
  libpq5 libcurl4
  libsqlite3-0
  libtinyxml2-9
  libyaml-cpp0.7
  libspdlog1.10 libfmt9
  libprometheus-cpp-core1.0
  libssl3 zlib1g
  ca-certificates
  curl
"
# curl: the HEALTHCHECK, creating node tokens, and the quick-start's calls.
# ca-certificates: agents and clients on https:// with the system's CAs.

# No service may start while packages install (none of these has one, but a
# job package in EXTRA_PACKAGES may).
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $runtime_packages "$@" >/dev/null
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/sbin/policy-rc.d

# Jobs never run as root: by default they run as this dedicated account
# (scripts/install-deps.sh makes the same one on a host).
id unisched-job >/dev/null 2>&1 ||
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin unisched-job

# The daemon's and the agent's state (volumes in docker/compose.yaml), and
# the config directory.
mkdir -p /var/lib/unisched /var/lib/unisched-agent /etc/unisched
chmod 0711 /var/lib/unisched
chmod 0711 /var/lib/unisched-agent
