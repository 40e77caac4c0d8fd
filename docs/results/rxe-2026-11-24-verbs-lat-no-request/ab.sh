#!/bin/bash
# ab.sh BUILD OLD_BENCH - one-off for h14m: this build's gw_verbs_bench and an
# older one alternating in one guest boot, no perftest (new-vs-old only),
# each run with GW_BENCH_DESCRIBE=1 (the client's posting counters).
# Knobs: ROWS ("send:1024 put:4096"), REPS (8), N (20000).
set -u
B=$(cd "$1" && pwd); OLD=$2
if [ -z "${RXE_DEV:-}" ]; then
  exec env RXEVM_TIMEOUT=1200 "$(dirname "$0")/../../../tests/rxe/run-in-rxe-vm.sh" "$0" "$B" "$OLD"
fi
echo "# ab: $(date -u '+%F %T UTC'), guest load $(cut -d' ' -f1-3 /proc/loadavg)"
for row in ${ROWS:-send:1024 put:4096}; do
  op=${row%%:*}; s=${row##*:}
  for r in $(seq ${REPS:-8}); do
    for side in new old; do
      [ $((r % 2)) = 0 ] && side=$([ $side = new ] && echo old || echo new)
      bin=$B/tests/verbs/gw_verbs_bench; [ $side = old ] && bin=$OLD
      out=$(GW_BENCH_DESCRIBE=1 timeout 90 $bin $op $s ${N:-20000} $RXE_DEV $RXE_DEV 2>/dev/null)
      echo "$op $s round $r $side: $(echo "$out" | sed -n 's/.*ops_s=\([0-9]*\).*/\1/p') ops/s;" \
           "$(echo "$out" | grep -o '[0-9]* WRs in [0-9]* posts, [0-9]* signalled; [0-9]* completions' )"
    done
  done
done
