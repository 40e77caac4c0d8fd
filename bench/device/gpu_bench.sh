#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu_bench.sh - the GPU benchmarks side by side, one run, with ratios.
#   1. intra-host put GPU0 -> GPU1 (gpuwire, two processes) vs cuMemcpyPeer
#      (one process, peer access) vs NCCL send/recv (two processes)
#   2. GPU -> GPU between two processes over tcp loopback (gpuwire, staged)
#      vs NCCL forced onto sockets (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket)
#   3. staged (tcp) vs direct (intra) for the same transfer: latency and CPU use
# Builds against an existing build tree ($BUILD, default build/) and compiles
# the NCCL benchmark only where nccl.h (and cuda_runtime.h, which it includes)
# exist.  Sizes: 8 B .. GWB_MAX_SIZE (default 1 GiB).
# GWB_TCP_SWEEP="T:S[:C] ...": also runs the tcp put once per entry with
#   GPUWIRE_TCP_THREADS=T GPUWIRE_TCP_STREAMS=S [GPUWIRE_TCP_CHUNK=C] (sizes up
#   to GWB_SWEEP_MAX_SIZE, default 64 MiB), e.g. GWB_TCP_SWEEP="0:2 2:2 4:4 4:4:4M 8:8".
# GWB_ONLY=pages: only the page kernel alone (page_kernel_bench) against one contiguous copy.
# GWB_ONLY=tcp: only the tcp comparison (NCCL on sockets, gpuwire tcp, sweep).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export NCCL_NVLS_ENABLE=0
B=$BUILD/gpu-bench
mkdir -p "$B"
CC=${CC:-cc}
CFLAGS="-O2 -Wall -Iinclude -Isrc -Itests/harness"
LIBS="$BUILD/libgpuwire.a -ldl -lpthread -lm"
[ -f "$BUILD/libgpuwire.a" ] || { echo "gpu_bench: $BUILD/libgpuwire.a missing: build first"; exit 1; }
$CC $CFLAGS bench/device/gpu_peer_bench.c -o "$B/gpu_peer_bench" $LIBS || exit 1
$CC $CFLAGS bench/device/page_kernel_bench.c -o "$B/page_kernel_bench" $LIBS || exit 1
have_put=0
# the library may need libcrypto (HMAC authentication) when built with it
if $CC $CFLAGS bench/device/gpu_put_bench.c -o "$B/gpu_put_bench" $LIBS -lcrypto 2>"$B/put_build.log" ||
   $CC $CFLAGS bench/device/gpu_put_bench.c -o "$B/gpu_put_bench" $LIBS 2>"$B/put_build.log"; then
  have_put=1
else
  echo "gpu_bench: gpu_put_bench not built:"; head -5 "$B/put_build.log"
fi
# NCCL: header, its CUDA runtime headers, and the library
ncinc=""; nclib=""; cuinc=""
pyroot=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null || true)
for d in /usr/local/cuda/include /usr/include $pyroot/nvidia/nccl/include; do
  [ -f "$d/nccl.h" ] && { ncinc=$d; break; }
done
for d in /usr/local/cuda/include $pyroot/nvidia/cuda_runtime/include $pyroot/nvidia/cu13/include; do
  [ -f "$d/cuda_runtime.h" ] && { cuinc=$d; break; }
done
for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu $pyroot/nvidia/nccl/lib; do
  ls "$d"/libnccl.so* >/dev/null 2>&1 && { nclib=$d; break; }
done
have_nccl=0
if [ -n "$ncinc" ] && [ -n "$cuinc" ] && [ -n "$nclib" ]; then
  nso=$(ls "$nclib"/libnccl.so* | head -1)
  if $CC $CFLAGS -I"$ncinc" -I"$cuinc" bench/device/gpu_nccl_bench.c -o "$B/gpu_nccl_bench" \
       $LIBS "$nso" -Wl,-rpath,"$nclib" 2>"$B/nccl_build.log"; then
    have_nccl=1
  else
    echo "gpu_bench: NCCL benchmark failed to build:"; head -5 "$B/nccl_build.log"
  fi
else
  echo "gpu_bench: NCCL benchmark skipped (nccl.h: ${ncinc:-none}, cuda_runtime.h: ${cuinc:-none}, libnccl: ${nclib:-none})"
fi
R=$B/results.txt
: >"$R"
only=${GWB_ONLY:-}
if [ -z "$only" ] || [ "$only" = pages ]; then
  echo "== the page kernel alone against one contiguous copy (CUDA events)"
  timeout 120 "$B/page_kernel_bench" | tee -a "$R"
  [ "$only" = pages ] && exit 0
fi
if [ "$only" != tcp ]; then
  echo "== cuMemcpyPeer (one process, peer access)"
  timeout 300 "$B/gpu_peer_bench" | tee -a "$R"
fi
if [ $have_nccl = 1 ]; then
  if [ "$only" != tcp ]; then
    echo "== NCCL send/recv (two processes, default transports)"
    timeout 300 "$B/gpu_nccl_bench" nccl | tee -a "$R"
  fi
  echo "== NCCL send/recv forced onto sockets"
  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \
    timeout 300 "$B/gpu_nccl_bench" nccl_socket | tee -a "$R"
fi
if [ $have_put = 1 ]; then
  if [ "$only" != tcp ]; then
    echo "== gpuwire put GPU0 -> GPU1, intra-host transport"
    GPUWIRE_TRANSPORTS=intra timeout 300 "$B/gpu_put_bench" gw_intra | tee -a "$R"
  fi
  echo "== gpuwire put GPU0 -> GPU1, tcp loopback (host-staged; $(env | grep '^GPUWIRE_TCP_' | tr '\n' ' '))"
  GPUWIRE_TRANSPORTS=tcp timeout 300 "$B/gpu_put_bench" gw_tcp | tee -a "$R"
  for ts in ${GWB_TCP_SWEEP:-}; do
    t=$(echo "$ts" | cut -d: -f1) s=$(echo "$ts" | cut -d: -f2) c=$(echo "$ts" | cut -s -d: -f3)
    label=gw_tcp_t${t}_s${s}${c:+_c$c}
    echo "== gpuwire put GPU0 -> GPU1, tcp loopback, GPUWIRE_TCP_THREADS=$t GPUWIRE_TCP_STREAMS=$s${c:+ GPUWIRE_TCP_CHUNK=$c}"
    env GPUWIRE_TRANSPORTS=tcp GPUWIRE_TCP_THREADS="$t" GPUWIRE_TCP_STREAMS="$s" ${c:+GPUWIRE_TCP_CHUNK=$c} \
      GWB_MAX_SIZE="${GWB_SWEEP_MAX_SIZE:-67108864}" timeout 300 "$B/gpu_put_bench" "$label" | tee -a "$R"
  done
fi
echo
echo "== summary (bw in GB/s; lat in us)"
python3 - "$R" <<'PY'
import sys, collections
lat = collections.defaultdict(dict); bw = collections.defaultdict(dict); cpu = collections.defaultdict(dict); extra = []
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] == "RESULT":
        b, n = f[1], int(f[2])
        kv = dict(x.split("=", 1) for x in f[3:])
        lat[b][n] = float(kv["lat_us"]); bw[b][n] = float(kv["bw_GBps"])
        if "cpu_pct" in kv: cpu[b][n] = "%s/%s" % (kv["cpu_pct"], kv.get("srv_cpu_pct", "-"))
        if "cpu_pct" in kv and not b.startswith("gw_tcp_"): extra.append((b, n, kv["cpu_pct"], kv.get("srv_cpu_pct", "-"), kv["lat_us"], kv["bw_GBps"]))
def g(d, b, n): return d.get(b, {}).get(n)
def fmt(x): return "-" if x is None else ("%.2f" % x)
def ratio(a, b): return "-" if a is None or not b else "%.2f" % (a / b)
sizes = sorted({n for d in bw.values() for n in d})
print("%11s | %8s %8s %8s %6s %6s | %7s %9s %6s | %8s %8s %8s" % ("bytes", "intra", "peer", "nccl",
      "x_peer", "x_nccl", "gw_tcp", "nccl_sock", "x_sock", "lat_intr", "lat_nccl", "lat_tcp"))
for n in sizes:
    i, p, c = g(bw, "gw_intra", n), g(bw, "memcpy_peer", n), g(bw, "nccl", n)
    t, s = g(bw, "gw_tcp", n), g(bw, "nccl_socket", n)
    print("%11d | %8s %8s %8s %6s %6s | %7s %9s %6s | %8s %8s %8s" % (n, fmt(i), fmt(p), fmt(c),
          ratio(i, p), ratio(i, c), fmt(t), fmt(s), ratio(t, s),
          fmt(g(lat, "gw_intra", n)), fmt(g(lat, "nccl", n)), fmt(g(lat, "gw_tcp", n))))
def sweep_key(b):
    k = []
    for x in b[len("gw_tcp_"):].split("_"):
        num = x[1:].rstrip("KMGkmg")
        k.append(int(num) * {"K": 1, "M": 1 << 10, "G": 1 << 20}.get(x[-1:].upper(), 1) if num.isdigit() else 0)
    return tuple(k)
sweep = sorted((b for b in bw if b.startswith("gw_tcp_t")), key=sweep_key)
if sweep:
    print("\ntcp sweep: GPUWIRE_TCP_THREADS (t) x GPUWIRE_TCP_STREAMS (s), bw in GB/s, x_sock = / NCCL on sockets")
    cols = [n for n in (1 << 20, 4 << 20, 16 << 20, 64 << 20) if any(n in bw[b] for b in sweep)]
    print("  (cpu: percent of one core at the largest size, initiator/target)")
    print("  %-14s" % "run" + "".join("%9s %6s" % ("%dMiB" % (n >> 20), "x_sock") for n in cols) + "  cpu")
    for b in sweep:
        print("  %-14s" % b[len("gw_tcp_"):] + "".join("%9s %6s" % (fmt(g(bw, b, n)), ratio(g(bw, b, n), g(bw, "nccl_socket", n))) for n in cols)
              + "  " + cpu[b].get(cols[-1], "-"))
if extra:
    print("\nstaged (tcp) vs direct (intra), same transfer GPU0 -> GPU1: latency, bandwidth, CPU")
    print("  (cpu: percent of one core during the bandwidth loop, initiator / target)")
    for b, n, c, sc, l, bwv in extra:
        print("  %-9s %11d bytes  lat %9s us  bw %8s GB/s  cpu %5s%% / %5s%%" % (b, n, l, bwv, c, sc))
PY
