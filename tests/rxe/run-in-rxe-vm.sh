#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run-in-rxe-vm.sh - gpuwire's Soft-RoCE runner (adapted from the project's shared
# tools/rxe-vm; see tests/rxe/README.md for its facts and pitfalls).
#
# Runs one command inside a throw-away qemu guest (software emulation,
# no KVM needed) that boots Debian's stock amd64 kernel with soft-RoCE (rdma_rxe) set up.
#
# The guest's root file system is the host's "/" shared read-only over virtio-9p, with a
# tmpfs overlay on top (writes inside the guest succeed but are thrown away), so programs
# built and installed on the host (libibverbs, perftest, your test binaries) run unchanged.
#
# usage:  run-in-rxe-vm.sh [--] COMMAND [ARG...]
#   COMMAND runs in the guest in the caller's current directory, with the caller's exported
#   environment, stdin from /dev/null, and stdout+stderr merged onto a guest serial port
#   that is copied to this script's stdout as it is produced (it is a tty in the guest;
#   TERM=dumb is set).  To use shell syntax, pass: bash -c '...'
#
# exit status: COMMAND's exit status; 124 if the VM ran past RXEVM_TIMEOUT;
#              125 if the VM or the rxe setup failed before COMMAND could report a status;
#              77 (with the reason on stderr) if the guest cannot be had here at all:
#              qemu or another host tool is missing, or the kernel package cannot be
#              downloaded (ctest reports that as "skipped").
#
# In the guest these are set for COMMAND:
#   RXE_DEV=rxe0 RXE_NETDEV=dummy0 RXE_IP=192.168.77.1 RXE_GID_INDEX=<RoCEv2 IPv4 GID index>
#   with RXEVM_PAIR=1 also: RXE_PAIR="rxea rxeb", RXEA_IP=192.168.78.1, RXEB_IP=192.168.78.2,
#   RXEA_GID_INDEX, RXEB_GID_INDEX (rxea/rxeb sit on the two ends of a veth pair and RoCE
#   packets between them really cross the veth; both ends stay in the initial network
#   namespace because rdma_rxe in this kernel routes only in the initial namespace).
#   The guest has no NIC: no packet can leave the VM.
#
# knobs (environment):
#   RXEVM_TIMEOUT  wall-clock seconds before the VM is killed (default 900)
#   RXEVM_MEM      guest RAM (default 2G)        RXEVM_SMP  guest vCPUs (default 2)
#   RXEVM_CACHE    where the kernel is unpacked and prepared (default ${XDG_CACHE_HOME:-~/.cache}/gpuwire/rxe-vm)
#   RXEVM_KERNEL_PKG  Debian kernel package (default: the newest one already prepared in
#                  RXEVM_CACHE, else what linux-image-amd64 depends on; RXEVM_UPDATE_KERNEL=1
#                  skips the cached one and asks apt again)
#   RXEVM_KERNEL_DEB  path of a linux-image .deb to use instead of downloading one
#   RXEVM_PAIR=1   also create rxea/rxeb on a veth pair (see above)
#   RXEVM_MODULES  extra guest kernel modules to load, e.g. "vgem"
#   RXEVM_RW_DIR   a host directory mounted read-write in the guest at the same path
#                  (otherwise guest writes go to a tmpfs overlay and are discarded)
#   RXEVM_VERBOSE=1  print timings and the guest console log (kernel + setup) to stderr
#   RXEVM_INSTALL=1  apt-get install missing host packages (needs root)
#
# host packages (Debian 12): qemu-system-x86 busybox-static cpio xz-utils kmod iproute2
#   plus, for verbs programs, libibverbs1 ibverbs-providers (and ibverbs-utils, perftest,
#   libibverbs-dev as needed); apt + dpkg to fetch the kernel on first use.
set -u -o pipefail

die() { echo "run-in-rxe-vm: $*" >&2; exit 125; }
skip() { echo "run-in-rxe-vm: SKIP: $*" >&2; exit 77; }
vlog() { [ "${RXEVM_VERBOSE:-0}" = 1 ] && echo "run-in-rxe-vm: $*" >&2; return 0; }

[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || die "usage: $0 [--] COMMAND [ARG...]"

TIMEOUT=${RXEVM_TIMEOUT:-900}
MEM=${RXEVM_MEM:-2G}
SMP=${RXEVM_SMP:-2}
CACHE=${RXEVM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuwire/rxe-vm}
T_START=$(date +%s.%N)

# ---- host prerequisites --------------------------------------------------------------
need_pkgs=""
for pair in qemu-system-x86_64:qemu-system-x86 cpio:cpio xz:xz-utils depmod:kmod modprobe:kmod \
            rdma:iproute2 ip:iproute2 timeout:coreutils flock:util-linux dpkg:dpkg; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "${pair%%:*}" >/dev/null 2>&1 \
    || need_pkgs="$need_pkgs ${pair#*:}"
done
[ -x /bin/busybox ] && ! LC_ALL=C ldd /bin/busybox >/dev/null 2>&1 || need_pkgs="$need_pkgs busybox-static"
if [ -n "$need_pkgs" ]; then
  if [ "${RXEVM_INSTALL:-0}" = 1 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need_pkgs >&2 \
      || die "apt-get install$need_pkgs failed"
  else
    skip "missing host packages:$need_pkgs (apt-get install them, run scripts/install-deps.sh, or set RXEVM_INSTALL=1)"
  fi
fi
export PATH="$PATH:/usr/sbin:/sbin"

# ---- kernel: download + unpack + prepare once, cached --------------------------------
mkdir -p "$CACHE" || die "cannot create $CACHE"
exec 9>"$CACHE/.lock"
flock 9 || die "cannot lock $CACHE/.lock"

if [ -n "${RXEVM_KERNEL_DEB:-}" ]; then
  PKG=$(dpkg-deb -f "$RXEVM_KERNEL_DEB" Package) || die "cannot read $RXEVM_KERNEL_DEB"
else
  PKG=${RXEVM_KERNEL_PKG:-}
  if [ -z "$PKG" ] && [ "${RXEVM_UPDATE_KERNEL:-0}" != 1 ]; then   # reuse the newest prepared kernel
    PKG=$(ls -t "$CACHE" 2>/dev/null | grep '^linux-image-' | grep -v '\.tmp$' | while read -r d; do
            [ -e "$CACHE/$d/.ready" ] && { echo "$d"; break; }; done)
  fi
  [ -n "$PKG" ] || PKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
                         awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$PKG" ] || skip "cannot resolve linux-image-amd64 (run 'apt-get update' first)"
fi
KDIR=$CACHE/$PKG
if [ ! -e "$KDIR/.ready" ]; then
  vlog "preparing $PKG in $KDIR"
  rm -rf "$KDIR" "$KDIR.tmp"; mkdir -p "$KDIR.tmp" || die "mkdir $KDIR.tmp"
  if [ -n "${RXEVM_KERNEL_DEB:-}" ]; then
    deb=$RXEVM_KERNEL_DEB
  else
    (cd "$KDIR.tmp" && apt-get download "$PKG" >&2) || { rm -rf "$KDIR.tmp"; skip "apt-get download $PKG failed (no network or apt sources?)"; }
    deb=$(ls "$KDIR.tmp"/*.deb)
  fi
  dpkg -x "$deb" "$KDIR.tmp/root" || die "dpkg -x $deb failed"
  rm -f "$KDIR.tmp"/*.deb
  kver=$(ls "$KDIR.tmp/root/lib/modules" | head -1)
  [ -n "$kver" ] || die "no lib/modules in $PKG"
  depmod -b "$KDIR.tmp/root" "$kver" || die "depmod failed"
  vmlinuz=$KDIR.tmp/root/boot/vmlinuz-$kver
  [ -f "$vmlinuz" ] || die "no $vmlinuz"
  # Uncompressed ELF vmlinux boots through PVH, skipping ~3 s of in-guest XZ decompression.
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" 2>/dev/null | head -1 | cut -d: -f1)
  xzrc=1
  if [ -n "$off" ]; then   # tail may die of SIGPIPE once xz has read the one stream: check xz only
    tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream > "$KDIR.tmp/vmlinux" 2>/dev/null
    xzrc=${PIPESTATUS[1]}
  fi
  if [ "$xzrc" = 0 ] && [ "$(head -c 4 "$KDIR.tmp/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
    echo "$KDIR/vmlinux" > "$KDIR.tmp/bootimage"
  else
    rm -f "$KDIR.tmp/vmlinux"; echo "$KDIR/root/boot/vmlinuz-$kver" > "$KDIR.tmp/bootimage"
  fi
  # Tiny initramfs: static busybox + the modules needed to mount the host root over 9p.
  ird=$KDIR.tmp/initrd; mkdir -p "$ird"/{bin,mods,proc,sys,dev,lower,upper,newroot}
  cp /bin/busybox "$ird/bin/busybox"
  n=10
  for f in $(modprobe -d "$KDIR.tmp/root" -S "$kver" --show-depends -a virtio_pci 9pnet_virtio 9p overlay \
                crc32_generic rdma_rxe ib_uverbs dummy veth \
             | awk '/^insmod/{print $2}' | awk '!seen[$0]++'); do
    b=$(basename "$f"); b=${b%.xz}; b=${b%.zst}; b=${b%.gz}
    case "$f" in
      *.xz) xz -dc "$f" ;; *.zst) zstd -dcq "$f" ;; *.gz) gzip -dc "$f" ;; *) cat "$f" ;;
    esac > "$ird/mods/$n-$b" || die "cannot copy module $f"
    n=$((n + 1))
  done
  for m in 9p overlay rdma_rxe dummy veth; do   # built-in would be fine too, but Debian has them as modules
    ls "$ird/mods" | grep -q -- "-$m.ko\$" || grep -q "/$m.ko" "$KDIR.tmp/root/lib/modules/$kver/modules.builtin" \
      || die "kernel module $m not found in $PKG"
  done
  cat > "$ird/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox mkdir -p /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
fail() { echo "rxevm-init: FAILED: $*"; poweroff -f; sleep 10; }
for m in /mods/*.ko; do
  case "$m" in *-dummy.ko) insmod "$m" numdummies=0 ;; *) insmod "$m" ;; esac || fail "insmod $m"
done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /lower || fail "9p hostroot"
mount -t tmpfs -o mode=755 tmpfs /upper && mkdir /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot || fail "overlay"
mount -t tmpfs -o mode=755 tmpfs /newroot/run && mkdir -p /newroot/run/rxevm || fail "tmpfs /run"
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=512000 rxevmctl /newroot/run/rxevm || fail "9p ctl"
mount --move /proc /newroot/proc; mount --move /sys /newroot/sys; mount --move /dev /newroot/dev
echo "rxevm-init: switch_root at uptime $(cut -d' ' -f1 /newroot/proc/uptime)"
exec switch_root /newroot /bin/bash /run/rxevm/stage2.sh
fail "switch_root"
EOF
  chmod +x "$ird/init"
  (cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) > "$KDIR.tmp/initrd.gz" || die "cpio failed"
  rm -rf "$ird"
  echo "$kver" > "$KDIR.tmp/kver" && mv "$KDIR.tmp" "$KDIR" && touch "$KDIR/.ready" || die "cannot finish $KDIR"
fi
flock -u 9
KVER=$(cat "$KDIR/kver"); BOOT=$(cat "$KDIR/bootimage")

# ---- per-run control directory (shared read-write with the guest) ---------------------
RW_ABS=""
if [ -n "${RXEVM_RW_DIR:-}" ]; then
  RW_ABS=$(cd "$RXEVM_RW_DIR" 2>/dev/null && pwd -P) || die "RXEVM_RW_DIR=$RXEVM_RW_DIR is not a directory"
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/rxevm-run.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$T"' EXIT
mkdir "$T/ctl"
{
  printf 'CMD=('; printf '%q ' "$@"; printf ')\n'
  printf 'CWD=%q\n' "$PWD"
  printf 'KMODDIR=%q\n' "$KDIR/root/lib/modules"
  printf 'PAIR=%q\nEXTRA_MODULES=%q\nRW_DIR=%q\n' "${RXEVM_PAIR:-0}" "${RXEVM_MODULES:-}" "$RW_ABS"
} > "$T/ctl/config"
export -p > "$T/ctl/env"

cat > "$T/ctl/stage2.sh" <<'EOF'
#!/bin/bash
# runs as PID 1 in the guest, on the overlay of the host root
exec </dev/null >/dev/console 2>&1
CTL=/run/rxevm
up() { cut -d' ' -f1 /proc/uptime; }
bail() { echo "rxevm: SETUP FAILED: $*"; echo "rxevm: SETUP FAILED: $*" > /dev/ttyS1
         echo 125 > $CTL/status; sync; /bin/busybox poweroff -f; sleep 10; }
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
source $CTL/config
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
ln -sf /proc/self/fd /dev/fd; ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
mkdir -p /lib/modules && mount --bind "$KMODDIR" /lib/modules || bail "bind $KMODDIR"
echo "rxevm: stage2 at uptime $(up)"
# the initramfs already loaded crc32_generic (rxe's ICRC needs crypto "crc32"), ib_core,
# ib_uverbs, rdma_rxe, dummy and veth
[ -d /sys/module/rdma_rxe ] && [ -d /sys/module/dummy ] && [ -d /sys/module/veth ] || bail "modules missing"
for m in $EXTRA_MODULES; do modprobe "$m" || bail "modprobe $m"; done
ip link set lo up
gid_index() {  # print the index of the RoCEv2 IPv4-mapped GID of $1, waiting up to 10 s
  local d=$1 i g t
  for t in $(seq 100); do
    for g in /sys/class/infiniband/$d/ports/1/gids/*; do
      case "$(cat "$g" 2>/dev/null)" in
        0000:0000:0000:0000:0000:ffff:*)
          i=${g##*/}
          [ "$(cat /sys/class/infiniband/$d/ports/1/gid_attrs/types/$i 2>/dev/null)" = "RoCE v2" ] && { echo "$i"; return 0; } ;;
      esac
    done
    sleep 0.1
  done
  return 1
}
# Every RoCE packet here enters the stack through a per-CPU backlog (lo for
# rxe0, the veth peer for rxea/rxeb) of netdev_max_backlog packets (1000).  One
# 1 MiB RDMA READ response is 1024 packets at mtu 1024, and the tests keep one
# in flight per QP: the backlog overflowed, rxe failed to send replies and
# acks (hw_counters send_err, "Failed sending ACK" in dmesg), READs were
# retried (completer_retry_err), and now and then this kernel's rxe_completer
# moved a QP to the error state with no error completion (a WARNING in
# rxe_completer in dmesg): gpuwire saw only the flush of a posted receive
# (verbs_api rxea rxeb under load).  Deep backlog: no send_err.
sysctl -qw net.core.netdev_max_backlog=65536 || bail "netdev_max_backlog"
ip link add dummy0 type dummy && ip addr add 192.168.77.1/24 dev dummy0 && ip link set dummy0 up || bail "dummy0"
rdma link add rxe0 type rxe netdev dummy0 || bail "rdma link add rxe0"
RXE_GID_INDEX=$(gid_index rxe0) || bail "no RoCEv2 IPv4 GID on rxe0"
export RXE_DEV=rxe0 RXE_NETDEV=dummy0 RXE_IP=192.168.77.1 RXE_GID_INDEX
if [ "$PAIR" = 1 ]; then
  # veth pair with both ends in this namespace; policy routing makes locally generated
  # packets from one end's address to the other's go out of the veth instead of via lo.
  ip link add va type veth peer name vb || bail "veth"
  ip addr add 192.168.78.1/24 dev va; ip addr add 192.168.78.2/24 dev vb
  ip link set va up; ip link set vb up
  for i in all default va vb; do sysctl -qw net.ipv4.conf.$i.rp_filter=0 net.ipv4.conf.$i.accept_local=1; done
  ip rule add pref 100 lookup local && ip rule del pref 0 lookup local || bail "ip rule"
  ip route add 192.168.78.2/32 dev va src 192.168.78.1 table 10
  ip route add 192.168.78.1/32 dev vb src 192.168.78.2 table 11
  ip rule add pref 10 iif lo from 192.168.78.1 to 192.168.78.2 lookup 10
  ip rule add pref 11 iif lo from 192.168.78.2 to 192.168.78.1 lookup 11
  ip neigh replace 192.168.78.2 lladdr "$(cat /sys/class/net/vb/address)" dev va nud permanent
  ip neigh replace 192.168.78.1 lladdr "$(cat /sys/class/net/va/address)" dev vb nud permanent
  rdma link add rxea type rxe netdev va || bail "rdma link add rxea"
  rdma link add rxeb type rxe netdev vb || bail "rdma link add rxeb"
  RXEA_GID_INDEX=$(gid_index rxea) || bail "no GID on rxea"
  RXEB_GID_INDEX=$(gid_index rxeb) || bail "no GID on rxeb"
  export RXE_PAIR="rxea rxeb" RXEA_IP=192.168.78.1 RXEB_IP=192.168.78.2 RXEA_GID_INDEX RXEB_GID_INDEX
fi
if [ -n "$RW_DIR" ]; then
  mkdir -p "$RW_DIR" && mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=512000 rxevmrw "$RW_DIR" \
    || bail "9p rw mount of $RW_DIR"
fi
rdma link show
export -p | grep '^declare -x RXE' > /run/rxe.env
echo "rxevm: rxe ready at uptime $(up); running: ${CMD[*]}"
stty -F /dev/ttyS1 raw -echo 2>/dev/null
(
  source $CTL/env 2>/dev/null     # the caller's exported environment
  source /run/rxe.env; export TERM=dumb
  cd "$CWD" || { echo "rxevm: cannot cd to $CWD"; exit 125; }
  exec "${CMD[@]}"
) </dev/null >/dev/ttyS1 2>&1
rc=$?
echo "rxevm: command exited with status $rc at uptime $(up)"
echo "$rc" > $CTL/status
sync
/bin/busybox poweroff -f
sleep 10
EOF

# ---- boot ------------------------------------------------------------------------------
RW_OPT=()
[ -z "$RW_ABS" ] || RW_OPT=(-virtfs "local,path=$RW_ABS,mount_tag=rxevmrw,security_model=none")
vlog "kernel $KVER ($BOOT), prepared after $(awk "BEGIN{printf \"%.2f\", $(date +%s.%N)-$T_START}") s"
T_QEMU=$(date +%s.%N)
# A guest that dies before COMMAND starts (under a loaded host the emulated
# kernel has panicked at boot with "IO-APIC + timer doesn't work") is booted
# once more: COMMAND never ran, so nothing is repeated.  no_timer_check skips
# that boot-time timer test (usual for virtual machines).
for attempt in 1 2; do
  rm -f "$T/ctl/status"
  timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
    -nodefaults -no-user-config -display none -no-reboot \
    -accel tcg -cpu max -smp "$SMP" -m "$MEM" \
    -kernel "$BOOT" -initrd "$KDIR/initrd.gz" \
    -append "console=ttyS0 panic=-1 mitigations=off no_timer_check" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$T/ctl,mount_tag=rxevmctl,security_model=none" \
    "${RW_OPT[@]}" \
    -serial "file:$T/console.log" -serial stdio \
    </dev/null
  qrc=$?
  if [ -s "$T/ctl/status" ] || [ $qrc = 124 ] || [ $qrc = 137 ] || grep -q 'rxevm: rxe ready' "$T/console.log"; then
    break
  fi
  if [ $attempt = 1 ]; then
    echo "run-in-rxe-vm: the guest ended before the command started (qemu exit $qrc); booting again. Its last console lines:" >&2
    tail -n 8 "$T/console.log" >&2
  fi
done
T_END=$(date +%s.%N)

if [ -s "$T/ctl/status" ]; then
  rc=$(cat "$T/ctl/status")
elif [ $qrc = 124 ] || [ $qrc = 137 ]; then
  echo "run-in-rxe-vm: TIMEOUT after ${TIMEOUT}s; last guest console lines:" >&2
  tail -n 40 "$T/console.log" >&2
  rc=124
else
  echo "run-in-rxe-vm: guest ended without a status (qemu exit $qrc); last guest console lines:" >&2
  tail -n 40 "$T/console.log" >&2
  rc=125
fi
if [ "${RXEVM_VERBOSE:-0}" = 1 ]; then
  echo "----- guest console -----" >&2; cat "$T/console.log" >&2; echo "-------------------------" >&2
  vlog "exit $rc; qemu ran $(awk "BEGIN{printf \"%.2f\", $T_END-$T_QEMU}") s, total $(awk "BEGIN{printf \"%.2f\", $T_END-$T_START}") s"
elif [ "$rc" = 125 ] && [ -s "$T/ctl/status" ]; then
  grep 'rxevm:' "$T/console.log" | tail -n 5 >&2
fi
exit "$rc"
