#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# nccl_load.sh CHECK_BIN PLUGIN_DIR - a real NCCL loads libnccl-net-gpuwire.so
# through NCCL_NET_PLUGIN=gpuwire and initialises it (one-rank communicator).
# libnccl.so.2: $GW_NCCL_LIB, else the loader's path; absent: exit 77.
bin=$1; dir=$2
log=$(mktemp)
LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" NCCL_NET_PLUGIN=gpuwire NCCL_DEBUG=INFO \
  NCCL_DEBUG_SUBSYS=INIT,NET NCCL_NVLS_ENABLE=0 "$bin" ${GW_NCCL_LIB:-} >"$log" 2>&1
rc=$?
cat "$log"
if [ $rc = 77 ]; then rm -f "$log"; exit 77; fi
fail=0
[ $rc = 0 ] || { echo "FAIL: nccl_load_check exited $rc"; fail=1; }
grep -q "Loaded net plugin gpuwire" "$log" || { echo "FAIL: NCCL did not report loading the gpuwire plugin"; fail=1; }
grep -q "NET/gpuwire : gpuwire .* device(s)" "$log" || { echo "FAIL: the plugin's init did not log through NCCL"; fail=1; }
grep -q "Using network gpuwire" "$log" || { echo "FAIL: NCCL did not pick the gpuwire network"; fail=1; }
rm -f "$log"
[ $fail = 0 ] && echo "PASS: NCCL loaded and initialised the gpuwire plugin"
exit $fail
