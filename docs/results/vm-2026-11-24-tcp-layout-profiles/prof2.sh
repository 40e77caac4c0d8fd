#!/bin/bash
# prof2.sh BUILD TAG ARGS... : steady-state CPU samples (1 kHz cpu-clock) per side of a loopback run of -n 60,
# leaving out samples whose stack holds memset or a page fault (the buffers' setup)
b=$1; tag=$2; shift 2
bw=$(GPUWIRE_TRANSPORTS=tcp perf record -F 1000 -e cpu-clock -g -o /tmp/q-$tag.data $b/gpuwire perf --loopback --bw-only --json --window 1 -n 60 "$@" 2>/dev/null | tail -1 | grep -o '"bw_GBps":[0-9.]*')
perf script -i /tmp/q-$tag.data -F pid,ip,sym 2>/dev/null | awk -v tag=$tag -v bw=$bw '
 /^ *[0-9]+ *$/ || /^[ \t]*[0-9]+[ \t]*$/ {pid=$1; next}
 NF==0 { if (pid!="") { if (!skip) {n[pid]++; if (top ~ /copy_from_iter/) cf[pid]++; if (top ~ /copy_to_iter/) ct[pid]++; if (top ~ /memmove|memcpy/) mm[pid]++} } pid=""; skip=0; top=""; next }
 { if (top=="") top=$NF; if ($0 ~ /memset|page_fault|do_exit|exit_mmap/) skip=1 }
 END { printf "%s %s", tag, bw; for (p in n) printf " | pid %s: %d (from %d to %d memcpy %d)", p, n[p], cf[p], ct[p], mm[p]; print "" }'
