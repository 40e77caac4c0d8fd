#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Medians over the rounds of measure.sh's perf.txt and fi_rdm_bw.txt:
send stream ops/s per size, latency p50 per size, and the 8-byte
latency of the --lat-only runs, base against credits, with fi_rdm_bw's
Mxfers/s beside them.  usage: summarize.py OUTDIR"""
import re
import statistics
import sys
from collections import defaultdict

d = sys.argv[1]
ops = defaultdict(list)    # (lib, prov, build, size) -> ops/s
lat = defaultdict(list)    # (lib, prov, build, size) -> p50 us (full runs)
lat8 = defaultdict(list)   # (lib, prov, build) -> avg, p50 of --lat-only 8 B
cur = None
for line in open(f"{d}/perf.txt"):
    m = re.match(r"## round (\d+) lib=(\S+) prov=(\S+) build=(\S+) args: (.*)", line)
    if m:
        cur = (m.group(2), m.group(3), m.group(4), "--lat-only" in m.group(5))
        continue
    f = line.split()
    if cur and len(f) >= 9 and f[0].isdigit():
        size = int(f[0])
        if cur[3]:
            lat8[cur[:3]].append((float(f[4]), float(f[5])))
        else:
            ops[cur[:3] + (size,)].append(int(f[1].replace(",", "")))
            lat[cur[:3] + (size,)].append(float(f[5]))
ref = defaultdict(list)
cur = None
for line in open(f"{d}/fi_rdm_bw.txt"):
    m = re.match(r"## round \d+ fi_rdm_bw -p (\S+) -S (\d+)", line)
    if m:
        cur = (m.group(1), int(m.group(2)))
        continue
    f = line.split()
    if cur and len(f) == 7 and f[0][0].isdigit() and f[0] != "bytes":
        ref[cur].append(float(f[6]) * 1e6)

med = statistics.median
sizes = [8, 256, 4096, 16384, 65536]
print("send stream (window 32), messages/s, median of the rounds [min-max]; latency p50 us of the same runs")
print("| libfabric | provider | size | base ops/s | credits ops/s | after/before | fi_rdm_bw -W 32 | base p50 | credits p50 |")
print("|---|---|---|---|---|---|---|---|---|")
for lib in ("2.6", "1.17"):
    for prov in ("shm", "tcp"):
        for s in sizes:
            b, c = ops.get((lib, prov, "base", s)), ops.get((lib, prov, "credits", s))
            if not b or not c:
                continue
            r = ref.get((prov, s)) if lib == "2.6" else None
            rs = f"{med(r):,.0f}" if r else "-"
            print(f"| {lib} | {prov} | {s} | {med(b):,.0f} [{min(b):,}-{max(b):,}] | {med(c):,.0f} [{min(c):,}-{max(c):,}]"
                  f" | {med(c) / med(b):.2f}x | {rs} | {med(lat[(lib, prov, 'base', s)]):.2f} |"
                  f" {med(lat[(lib, prov, 'credits', s)]):.2f} |")
print()
print("8-byte latency, --lat-only --duration 2, one-way us: median of the rounds' avg and p50 [p50 min-max]")
print("| libfabric | provider | base avg | base p50 | credits avg | credits p50 |")
print("|---|---|---|---|---|---|")
for lib in ("2.6", "1.17"):
    for prov in ("shm", "tcp"):
        b, c = lat8.get((lib, prov, "base")), lat8.get((lib, prov, "credits"))
        if not b or not c:
            continue
        print(f"| {lib} | {prov} | {med(x[0] for x in b):.3f} | {med(x[1] for x in b):.3f} "
              f"[{min(x[1] for x in b):.2f}-{max(x[1] for x in b):.2f}] | {med(x[0] for x in c):.3f} | "
              f"{med(x[1] for x in c):.3f} [{min(x[1] for x in c):.2f}-{max(x[1] for x in c):.2f}] |")

# delivered.sh's log, when there
try:
    f = open(f"{d}/delivered.txt")
except OSError:
    sys.exit(0)
dl = defaultdict(list)
cur = None
for line in f:
    m = re.match(r"## round \d+ lib=(\S+) prov=(\S+) size=(\d+) build=(\S+)", line)
    if m:
        cur = (m.group(1), m.group(2), int(m.group(3)), m.group(4))
        continue
    m = re.search(r"delivered in [\d.]+ s: (\d+)/s", line)
    if m and cur:
        dl[cur].append(int(m.group(1)))
print()
print("delivered rate (messages/s at the receiver, delivered.c), median of the rounds [min-max]")
print("| libfabric | provider | size | base | credits | after/before | fi_rdm_bw -W 32 |")
print("|---|---|---|---|---|---|---|")
for lib in ("2.6", "1.17"):
    for prov in ("shm", "tcp"):
        for s in (8, 256, 4096):
            b, c = dl.get((lib, prov, s, "base")), dl.get((lib, prov, s, "new"))
            if not b or not c:
                continue
            r = ref.get((prov, s)) if lib == "2.6" else None
            rs = f"{med(r):,.0f}" if r else "-"
            print(f"| {lib} | {prov} | {s} | {med(b):,.0f} [{min(b):,}-{max(b):,}] | {med(c):,.0f} "
                  f"[{min(c):,}-{max(c):,}] | {med(c) / med(b):.2f}x | {rs} |")

# latency.sh's log, when there
try:
    f = open(f"{d}/latency.txt")
except OSError:
    sys.exit(0)
lt = defaultdict(list)
cur = None
for line in f:
    m = re.match(r"## round \d+ lib=(\S+) prov=(\S+) build=(\S+)", line)
    if m:
        cur = (m.group(1), m.group(2), m.group(3))
        continue
    x = line.split()
    if cur and len(x) >= 9 and x[0] == "8":
        lt[cur].append((float(x[4]), float(x[5])))
print()
print("8-byte latency (latency.sh), one-way us: median of the rounds' avg and p50 [p50 min-max], rounds")
print("| libfabric | provider | base avg | base p50 | credits avg | credits p50 | credits/base (p50) |")
print("|---|---|---|---|---|---|---|")
for lib in ("2.6", "1.17"):
    for prov in ("shm", "tcp"):
        b, c = lt.get((lib, prov, "base")), lt.get((lib, prov, "credits"))
        if not b or not c:
            continue
        bp, cp = med(x[1] for x in b), med(x[1] for x in c)
        print(f"| {lib} | {prov} | {med(x[0] for x in b):.3f} | {bp:.3f} [{min(x[1] for x in b):.2f}-"
              f"{max(x[1] for x in b):.2f}] | {med(x[0] for x in c):.3f} | {cp:.3f} [{min(x[1] for x in c):.2f}-"
              f"{max(x[1] for x in c):.2f}] | {cp / bp:.2f}x ({len(b)}) |")
