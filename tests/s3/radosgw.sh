#!/usr/bin/env bash
# A real S3 server for the tests (docs/data.md, "Testing"): Ceph's radosgw on
# a throw-away single-node cluster (one monitor, one OSD on memstore, no
# authentication between the daemons), which checks SigV4 signatures. After
# shared/anchors/radosgw/start.sh, with one change: the monitor's address is
# written as a msgr v1 address, so that it can listen on a port other than
# 6789 (an address without the v1: prefix on another port is taken for msgr2,
# which the cluster does not bind, and the OSD never reaches the monitor):
# test runs side by side each take ports of their own.
#
#   tests/s3/radosgw.sh start DIR PORT   S3 on 127.0.0.1:PORT, the monitor on PORT+1; DIR/env then
#                                        holds UNISCHED_TEST_S3_URL, _ACCESS and _SECRET
#   tests/s3/radosgw.sh stop DIR         its daemons stopped by their pid files, DIR removed
#
# Packages: ceph-mon ceph-osd radosgw ceph-common uuid-runtime (scripts/install-deps.sh).
# Starts in about 15 s on the project's 2-core machine.
set -uo pipefail
cmd=${1:?usage: $0 start|stop DIR [PORT]}
dir=${2:?usage: $0 start|stop DIR [PORT]}

stop() {
  for p in "$dir"/cluster/run/*.pid; do [ -f "$p" ] && kill "$(cat "$p" 2>/dev/null)" 2>/dev/null; done
  for _ in $(seq 1 20); do
    alive=0
    for p in "$dir"/cluster/run/*.pid; do [ -f "$p" ] && kill -0 "$(cat "$p" 2>/dev/null)" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.2
  done
  for p in "$dir"/cluster/run/*.pid; do [ -f "$p" ] && kill -9 "$(cat "$p" 2>/dev/null)" 2>/dev/null; done
  rm -rf "$dir"
}

case "$cmd" in
  stop) stop; exit 0 ;;
  start) ;;
  *) echo "usage: $0 start|stop DIR [PORT]" >&2; exit 2 ;;
esac

port=${3:?usage: $0 start DIR PORT}
monport=$((port + 1))
command -v radosgw >/dev/null || { echo "radosgw.sh: Ceph's radosgw is not installed: run scripts/install-deps.sh" >&2; exit 1; }
[ -d "$dir" ] && stop
D=$dir/cluster
mkdir -p "$D"/{mon,osd0,run,log,rgw}
fail() {
  echo "radosgw.sh: $*" >&2
  for log in "$D"/log/*.log "$D"/log/*.out; do [ -f "$log" ] && { echo "== $log" >&2; grep -v NetHandler "$log" | tail -5 >&2; }; done
  # Each failed attempt's logs are kept whole for a look afterwards (a start
  # failed once in CI, the OSD's fsid all zeros, and never again by hand).
  kept=$(mktemp -d "${TMPDIR:-/tmp}/unisched-s3-failed-XXXXXX") && cp -r "$D/log" "$D/ceph.conf" "$kept/" 2>/dev/null &&
    echo "radosgw.sh: this attempt's logs are kept in $kept" >&2
  stop
  # A daemon of a cluster stopped just before may still hold a port: once more, a little later.
  if [ "${RADOSGW_RETRY:-0}" -lt 2 ]; then
    sleep 2
    RADOSGW_RETRY=$((${RADOSGW_RETRY:-0} + 1)) exec "$0" start "$dir" "$port"
  fi
  exit 1
}
fsid=$(uuidgen)
cat > "$D/ceph.conf" <<CONF
[global]
fsid = $fsid
mon initial members = a
mon host = [v1:127.0.0.1:$monport]
public network = 127.0.0.0/8
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd objectstore = memstore
memstore device bytes = ${MEMSTORE_BYTES:-1073741824}
osd crush chooseleaf type = 0
run dir = $D/run
log file = $D/log/\$name.log
admin socket = $D/run/\$name.asok
pid file = $D/run/\$name.pid
ms bind msgr2 = false
ms bind ipv4 = true
ms bind ipv6 = false
[mon.a]
mon data = $D/mon
[osd.0]
osd data = $D/osd0
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $D/rgw
CONF
C=(-c "$D/ceph.conf")
monmaptool --create --addv a "[v1:127.0.0.1:$monport]" --fsid "$fsid" "$D/monmap" >/dev/null || fail "monmaptool failed"
ceph-mon "${C[@]}" --mkfs -i a --monmap "$D/monmap" || fail "mon mkfs failed"
ceph-mon "${C[@]}" -i a || fail "the monitor did not start"
timeout 20 ceph "${C[@]}" -s >/dev/null 2>&1 || fail "the monitor does not answer"
id=$(timeout 20 ceph "${C[@]}" osd create 2>/dev/null) || fail "osd create failed"
ceph-osd "${C[@]}" -i "$id" --mkfs >"$D/log/osd-mkfs.out" 2>&1 || fail "osd mkfs failed"
ceph-osd "${C[@]}" -i "$id" || fail "the OSD did not start"
for _ in $(seq 1 60); do timeout 5 ceph "${C[@]}" osd stat 2>/dev/null | grep -q '1 up' && break; sleep 1; done
radosgw "${C[@]}" -n client.rgw.a || fail "radosgw did not start"
for _ in $(seq 1 60); do curl -s "http://127.0.0.1:$port/" >/dev/null && break; sleep 1; done
access=AK$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
secret=SK$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
# The gateway answers before it has made every pool of its own; on a machine's
# first run (cold caches) the user's creation can fail for a while: tried again.
made=0
for _ in $(seq 1 15); do
  if radosgw-admin "${C[@]}" user create --uid=test --display-name=test --access-key="$access" --secret="$secret" \
    >"$D/log/user-create.out" 2>&1; then
    made=1
    break
  fi
  sleep 1
done
[ $made = 1 ] || { cat "$D/log/user-create.out" >&2; fail "no S3 user"; }
printf 'UNISCHED_TEST_S3_URL=http://127.0.0.1:%s\nUNISCHED_TEST_S3_ACCESS=%s\nUNISCHED_TEST_S3_SECRET=%s\n' \
  "$port" "$access" "$secret" > "$dir/env"
echo "radosgw up on 127.0.0.1:$port ($dir)"
