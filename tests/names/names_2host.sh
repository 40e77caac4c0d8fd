#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# names_2host.sh NAMES_2HOST p2p|etcd - names across two hosts: two network
# namespaces joined by a veth pair (10.77.0.1/24 and 10.77.0.2/24, nothing
# else between them), an agent in one, a client in the other
# (tests/names/names_2host.c says what each checks).
#   p2p:  no directory; the client has the agent's address only; the
#         agent's table is past one handshake message (pieces).
#   etcd: a real etcd runs in the agent's namespace on 10.77.0.1; both reach
#         it by that address; the client sees the agent leave (SIGKILL, lease
#         runs out) and come back through its watch.
# Skips (77) with the reason without root / CAP_NET_ADMIN / ip / etcd.
# Namespaces are named gwn<pid>a / gwn<pid>b (parallel runs do not clash),
# removed on exit by a trap, and left-overs of a run that was killed
# (ctest timeout) are removed by the next run.
set -u
bin=$1 mode=$2
skip() { echo "SKIP: $*"; exit 77; }
fail=0
err() { echo "FAIL: $*"; fail=1; }

[ "$(id -u)" = 0 ] || skip "not root: making network namespaces needs root (CAP_NET_ADMIN)"
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2: apt-get install iproute2)"
etcd_bin=
if [ "$mode" = etcd ]; then
  etcd_bin=${GWT_ETCD:-$(command -v etcd || true)}
  [ -n "$etcd_bin" ] && [ -x "$etcd_bin" ] ||
    skip "no etcd binary (Debian: apt-get install etcd-server; or set GWT_ETCD)"
fi

ns_gone() { # removes namespace $1 and the processes this test started in it
  for p in $(ip netns pids "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  ip netns del "$1" 2>/dev/null
}
# left-overs of earlier runs whose script no longer lives
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^gwn[0-9]+[ab]$'); do
  pid=${ns#gwn}; pid=${pid%?}
  kill -0 "$pid" 2>/dev/null || ns_gone "$ns"
done

A=gwn$$a B=gwn$$b
tmp=$(mktemp -d /tmp/gwn2host.XXXXXX) || exit 1
cleanup() {
  ns_gone "$A"; ns_gone "$B"
  if [ $fail = 0 ]; then rm -rf "$tmp"; else echo "(logs kept in $tmp)"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

if ! out=$(ip netns add "$A" 2>&1); then
  skip "cannot make a network namespace (no CAP_NET_ADMIN?): $out"
fi
ip netns add "$B" &&
  ip link add veth0 netns "$A" type veth peer name veth1 netns "$B" &&
  ip -n "$A" addr add 10.77.0.1/24 dev veth0 && ip -n "$B" addr add 10.77.0.2/24 dev veth1 &&
  ip -n "$A" link set veth0 up && ip -n "$B" link set veth1 up &&
  ip -n "$A" link set lo up && ip -n "$B" link set lo up ||
  { fail=1; echo "FAIL: setting up the namespaces and the veth pair"; exit 1; }
echo "namespaces $A (10.77.0.1) and $B (10.77.0.2), joined by a veth pair"

export GPUWIRE_TRANSPORTS=tcp GPUWIRE_PEERS= GPUWIRE_DIRECTORY= GPUWIRE_AUTH_SECRET=two-host-secret
if [ "$mode" = etcd ]; then
  ip netns exec "$A" "$etcd_bin" --name gwn --data-dir "$tmp/etcd" \
    --listen-client-urls http://10.77.0.1:2379 --advertise-client-urls http://10.77.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster gwn=http://127.0.0.1:2380 >"$tmp/etcd.log" 2>&1 &
  ip netns exec "$B" "$bin" wait-etcd 10.77.0.1:2379 30 ||
    { err "etcd in $A is not reachable from $B (see $tmp/etcd.log)"; exit 1; }
  export GPUWIRE_DIRECTORY=etcd://10.77.0.1:2379 GPUWIRE_DIRECTORY_PREFIX=/gwn2host/ GPUWIRE_DIRECTORY_TTL=2
fi

wait_for() { # file seconds
  i=0
  while [ ! -e "$1" ]; do
    i=$((i + 1)); [ $i -gt $(($2 * 10)) ] && return 1
    sleep 0.1
  done
}

# peer-to-peer: 1,000 more names make the table pass one handshake message
# (about 55 KB): it crosses in pieces
[ "$mode" = p2p ] && export GWT_PAD=1000
ip netns exec "$A" "$bin" agent kv0 10.77.0.1:0 "$tmp" >"$tmp/agent1.log" 2>&1 &
apid=$!
ip netns exec "$B" "$bin" client kv0 "$mode" "$tmp" >"$tmp/client.log" 2>&1 &
cpid=$!

if [ "$mode" = etcd ]; then
  if wait_for "$tmp/client.step1" 60; then
    kill -9 $apid; wait $apid 2>/dev/null
    rm -f "$tmp/agent.addr"; touch "$tmp/agent.killed"
    echo "agent killed (SIGKILL): its lease must run out"
    if wait_for "$tmp/client.step2" 60; then
      ip netns exec "$A" "$bin" agent kv0 10.77.0.1:0 "$tmp" >"$tmp/agent2.log" 2>&1 &
      apid=$!
      echo "agent started again"
    fi
  fi
fi
wait $cpid
crc=$?
kill -TERM $apid 2>/dev/null; wait $apid
arc=$?
for f in "$tmp"/agent*.log "$tmp/client.log"; do echo "---- ${f##*/}"; cat "$f"; done
[ $crc = 0 ] || err "the client exited $crc"
[ $arc = 0 ] || err "the agent exited $arc"
[ $fail = 0 ] && echo "PASS: names across two namespaces ($mode)"
exit $fail
