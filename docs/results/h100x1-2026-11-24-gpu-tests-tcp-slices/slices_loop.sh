#!/bin/bash
# temporary: repeat the tcp slices case of python_gpu
N=${1:-20}; B=${B:-/tmp/gw-build}; PY=/opt/torch/.venv/bin/python
export PYTHONPATH=$PWD/python LD_LIBRARY_PATH=$B PYTHONUNBUFFERED=1
fail=0
for i in $(seq $N); do
  st=/tmp/slst.$i; rm -f $st
  timeout 120 $PY python/tests/gpu_peer.py target tcp ${CASE:-slices} $st > /tmp/t.$i 2>&1 & tp=$!
  timeout 120 $PY python/tests/gpu_peer.py initiator tcp ${CASE:-slices} $st > /tmp/i.$i 2>&1; irc=$?
  wait $tp; trc=$?
  if [ $irc != 0 ] || [ $trc != 0 ]; then fail=$((fail+1)); echo "run $i: initiator rc $irc target rc $trc"; grep -h -E "differs|Error|TIMEOUT" /tmp/i.$i /tmp/t.$i | head -4; fi
done
echo "$fail of $N failed"
