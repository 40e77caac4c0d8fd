#!/bin/bash
# gpu_batch_ab.sh - intra GPU batches, one tree against another on one GPU:
# the tree in the current directory ("before", /tmp/b0) and the one in
# $AFTER (default .dev-lead, "after", /tmp/b1), both built here; each shape
# best of 3 with before, after and one contiguous put of the same bytes
# alternating; the after build's average posting time (post_us) per run.
# Both forms: the list form (gw_xfer_batch over prepared lists) and the
# paged form (gw_xfer_pages, --pages), each before and after.
# Run from the repository root on a GPU machine; logs under $OUT.
# usage: AFTER=DIR bench/gpu_batch_ab.sh     (FORMS="list pages" SHAPES=... to narrow)
set -u
O=${OUT:-$PWD/gpu-logs}; mkdir -p "$O" /tmp/ab
FORMS=${FORMS:-list pages}
AFTER=${AFTER:-.dev-lead}
( cmake -S . -B /tmp/b0 -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/b0 -j8 --target gpuwire_tool ) > /tmp/ab/b0.log 2>&1 &
( cd "$AFTER" && cmake -S . -B /tmp/b1 -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/b1 -j8 --target gpuwire_tool fakecuda_batch_gpu ) > /tmp/ab/b1.log 2>&1
wait
gw() { local b=$1 t=$2; shift 2; GPUWIRE_TRANSPORTS=$t timeout 60 /tmp/$b/gpuwire perf --loopback --mem cuda --bw-only --json --window 1 --duration 1 "$@" 2>>/tmp/ab/perf.err | tee -a /tmp/ab/perf.jsonl | tail -1; }
bw() { sed -n 's/.*"bw_GBps":\([0-9.]*\).*/\1/p'; }
pu() { sed -n 's/.*"post_us":\([0-9.]*\).*/\1/p'; }
mx() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{print (a > b ? a : b)}'; }
{
echo "# intra GPU batch, $(git log -1 --format=%h 2>/dev/null) (before) vs $AFTER $(cd "$AFTER" && git log -1 --format=%h 2>/dev/null) (after), $(date -u), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), best of 3 alternating, window 1; post_us: after, per run"
printf '%-6s %-10s %10s %10s %10s %8s %8s %s\n' form shape before after contig r_before r_after post_us
for form in $FORMS; do
  [ $form = pages ] && fl=--pages || fl=
  for shape in ${SHAPES:-"4096 16K 67108864" "4096 1K 4194304" "1024 16K 16777216" "256 1K 262144" "64 1M 67108864"} ${EXTRA:-}; do
    set -- $shape; b0=0 b1=0 c=0 p=""
    for i in 1 2 3; do
      b0=$(mx $b0 $(gw b0 intra --batch $1 --size $2 $fl | bw))
      j=$(gw b1 intra --batch $1 --size $2 $fl); b1=$(mx $b1 $(echo "$j" | bw)); p="$p$(echo "$j" | pu)/"
      c=$(mx $c $(gw b1 intra --size $3 | bw))
    done
    printf '%-6s %-10s %10.1f %10.1f %10.1f %8.2f %8.2f %s\n' $form "${1}x$2" $b0 $b1 $c $(awk -v a=$b0 -v c=$c 'BEGIN{print a/c}') $(awk -v a=$b1 -v c=$c 'BEGIN{print a/c}') "$p"
  done
done
echo "== tcp staged rows (after)"
for shape in "4096 16K 67108864"; do set -- $shape; echo "tcp ${1}x$2 batch $(gw b1 tcp --batch $1 --size $2 | bw) contig $(gw b1 tcp --size $3 | bw)"; done
echo "== batch test on the real driver (after)"
cd "$AFTER"
for t in intra tcp; do want=""; [ -n "${SKIP_TCP_TEST:-}" ] && [ $t = tcp ] && continue; [ $t = intra ] && want="GPU batches: copy kernel"; GPUWIRE_TRANSPORTS=$t BATCH_GPU_EXPECT="$want" timeout 120 /tmp/b1/tests/fakecuda/fakecuda_batch_gpu > /tmp/ab/test-$t.log 2>&1; echo "$t: exit $? $(grep -c 'all checks passed' /tmp/ab/test-$t.log) passed-lines"; done
} 2>&1 | tee $O/ab3.txt
tar czf $O/logs.tgz -C /tmp/ab .
