#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mkfixture.sh NAME OUTDIR - builds a recorded-style sysfs/procfs tree of a
# machine for the topology and doctor tests:
#   OUTDIR/sys    sysfs subset: devices/pci*, bus/pci/devices links,
#                 class/infiniband, class/cxi, class/net, class/iommu, module, kernel/iommu_groups
#   OUTDIR/proc   cmdline, modules, sys/kernel/osrelease
#   OUTDIR/boot   config-<release>
#   OUTDIR/sys/gpuwire-nvlink.txt  "BDF BDF LINKS" (what CUDA/NVML would report), when the
#                 machine has NVLink; gw_topo_create() reads it from a recorded tree
# Layout and link shapes follow a real /sys: devices hang under
# devices/pciDDDD:BB/<root port>/<switch ports>/..., reached through relative
# symlinks.  Config space is a binary file with the PCIe capability at 0x40
# and, for bridges that have one, the ACS extended capability.
#
# Machines: cloudvm dgx8 acs numa broken fakegpu efa cxi (see each function below).
set -eu
NAME=$1
OUT=$2
S=$OUT/sys
mkdir -p "$S/devices/system/node" "$S/bus/pci/devices" "$S/bus/pci/drivers" "$S/class/infiniband" \
    "$S/class/net" "$S/class/iommu" "$S/module" "$S/kernel/iommu_groups" "$OUT/proc/sys/kernel" "$OUT/boot"

# ---- helpers -------------------------------------------------------------------------

GPUN=0
IOMMU=off          # off | pt | dma: type of every device's IOMMU group
NGROUP=0

# updots DIR: "../" for each component of DIR (relative to sys/)
updots() {
    local d=$1 r=""
    IFS=/ read -ra parts <<<"$d"
    for _ in "${parts[@]}"; do r="../$r"; done
    printf '%s' "$r"
}

# config FILE VENDOR DEVICE CLASS PCIE_TYPE HDR ACS_CTRL SIZE
#   PCIE_TYPE: 0 endpoint, 4 root port, 5 upstream, 6 downstream; HDR 0 or 1
#   ACS_CTRL: "-" none, else the 16-bit control value (the capability is put
#   after an AER capability so the walk is exercised)
config() {
    local file=$1 ven=$2 dev=$3 cls=$4 typ=$5 hdr=$6 acs=$7 size=$8
    # only the bytes up to the last capability are written; truncate pads with zeros
    local -a B
    local n=$((size < 0x70 ? size : 0x70))
    [ "$acs" != "-" ] && ((size >= 4096)) && n=0x160
    for ((i = 0; i < n; i++)); do B[i]=0; done
    B[0]=$((ven & 255)); B[1]=$((ven >> 8))
    B[2]=$((dev & 255)); B[3]=$((dev >> 8))
    B[6]=$((0x10))                                 # status: capability list
    B[9]=$((cls & 255)); B[10]=$(((cls >> 8) & 255)); B[11]=$(((cls >> 16) & 255))
    B[14]=$hdr
    if ((size >= 0x44)); then
        B[52]=$((0x40))                            # capability pointer
        B[64]=$((0x10)); B[65]=0                   # PCIe capability, last
        B[66]=$((0x02 | (typ << 4))); B[67]=0
    fi
    if [ "$acs" != "-" ] && ((size >= 4096)); then
        # AER (id 1, v1) at 0x100, next 0x150; ACS (id 0xd, v1) at 0x150, last
        B[256]=1; B[257]=0; B[258]=$((0x01)); B[259]=$((0x15))
        B[336]=$((0x0d)); B[337]=0; B[338]=1; B[339]=0
        B[340]=$((0x5f)); B[341]=0                 # ACS capabilities: SV TB RR CR UF DT
        B[342]=$((acs & 255)); B[343]=$((acs >> 8))
    fi
    local fmt
    printf -v fmt '\\x%02x' "${B[@]}"
    printf "$fmt" >"$file"
    truncate -s "$size" "$file"
}

# pcidev PATH VENDOR DEVICE CLASS TYPE NUMA [ACS] [CFGSIZE]
#   PATH below devices/, e.g. pci0000:00/0000:00:01.0/0000:01:00.0
pcidev() {
    local path=$1 ven=$2 dev=$3 cls=$4 typ=$5 numa=$6 acs=${7:--} size=${8:-4096}
    local d=$S/devices/$path bdf=${path##*/} hdr=0
    mkdir -p "$d"
    printf '0x%04x\n' "$ven" >"$d/vendor"
    printf '0x%04x\n' "$dev" >"$d/device"
    printf '0x%06x\n' "$cls" >"$d/class"
    printf '%s\n' "$numa" >"$d/numa_node"
    if [ "$numa" = 1 ]; then echo "32-63" >"$d/local_cpulist"; else echo "0-31" >"$d/local_cpulist"; fi
    [ $((cls >> 8)) = $((0x0604)) ] && hdr=1
    config "$d/config" "$ven" "$dev" "$cls" "$typ" "$hdr" "$acs" "$size"
    ln -sfn "../../../devices/$path" "$S/bus/pci/devices/$bdf"
    ln -sfn "$(updots "devices/$path")bus/pci" "$d/subsystem"
    if [ "$IOMMU" != off ]; then
        NGROUP=$((NGROUP + 1))
        mkdir -p "$S/kernel/iommu_groups/$NGROUP"
        if [ "$IOMMU" = pt ]; then echo identity; else echo DMA-FQ; fi >"$S/kernel/iommu_groups/$NGROUP/type"
        ln -sfn "$(updots "devices/$path")kernel/iommu_groups/$NGROUP" "$d/iommu_group"
    fi
}

driver() { # driver PATH NAME
    mkdir -p "$S/bus/pci/drivers/$2"
    ln -sfn "$(updots "devices/$1")bus/pci/drivers/$2" "$S/devices/$1/driver"
}

rootport() { pcidev "$1" 0x8086 0x347a 0x060400 4 "$2" "${3:--}"; }
upstream() { pcidev "$1" 0x1000 0xc010 0x060400 5 "$2" "${3:--}"; }
downstream() { pcidev "$1" 0x1000 0xc010 0x060400 6 "$2" "${3:--}"; }

# gpu PATH NUMA [BAR1_BYTES]
gpu() {
    local path=$1 numa=$2 bar1=${3:-$((1 << 37))}
    pcidev "$path" 0x10de 0x20b0 0x030200 0 "$numa"
    driver "$path" nvidia
    GPUN=$((GPUN + 1))
    local b1s=$((0x38000000000 + GPUN * 0x4000000000))
    {
        printf '0x%016x 0x%016x 0x%016x\n' $((0xfa000000)) $((0xfaffffff)) $((0x40200))
        printf '0x%016x 0x%016x 0x%016x\n' "$b1s" $((b1s + bar1 - 1)) $((0x14220c))
        printf '0x%016x 0x%016x 0x%016x\n' 0 0 0
        printf '0x%016x 0x%016x 0x%016x\n' $((0x3a000000000)) $((0x3a001ffffff)) $((0x14220c))
        printf '0x%016x 0x%016x 0x%016x\n' 0 0 0
        printf '0x%016x 0x%016x 0x%016x\n' $((0xf000)) $((0xf07f)) $((0x40101))
        printf '0x%016x 0x%016x 0x%016x\n' 0 0 0
    } >"$S/devices/$path/resource"
}

# nic PATH IBDEV NETDEV NUMA LINK(ib|eth) STATE(4 active|1 down) MTU [DRIVER]
nic() {
    local path=$1 ib=$2 nd=$3 numa=$4 link=$5 state=$6 mtu=$7 drv=${8:-mlx5_core}
    local d=$S/devices/$path bdf=${path##*/}
    pcidev "$path" 0x15b3 0x101b 0x020000 0 "$numa"
    driver "$path" "$drv"
    local p=$d/infiniband/$ib/ports/1
    mkdir -p "$p/gids" "$p/gid_attrs/types" "$p/gid_attrs/ndevs"
    ln -sfn "../../../$bdf" "$d/infiniband/$ib/device"
    ln -sfn "../../devices/$path/infiniband/$ib" "$S/class/infiniband/$ib"
    if [ "$state" = 4 ]; then
        echo "4: ACTIVE" >"$p/state"; echo "5: LinkUp" >"$p/phys_state"
    else
        echo "1: DOWN" >"$p/state"; echo "3: Disabled" >"$p/phys_state"
    fi
    echo "200 Gb/sec (4X HDR)" >"$p/rate"
    local z=0000:0000:0000:0000:0000:0000:0000:0000
    for i in 0 1 2 3; do echo $z >"$p/gids/$i"; done
    if [ "$link" = ib ]; then
        echo InfiniBand >"$p/link_layer"
        echo "fe80:0000:0000:0000:1070:fd03:00${bdf:5:2}:0001" >"$p/gids/0"
    else
        echo Ethernet >"$p/link_layer"
        if [ "$state" = 4 ]; then
            echo "fe80:0000:0000:0000:0a0b:0cff:fe${bdf:5:2}:0001" >"$p/gids/0"
            echo "fe80:0000:0000:0000:0a0b:0cff:fe${bdf:5:2}:0001" >"$p/gids/1"
            echo "0000:0000:0000:0000:0000:ffff:c0a8:01${bdf:5:2}" >"$p/gids/2"
            echo "0000:0000:0000:0000:0000:ffff:c0a8:01${bdf:5:2}" >"$p/gids/3"
        fi
        for i in 0 2; do echo "IB/RoCE v1" >"$p/gid_attrs/types/$i"; done
        for i in 1 3; do echo "RoCE v2" >"$p/gid_attrs/types/$i"; done
        for i in 0 1 2 3; do echo "$nd" >"$p/gid_attrs/ndevs/$i"; done
    fi
    mkdir -p "$d/net/$nd"
    echo "$mtu" >"$d/net/$nd/mtu"
    if [ "$state" = 4 ]; then echo up; else echo down; fi >"$d/net/$nd/operstate"
    ln -sfn "../../../$bdf" "$d/net/$nd/device"
    ln -sfn "../../devices/$path/net/$nd" "$S/class/net/$nd"
}

# efanic PATH IBDEV NUMA - an AWS EFA device: Amazon's vendor id and an EFA
# device id, the efa driver, an RDMA device whose one port is ACTIVE with
# link layer "Unspecified" and one GID of no RoCE type, and no netdev.
efanic() {
    local path=$1 ib=$2 numa=$3
    local d=$S/devices/$path bdf=${path##*/}
    pcidev "$path" 0x1d0f 0xefa1 0x020000 0 "$numa"
    driver "$path" efa
    local p=$d/infiniband/$ib/ports/1
    mkdir -p "$p/gids" "$p/gid_attrs/types" "$p/gid_attrs/ndevs"
    ln -sfn "../../../$bdf" "$d/infiniband/$ib/device"
    ln -sfn "../../devices/$path/infiniband/$ib" "$S/class/infiniband/$ib"
    echo "4: ACTIVE" >"$p/state"; echo "5: LinkUp" >"$p/phys_state"
    echo "100 Gb/sec (4X EDR)" >"$p/rate"
    echo Unspecified >"$p/link_layer"
    echo "fe80:0000:0000:0000:0400:00ff:fe${bdf:5:2}:0001" >"$p/gids/0"
}

# cxinic PATH NAME NETDEV NUMA - an HPE Slingshot NIC: class/cxi/NAME, the
# cxi_core driver, its netdev NETDEV up at 200 Gb/s.
cxinic() {
    local path=$1 name=$2 nd=$3 numa=$4
    local d=$S/devices/$path bdf=${path##*/}
    pcidev "$path" 0x17db 0x0501 0x020000 0 "$numa"
    driver "$path" cxi_core
    mkdir -p "$d/cxi/$name" "$S/class/cxi" "$d/net/$nd"
    ln -sfn "../../../$bdf" "$d/cxi/$name/device"
    ln -sfn "../../devices/$path/cxi/$name" "$S/class/cxi/$name"
    echo 9000 >"$d/net/$nd/mtu"
    echo up >"$d/net/$nd/operstate"
    echo 200000 >"$d/net/$nd/speed"
    ln -sfn "../../../$bdf" "$d/net/$nd/device"
    ln -sfn "../../devices/$path/net/$nd" "$S/class/net/$nd"
}

nodes() { for ((n = 0; n < $1; n++)); do mkdir -p "$S/devices/system/node/node$n"; done; }

# host RELEASE PEERMEM(0|1) CMDLINE [DMABUF(y|n)]
host() {
    echo "$1" >"$OUT/proc/sys/kernel/osrelease"
    : >"$OUT/proc/modules"
    echo "nvidia 56705024 2 nvidia_uvm, Live 0x0000000000000000 (POE)" >>"$OUT/proc/modules"
    if [ "$2" = 1 ]; then
        echo "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)" >>"$OUT/proc/modules"
        mkdir -p "$S/module/nvidia_peermem"; echo 0 >"$S/module/nvidia_peermem/refcnt"
    fi
    mkdir -p "$S/module/nvidia"
    echo "BOOT_IMAGE=/vmlinuz-$1 root=/dev/sda1 ro $3" >"$OUT/proc/cmdline"
    {
        echo "CONFIG_PCI=y"
        echo "CONFIG_DMA_SHARED_BUFFER=${4:-y}"
        echo "CONFIG_INFINIBAND=m"
        echo "CONFIG_INFINIBAND_USER_MEM=y"
    } >"$OUT/boot/config-$1"
}

# ---- machines ------------------------------------------------------------------------

# A cloud VM: four GPUs straight on the root bus (no bridges), no RDMA NIC,
# one NUMA node (-1 in numa_node, as VMs without SRAT report), no IOMMU.
cloudvm() {
    nodes 1
    host 6.1.0-18-cloud-amd64 0 "console=ttyS0"
    for s in 04 05 06 07; do gpu "pci0000:00/0000:00:$s.0" -1 $((1 << 34)); done
}

# An 8-GPU server: two sockets, four root complexes, each with a PCIe switch
# holding two GPUs and one InfiniBand NIC; every GPU pair has 12 NVLinks.
dgx8() {
    nodes 2
    host 5.15.0-91-generic 1 "iommu=pt"
    local rcs=(00 20 80 a0) numa=(0 0 1 1) k=0
    for rc in "${rcs[@]}"; do
        local b=$((16#$rc)) n=${numa[$k]}
        local rp="pci0000:$rc/0000:$rc:01.0"
        local up="$rp/0000:$(printf %02x $((b + 1))):00.0"
        rootport "$rp" "$n"
        upstream "$up" "$n"
        for dn in 0 1 2; do downstream "$up/0000:$(printf %02x $((b + 2))):0$dn.0" "$n" 0x0000; done
        gpu "$up/0000:$(printf %02x $((b + 2))):00.0/0000:$(printf %02x $((b + 3))):00.0" "$n"
        gpu "$up/0000:$(printf %02x $((b + 2))):01.0/0000:$(printf %02x $((b + 4))):00.0" "$n"
        nic "$up/0000:$(printf %02x $((b + 2))):02.0/0000:$(printf %02x $((b + 5))):00.0" "mlx5_$k" "ibp$((b + 5))s0" "$n" ib 4 4092
        k=$((k + 1))
    done
    : >"$S/gpuwire-nvlink.txt"
    local g=(0000:03:00.0 0000:04:00.0 0000:23:00.0 0000:24:00.0 0000:83:00.0 0000:84:00.0 0000:a3:00.0 0000:a4:00.0)
    for ((i = 0; i < 8; i++)); do
        for ((j = i + 1; j < 8; j++)); do echo "${g[$i]} ${g[$j]} 12" >>"$S/gpuwire-nvlink.txt"; done
    done
}

# One socket, a switch whose downstream ports have ACS redirect enabled
# (SV RR CR UF = 0x001d), a cascaded second switch holding GPU1, a RoCE NIC
# at MTU 1500, and the IOMMU translating DMA (DMA-FQ groups).
acs() {
    nodes 1
    IOMMU=dma
    mkdir -p "$S/class/iommu/dmar0"
    host 6.5.0-35-generic 0 "intel_iommu=on"
    local rp=pci0000:00/0000:00:01.0 up=pci0000:00/0000:00:01.0/0000:01:00.0
    rootport "$rp" 0
    upstream "$up" 0
    downstream "$up/0000:02:00.0" 0 0x001d
    downstream "$up/0000:02:01.0" 0 0x001d
    downstream "$up/0000:02:02.0" 0 0x0000
    gpu "$up/0000:02:00.0/0000:03:00.0" 0 $((256 << 20))
    nic "$up/0000:02:01.0/0000:04:00.0" mlx5_0 ens4np0 0 eth 4 1500
    upstream "$up/0000:02:02.0/0000:05:00.0" 0
    downstream "$up/0000:02:02.0/0000:05:00.0/0000:06:00.0" 0 0x0000
    gpu "$up/0000:02:02.0/0000:05:00.0/0000:06:00.0/0000:07:00.0" 0 $((256 << 20))
}

# Two sockets: the GPUs on node 0 (two root complexes), the dual-port RoCE
# NIC on node 1; its second function (mlx5_1) is down.  ACS off, no IOMMU.
numa() {
    nodes 2
    host 6.8.0-40-generic 1 ""
    rootport pci0000:00/0000:00:01.0 0
    gpu pci0000:00/0000:00:01.0/0000:01:00.0 0
    rootport pci0000:40/0000:40:01.0 0
    gpu pci0000:40/0000:40:01.0/0000:41:00.0 0
    rootport pci0000:80/0000:80:01.0 1
    nic pci0000:80/0000:80:01.0/0000:81:00.0 mlx5_0 ens81f0np0 1 eth 4 9000
    nic pci0000:80/0000:80:01.0/0000:81:00.1 mlx5_1 ens81f1np1 1 eth 1 1500
}

# Odd and missing entries everywhere: a switch whose config space reads 64
# bytes (as for non-root users), garbage numa_node, missing and unparsable
# resource files, a garbage netdev MTU, a NIC whose device link dangles and
# whose port state is a directory, an NVIDIA function with a bad class, no
# /proc/modules, no kernel config, a malformed NVLink file.
broken() {
    nodes 1
    host 6.1.0-18-amd64 0 ""
    rm -f "$OUT/proc/modules" "$OUT"/boot/config-*
    local up=pci0000:00/0000:00:01.0/0000:01:00.0
    rootport pci0000:00/0000:00:01.0 0
    pcidev "$up" 0x1000 0xc010 0x060400 5 0 - 64
    pcidev "$up/0000:02:00.0" 0x1000 0xc010 0x060400 6 0 - 64
    pcidev "$up/0000:02:01.0" 0x1000 0xc010 0x060400 6 0 - 64
    gpu "$up/0000:02:00.0/0000:03:00.0" 0
    echo garbage >"$S/devices/$up/0000:02:00.0/0000:03:00.0/numa_node"
    rm -f "$S/devices/$up/0000:02:00.0/0000:03:00.0/resource"
    nic "$up/0000:02:01.0/0000:04:00.0" mlx5_1 ens4np0 0 eth 4 1500
    echo abc >"$S/devices/$up/0000:02:01.0/0000:04:00.0/net/ens4np0/mtu"
    rootport pci0000:00/0000:00:02.0 0
    gpu pci0000:00/0000:00:02.0/0000:05:00.0 0
    printf 'not a resource file\n' >"$S/devices/pci0000:00/0000:00:02.0/0000:05:00.0/resource"
    rootport pci0000:00/0000:00:03.0 0
    local n0=pci0000:00/0000:00:03.0/0000:06:00.0
    nic "$n0" mlx5_0 ens6np0 0 eth 4 1500
    ln -sfn ../../../0000:99:00.0 "$S/devices/$n0/infiniband/mlx5_0/device"
    rm -f "$S/devices/$n0/infiniband/mlx5_0/ports/1/state"
    mkdir "$S/devices/$n0/infiniband/mlx5_0/ports/1/state"
    mkdir -p "$S/bus/pci/devices/0000:00:1f.0"
    echo 0x10de >"$S/bus/pci/devices/0000:00:1f.0/vendor"
    echo zz >"$S/bus/pci/devices/0000:00:1f.0/class"
    printf '0000:03:00.0 0000:05:00.0\nnonsense line here\n0000:03:00.0 0000:77:00.0 4\n' >"$S/gpuwire-nvlink.txt"
}

# Where tests/fakecuda's stand-in driver says its GPUs are (0000:90:00.0,
# 0000:91:00.0), under one switch with a RoCE NIC: the real CUDA hook of the
# doctor runs against that driver on this tree.
fakegpu() {
    nodes 1
    host 6.8.0-40-generic 1 ""
    local up=pci0000:80/0000:80:01.0/0000:81:00.0
    rootport pci0000:80/0000:80:01.0 0
    upstream "$up" 0
    for dn in 0 1 2; do downstream "$up/0000:82:0$dn.0" 0 0x0000; done
    gpu "$up/0000:82:00.0/0000:90:00.0" 0
    gpu "$up/0000:82:01.0/0000:91:00.0" 0
    nic "$up/0000:82:02.0/0000:92:00.0" mlx5_0 ens92np0 0 eth 4 9000
}

# An EFA instance (p4d-like, halved): two sockets, a PCIe switch per socket
# holding two GPUs and one EFA device; no verbs NIC.
efa() {
    nodes 2
    host 6.1.0-18-cloud-amd64 0 ""
    local rcs=(10 90) numa=(0 1) k=0
    for rc in "${rcs[@]}"; do
        local b=$((16#$rc)) n=${numa[$k]}
        local rp="pci0000:$rc/0000:$rc:01.0"
        local up="$rp/0000:$(printf %02x $((b + 1))):00.0"
        rootport "$rp" "$n"
        upstream "$up" "$n"
        for dn in 0 1 2; do downstream "$up/0000:$(printf %02x $((b + 2))):0$dn.0" "$n" 0x0000; done
        gpu "$up/0000:$(printf %02x $((b + 2))):00.0/0000:$(printf %02x $((b + 3))):00.0" "$n"
        gpu "$up/0000:$(printf %02x $((b + 2))):01.0/0000:$(printf %02x $((b + 4))):00.0" "$n"
        efanic "$up/0000:$(printf %02x $((b + 2))):02.0/0000:$(printf %02x $((b + 5))):00.0" \
            "rdmap$((b + 5))s0" "$n"
        k=$((k + 1))
    done
}

# A Slingshot node: one socket, a switch with a GPU and a CXI NIC, a second
# GPU on another root port.
cxi() {
    nodes 1
    host 6.4.0-150600-default 1 ""
    local up=pci0000:00/0000:00:01.0/0000:01:00.0
    rootport pci0000:00/0000:00:01.0 0
    upstream "$up" 0
    for dn in 0 1; do downstream "$up/0000:02:0$dn.0" 0 0x0000; done
    gpu "$up/0000:02:00.0/0000:03:00.0" 0
    cxinic "$up/0000:02:01.0/0000:04:00.0" cxi0 hsn0 0
    rootport pci0000:00/0000:00:02.0 0
    gpu pci0000:00/0000:00:02.0/0000:05:00.0 0
}

case "$NAME" in
cloudvm | dgx8 | acs | numa | broken | fakegpu | efa | cxi) "$NAME" ;;
*)
    echo "mkfixture.sh: unknown machine '$NAME' (cloudvm dgx8 acs numa broken fakegpu efa cxi)" >&2
    exit 2
    ;;
esac
