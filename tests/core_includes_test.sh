#!/usr/bin/env bash
# Fails if a core module (common, model, router, policy, scheduler) includes a header
# of an adapter library. The CMake link graph keeps those libraries away from
# the core targets; this catches header-only ones (Asio, Beast) that would
# otherwise compile without linking anything.
set -u
root=${1:?source dir}
pattern='#\s*include\s*[<"](boost/|sqlite3|yaml-cpp/|prometheus/|spdlog/|nlohmann/|unisched/(config|store|executor|api|auth|metrics|codec|http|client|sim)/)'
hits=$(grep -rEn "$pattern" "$root"/src/{common,model,router,policy,scheduler,ledger} "$root"/include/unisched/{common,model,router,policy,scheduler,ledger} 2>/dev/null)
if [ -n "$hits" ]; then
  echo "core files include adapter headers:"; echo "$hits"; exit 1
fi
echo "core is clean"
