# SPDX-License-Identifier: Apache-2.0
"""paired.py PERF.JSONL - from an ab.sh OUT folder's perf.jsonl: per row and
side, the median rate and the median CPU time per descriptor (the
initiator's user + system time over the descriptors it moved), then each
side's per-round ratio to the side `main` for both (median, quartiles,
extremes, rounds below 1)."""
import collections
import json
import statistics
import sys

runs = collections.defaultdict(dict)
seen = collections.Counter()
for line in open(sys.argv[1]):
    side, row, j = line.split(' ', 2)
    try:
        r = json.loads(j)
    except ValueError:
        continue
    k = (row, side)
    rnd = seen[k]
    seen[k] += 1
    cpu_ns = r['cpu_initiator_pct'] / 100 * r['elapsed_s'] / (r['iterations'] * max(r['batch'], 1)) * 1e9
    runs[(row, rnd)][side] = (r['msg_rate'], cpu_ns)


def spread(v):
    v = sorted(v)
    n = len(v)
    return "median %.3f  quartiles %.3f-%.3f  min %.3f max %.3f  below 1: %d of %d" % (
        statistics.median(v), v[n // 4], v[(3 * n) // 4], v[0], v[-1], sum(x < 1 for x in v), n)


for row in sorted(set(k[0] for k in runs)):
    rounds = [runs[k] for k in sorted(runs) if k[0] == row]
    sides = sorted(set(s for x in rounds for s in x), key=lambda s: (s != 'main', s))
    for s in sides:
        print(row, s, "rate median %.0f, CPU ns per descriptor median %.1f" % (
            statistics.median(x[s][0] for x in rounds if s in x), statistics.median(x[s][1] for x in rounds if s in x)))
    for s in sides[1:]:
        pairs = [x for x in rounds if s in x and 'main' in x]
        print(row, s + "/main rate:", spread([x[s][0] / x['main'][0] for x in pairs]))
        print(row, s + "/main CPU per descriptor:", spread([x[s][1] / x['main'][1] for x in pairs]))
