#!/usr/bin/env bash
# Installs every Debian package unisched needs to build, test and run, and the
# unprivileged account jobs run as. Idempotent: a second run installs nothing.
# Needs root (or sudo) on Debian 12; nothing here downloads anything but
# Debian packages and pinned npm packages.
set -euo pipefail

packages=(
  # build
  g++ make cmake ninja-build ccache pkg-config clang-format
  # libraries (see shared/design/toolchain.md for the versions verified)
  libboost-dev nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libsqlite3-dev sqlite3 prometheus-cpp-dev libgtest-dev libgmock-dev libssl-dev zlib1g-dev
  # the daemon's allocator (CMakeLists.txt says why)
  libjemalloc-dev
  # the sandboxes' system call filter (linked statically into unisched-sandbox and the supervisor)
  libseccomp-dev
  # run and test: useradd, setpriv/flock, ps, curl for the quick-start, node for the OpenAPI check
  passwd util-linux procps curl ca-certificates nodejs npm
  # the benchmark scripts read JSON and do arithmetic
  jq bc
  # promtool checks the /metrics exposition in the tests
  prometheus
  # make fuzz / make fuzz-smoke: clang and its libFuzzer runtime (tests/fuzz)
  clang libfuzzer-14-dev
)

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

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

# Jobs never run as root: by default they run as this dedicated account.
if ! id unisched-job >/dev/null 2>&1; then
  as_root useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin unisched-job
  echo "install-deps: created user unisched-job"
fi
