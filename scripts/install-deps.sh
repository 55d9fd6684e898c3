#!/usr/bin/env bash
# Installs every Debian package unisched needs to build, test and run, and the
# unprivileged account jobs run as. Idempotent: a second run installs nothing.
# Needs root (or sudo) on Debian 12; nothing here downloads anything but
# Debian packages and pinned npm packages.
#   install-deps.sh          everything (make build, make test, make bench, make fuzz)
#   install-deps.sh --run    only what building and running the daemon needs (make run)
set -euo pipefail

run_only=false
case "${1:-}" in
  --run) run_only=true ;;
  "") ;;
  *) echo "usage: install-deps.sh [--run]" >&2; exit 2 ;;
esac

# What `make run` needs: to build the three binaries a daemon runs and to run them.
run_packages=(
  # build
  g++ make cmake ninja-build ccache pkg-config
  # libraries (see shared/design/toolchain.md for the versions verified)
  libboost-dev nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libsqlite3-dev libpq-dev prometheus-cpp-dev libssl-dev zlib1g-dev
  # the daemon's allocator (CMakeLists.txt says why)
  libjemalloc-dev
  # object stores (docs/data.md): S3 over libcurl (its SigV4 signing), S3's XML answers
  libcurl4-openssl-dev libtinyxml2-dev
  # the sandboxes' system call filter (linked statically into unisched-sandbox and the supervisor)
  libseccomp-dev
  # `unisched baseline`: DGEMM through OpenBLAS, across nodes through OpenMPI (docs/baseline.md);
  # compiled against their headers, opened when a baseline job runs
  libopenblas-dev libopenmpi-dev openmpi-bin
  # run: useradd, setpriv/flock, ps, curl for the quick-start
  passwd util-linux procps curl ca-certificates
)
# What only the tests, benchmarks and fuzzers need (make test, make bench, make fuzz).
test_packages=(
  clang-format libgtest-dev libgmock-dev
  # the tests read the store with the sqlite3 shell
  sqlite3
  # node for the OpenAPI checks and the console's bundle; Chromium for its browser test (docs/console.md)
  nodejs npm chromium
  # the benchmark scripts read JSON and do arithmetic; the staging bench's curl + MD5 rows (openssl md5)
  jq bc openssl
  # promtool checks the /metrics exposition in the tests
  prometheus
  # make fuzz / make fuzz-smoke: clang and its libFuzzer runtime (tests/fuzz)
  clang libfuzzer-14-dev
  # multi-node tests: OpenMPI across agents in network namespaces joined by veth (iproute2)
  iproute2
  # object-store tests: Ceph's S3 gateway on a throw-away single-node cluster (tests/s3/radosgw.sh)
  ceph-mon ceph-osd radosgw ceph-common uuid-runtime
  # the seed's sequencing pipeline as a workflow (docs/workflows.md): read simulation, two aligners,
  # sorting and indexing, variant calling
  dwgsim bwa minimap2 samtools bcftools
)
packages=("${run_packages[@]}")
$run_only || packages+=("${test_packages[@]}")

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Installing a package never starts its service: the prometheus package
# would start a Prometheus on port 9090 on a systemd host, where the tests
# run promtool only. Debian's maintainer scripts ask /usr/sbin/policy-rc.d
# (invoke-rc.d and deb-systemd-invoke both do) and start nothing when it
# exits 101. One is put there for this script's installs only, unless the
# machine has one of its own, and removed when the script ends.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# install-deps.sh of unisched: no service starts while it installs\nexit 101\n' |
    as_root tee "$policy" >/dev/null
  as_root chmod 755 "$policy"
  trap 'as_root rm -f "$policy"' EXIT
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm on this machine may come from outside Debian; a working `npm` is enough.
if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  filtered=(); for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]}")
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi

# PostgreSQL 15's server for the store's tests (docs/store.md#testing), which
# start throw-away clusters of their own. Debian's packages would create and
# start a cluster "main" on port 5432 as they install; createcluster.conf of
# postgresql-common, installed first, tells them not to.
if ! $run_only && ! dpkg-query -W -f='${Status}' postgresql-15 2>/dev/null | grep -q "install ok installed"; then
  if ! dpkg-query -W -f='${Status}' postgresql-common 2>/dev/null | grep -q "install ok installed"; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-common
  fi
  as_root sed -i 's/^#\?\s*create_main_cluster\s*=.*/create_main_cluster = false/' /etc/postgresql-common/createcluster.conf
  grep -q '^create_main_cluster = false' /etc/postgresql-common/createcluster.conf ||
    echo 'create_main_cluster = false' | as_root tee -a /etc/postgresql-common/createcluster.conf >/dev/null
  echo "install-deps: installing postgresql-15 (no default cluster)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15
fi

# Jobs never run as root: by default they run as this dedicated account.
if ! id unisched-job >/dev/null 2>&1; then
  as_root useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin unisched-job
  echo "install-deps: created user unisched-job"
fi
