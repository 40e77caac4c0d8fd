#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu_batch_ab.sh - intra GPU batches, one tree against another on one GPU:
# the tree in the current directory ("before", /tmp/b0) and the one in
# $AFTER (default .dev-lead, "after", /tmp/b1), both built here; each shape
# best of REPS (default 3) with before, after and one contiguous put of the
# same bytes alternating; the after build's average posting time (post_us)
# per run.  Forms (FORMS, default "list pages"): list = gw_xfer_batch over
# prepared lists, all entries (NULL index arrays); idx = the same lists
# selected by index arrays 0..N-1 (`perf --indices`; a build without that
# option runs the list form there, said in the header); pages =
# gw_xfer_pages (--pages).  Rows stop once BUDGET seconds (default 600)
# have passed since the start (a device call has a time limit); TCP_ROWS=0
# skips the tcp row, TESTS=0 the batch test on the real driver.
# Run from the repository root on a GPU machine; logs under $OUT.
# usage: AFTER=DIR bench/gpu_batch_ab.sh   (FORMS="list idx" SHAPES="4096:16K:67108864 64:1M:67108864" REPS=3 BUDGET=200)
set -u
O=${OUT:-$PWD/gpu-logs}; mkdir -p "$O" /tmp/ab
FORMS=${FORMS:-list pages}
AFTER=${AFTER:-.dev-lead}
REPS=${REPS:-3}
BUDGET=${BUDGET:-600}
J=$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))
( cmake -S . -B /tmp/b0 -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/b0 -j$J --target gpuwire_tool ) > /tmp/ab/b0.log 2>&1 &
( cd "$AFTER" && cmake -S . -B /tmp/b1 -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/b1 -j$J --target gpuwire_tool fakecuda_batch_gpu ) > /tmp/ab/b1.log 2>&1
wait
echo "builds done after ${SECONDS}s" > /tmp/ab/times.txt
gw() { local b=$1 t=$2; shift 2; GPUWIRE_TRANSPORTS=$t timeout 60 /tmp/$b/gpuwire perf --loopback --mem cuda --bw-only --json --window 1 --duration 1 "$@" 2>>/tmp/ab/perf.err | tee -a /tmp/ab/perf.jsonl | tail -1; }
bw() { sed -n 's/.*"bw_GBps":\([0-9.]*\).*/\1/p'; }
pu() { sed -n 's/.*"post_us":\([0-9.]*\).*/\1/p'; }
mx() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{print (a > b ? a : b)}'; }
has_idx() { /tmp/$1/gpuwire perf --help 2>&1 | grep -q -- --indices; }
{
echo "# intra GPU batch, $(git log -1 --format=%h 2>/dev/null) (before) vs $AFTER $(cd "$AFTER" && git log -1 --format=%h 2>/dev/null) (after), $(date -u), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), best of $REPS alternating, window 1; post_us: after, per run; load $(cut -d' ' -f1-3 /proc/loadavg)"
case " $FORMS " in *" idx "*) has_idx b0 || echo "# before has no perf --indices: its idx rows are the list form (all entries)";; esac
printf '%-6s %-10s %10s %10s %10s %8s %8s %s\n' form shape before after contig r_before r_after post_us
for form in $FORMS; do
  f0= f1=
  case $form in pages) f0=--pages f1=--pages;; idx) f1=--indices; has_idx b0 && f0=--indices;; esac
  for shape in ${SHAPES:-4096:16K:67108864 4096:1K:4194304 1024:16K:16777216 256:1K:262144 64:1M:67108864} ${EXTRA:-}; do
    set -- ${shape//:/ }; b0=0 b1=0 c=0 p=""
    if [ $SECONDS -gt $BUDGET ]; then echo "$form ${1}x$2: skipped (past BUDGET=${BUDGET}s)"; continue; fi
    for i in $(seq "$REPS"); do
      b0=$(mx $b0 $(gw b0 intra --batch $1 --size $2 $f0 | bw))
      j=$(gw b1 intra --batch $1 --size $2 $f1); b1=$(mx $b1 $(echo "$j" | bw)); p="$p$(echo "$j" | pu)/"
      c=$(mx $c $(gw b1 intra --size $3 | bw))
    done
    printf '%-6s %-10s %10.1f %10.1f %10.1f %8.2f %8.2f %s\n' $form "${1}x$2" $b0 $b1 $c $(awk -v a=$b0 -v c=$c 'BEGIN{print a/c}') $(awk -v a=$b1 -v c=$c 'BEGIN{print a/c}') "$p"
  done
done
echo "rows done after ${SECONDS}s" >> /tmp/ab/times.txt
if [ "${TCP_ROWS:-1}" != 0 ]; then
  echo "== tcp staged rows (after)"
  for shape in "4096 16K 67108864"; do set -- $shape; echo "tcp ${1}x$2 batch $(gw b1 tcp --batch $1 --size $2 | bw) contig $(gw b1 tcp --size $3 | bw)"; done
fi
if [ "${TESTS:-1}" != 0 ]; then
  echo "== batch test on the real driver (after)"
  cd "$AFTER"
  for t in intra tcp; do want=""; [ -n "${SKIP_TCP_TEST:-}" ] && [ $t = tcp ] && continue; [ $t = intra ] && want="GPU batches: copy kernel"; GPUWIRE_TRANSPORTS=$t BATCH_GPU_EXPECT="$want" timeout 120 /tmp/b1/tests/fakecuda/fakecuda_batch_gpu > /tmp/ab/test-$t.log 2>&1; echo "$t: exit $? $(grep -c 'all checks passed' /tmp/ab/test-$t.log) passed-lines"; done
fi
echo "all done after ${SECONDS}s" >> /tmp/ab/times.txt
} 2>&1 | tee $O/ab3.txt
tar czf $O/logs.tgz -C /tmp/ab .
