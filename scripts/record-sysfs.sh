#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# record-sysfs.sh [OUTDIR] - records the parts of this machine's /sys, /proc
# and /boot that `gpuwire info --topo` and `gpuwire doctor` read, into a tree
# that can be tarred, moved and checked anywhere:
#
#     sudo scripts/record-sysfs.sh /tmp/rec        # root: full PCI config space (ACS)
#     tar czf rec.tgz -C /tmp rec
#     GPUWIRE_SYSFS_ROOT=/tmp/rec/sys gpuwire info --topo
#     gpuwire doctor --sysfs /tmp/rec/sys --proc /tmp/rec/proc --boot /tmp/rec/boot
#
# Recorded: every PCI function (vendor, device, class, numa_node,
# local_cpulist, config, resource, driver and iommu_group links) with its
# real path under devices/ and the bus/pci/devices links; RDMA devices
# (ports: state, phys_state, link_layer, rate, GIDs and their types and
# netdevs); netdevs with a device (mtu, operstate); IOMMU units and group
# types; NUMA nodes; the nvidia, nvidia_peermem and nv_peer_mem modules;
# /proc/cmdline, /proc/modules, the kernel release; /boot/config-<release>.
# When nvidia-smi is present, NVLink counts go to sys/gpuwire-nvlink.txt
# (read by gpuwire from recorded trees) and its own matrix to
# nvidia-smi-topo.txt for comparison.  Nothing secret is recorded; MAC
# addresses are not, GIDs (which embed them) are.
set -u
OUT=${1:-./sysfs-record-$(hostname)-$(date +%Y%m%d-%H%M%S)}
SYS=/sys
R=$OUT/sys
mkdir -p "$R" "$OUT/proc/sys/kernel" "$OUT/boot" || exit 1
OUT=$(cd "$OUT" && pwd)
R=$OUT/sys

copy() { # copy REL: a regular file below /sys
    local rel=$1
    [ -f "$SYS/$rel" ] || return 0
    mkdir -p "$R/$(dirname "$rel")"
    cat "$SYS/$rel" >"$R/$rel" 2>/dev/null || rm -f "$R/$rel"
}

link() { # link REL: recreate the symlink /sys/REL as a relative link inside the record
    local rel=$1 tgt
    tgt=$(readlink -f "$SYS/$rel") || return 0
    case "$tgt" in "$SYS"/*) ;; *) return 0 ;; esac
    tgt=${tgt#"$SYS"/}
    mkdir -p "$R/$(dirname "$rel")" "$R/$tgt"
    ln -sfn "$(realpath -m --relative-to="$R/$(dirname "$rel")" "$R/$tgt")" "$R/$rel"
}

# PCI functions
for d in "$SYS"/bus/pci/devices/*; do
    [ -e "$d" ] || continue
    bdf=$(basename "$d")
    real=$(readlink -f "$d")
    rel=${real#"$SYS"/}
    link "bus/pci/devices/$bdf"
    for f in vendor device class numa_node local_cpulist config resource; do copy "$rel/$f"; done
    [ -L "$real/driver" ] && link "$rel/driver"
    if [ -L "$real/iommu_group" ]; then
        link "$rel/iommu_group"
        g=$(readlink -f "$real/iommu_group")
        copy "${g#"$SYS"/}/type"
    fi
done

# RDMA devices
for d in "$SYS"/class/infiniband/*; do
    [ -e "$d" ] || continue
    ib=$(basename "$d")
    link "class/infiniband/$ib"
    real=$(readlink -f "$d")
    rel=${real#"$SYS"/}
    [ -L "$real/device" ] && link "$rel/device"
    copy "$rel/parent"
    for p in "$real"/ports/*; do
        [ -d "$p" ] || continue
        prel=$rel/ports/$(basename "$p")
        for f in state phys_state link_layer rate; do copy "$prel/$f"; done
        for f in "$p"/gids/* "$p"/gid_attrs/types/* "$p"/gid_attrs/ndevs/*; do
            [ -f "$f" ] && copy "${f#"$SYS"/}"
        done
    done
done

# netdevs that belong to a device
for d in "$SYS"/class/net/*; do
    [ -L "$d/device" ] || continue
    nd=$(basename "$d")
    link "class/net/$nd"
    real=$(readlink -f "$d")
    rel=${real#"$SYS"/}
    link "$rel/device"
    for f in mtu operstate; do copy "$rel/$f"; done
done

# IOMMU units, NUMA nodes, modules
mkdir -p "$R/class/iommu" "$R/devices/system/node" "$R/module"
for d in "$SYS"/class/iommu/*; do [ -e "$d" ] && mkdir -p "$R/class/iommu/$(basename "$d")"; done
for d in "$SYS"/devices/system/node/node*; do [ -d "$d" ] && mkdir -p "$R/devices/system/node/$(basename "$d")"; done
for m in nvidia nvidia_peermem nv_peer_mem; do [ -d "$SYS/module/$m" ] && mkdir -p "$R/module/$m"; done

# procfs and the kernel config
cat /proc/cmdline >"$OUT/proc/cmdline" 2>/dev/null
cat /proc/modules >"$OUT/proc/modules" 2>/dev/null
rel=$(cat /proc/sys/kernel/osrelease)
echo "$rel" >"$OUT/proc/sys/kernel/osrelease"
if [ -r "/boot/config-$rel" ]; then
    cp "/boot/config-$rel" "$OUT/boot/"
elif [ -r /proc/config.gz ]; then
    gzip -dc /proc/config.gz >"$OUT/boot/config-$rel"
fi

# NVLink, as the NVIDIA driver sees it
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1
    mapfile -t ids < <(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null |
        sed -E 's/^0*([0-9A-Fa-f]{4}:)/\1/' | tr 'A-F' 'a-f')
    : >"$R/gpuwire-nvlink.txt"
    i=0
    grep -E '^GPU[0-9]+' "$OUT/nvidia-smi-topo.txt" | while read -r row rest; do
        read -ra cells <<<"$rest"
        for ((j = i + 1; j < ${#ids[@]}; j++)); do
            c=${cells[$j]:-}
            case "$c" in NV[0-9]*) echo "${ids[$i]} ${ids[$j]} ${c#NV}" >>"$R/gpuwire-nvlink.txt" ;; esac
        done
        i=$((i + 1))
    done
fi

{
    echo "recorded: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) by $(id -un)"
    echo "kernel: $rel"
    [ "$(id -u)" = 0 ] || echo "note: not root: config space beyond 64 bytes (ACS) is not recorded"
} >"$OUT/RECORD.txt"
echo "record-sysfs: wrote $OUT (sys, proc, boot)"
