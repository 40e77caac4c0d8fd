#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run-main.sh BUILD - `make run`'s main job: what this machine has (the
# gpuwire info summary), then a loopback perf sweep of its best path.  With a
# usable GPU the GPU-memory sweep comes first (both processes on GPU 0), then
# host memory, with this machine's memcpy and pipe ping-pong beside it
# (gpuwire perf --reference).
# PERF_SIZES (default 8:64M) and PERF_DURATION (seconds per phase and size,
# default 0.5) shorten or lengthen the sweeps.
set -u
b=${1:-build}
sizes=${PERF_SIZES:-8:64M}
dur=${PERF_DURATION:-0.5}
info=$("$b/gpuwire" info) || { echo "$info"; exit 1; }
echo "$info"
rc=0
# the intra line names the GPUs CUDA IPC can use: "... on N GPU(s)"
if echo "$info" | grep -q "GPU memory by CUDA IPC.* on [1-9][0-9]* GPU(s)"; then
  echo
  echo "== GPU memory (GPU 0 on both sides): gpuwire perf --loopback --op put --mem cuda:0 --size $sizes --duration $dur"
  "$b/gpuwire" perf --loopback --op put --mem cuda:0 --size "$sizes" --duration "$dur" || rc=1
else
  echo
  echo "== no usable GPU here ($(echo "$info" | sed -n 's/.*GPU memory: no (\(.*\)).*/\1/p' | head -1)): host memory only"
fi
echo
echo "== host memory: gpuwire perf --loopback --op put --size $sizes --duration $dur --reference"
"$b/gpuwire" perf --loopback --op put --size "$sizes" --duration "$dur" --reference || rc=1
exit $rc
