#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# guest_suite.sh BUILD_DIR [it|fault] - runs every verbs test inside the Soft-RoCE
# guest (tests/rxe/run-in-rxe-vm.sh with RXEVM_PAIR=1): each test on one rxe
# device (loopback, rxe0) and across the veth pair (rxea <-> rxeb).  One boot
# for all.  With "it": the integration suite (tests/integration, the programs
# ctest runs over tcp and intra, same assertions) over verbs instead, on rxe0
# and across the pair (the target on rxea, the initiator on rxeb): the
# verbs_rxe_it test (a boot of its own: the guest is slow).  With "fault":
# the verbs cases of tests/fault (faults injected below the library), the
# fault_verbs_rxe test, on rxe0.
set -u
B=${1:?usage: guest_suite.sh BUILD_DIR [it|fault]}
T=$B/tests/verbs
I=$B/tests/integration
fails=0; passes=0; skips=0
run() {  # name, command...
  local name=$1; shift
  local t0=$(date +%s.%N)
  timeout 240 "$@" > /tmp/gw-$name.log 2>&1; local rc=$?
  local dt=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N)-$t0}")
  if [ $rc = 0 ]; then passes=$((passes+1)); echo "PASS $name (${dt}s)"
  elif [ $rc = 77 ]; then skips=$((skips+1)); echo "SKIP $name: $(grep SKIP /tmp/gw-$name.log | head -1)"
  else fails=$((fails+1)); echo "FAIL $name (rc=$rc, ${dt}s); its output:"; tail -n 60 /tmp/gw-$name.log; fi
  [ "${GW_VERBOSE:-0}" = 1 ] && [ $rc = 0 ] && cat /tmp/gw-$name.log
  return 0
}
echo "guest: kernel $(uname -r); rxe0 gid $RXE_GID_INDEX; pair ${RXE_PAIR:-none}"
if [ "${2:-}" = fault ]; then
  # faults injected below the verbs transport (GPUWIRE_FAULT ibv.*,
  # docs/FAULTS.md): a completion given an error status, the queue pair
  # moved to the error state mid-stream, ibv_post_send refusing a chain, a
  # completion lost, ibv_create_qp failing under gw_connect
  for c in verbs_retry_exc verbs_rem_access verbs_qp_err verbs_post_fail verbs_drop verbs_create_qp; do
    IT_TIME_SCALE=10 GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 \
      run fault_${c}_rxe0 "$B/tests/fault/fault_xfer" $c
  done
  # every completion lost from the 10th on: the completion watchdog fails
  # the endpoint once none came for GPUWIRE_OP_TIMEOUT_MS
  IT_TIME_SCALE=10 GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 GPUWIRE_OP_TIMEOUT_MS=5000 \
    run fault_verbs_drop_all_rxe0 "$B/tests/fault/fault_xfer" verbs_drop_all
  echo "verbs guest fault suite: $passes passed, $skips skipped, $fails failed"
  [ $fails = 0 ]
  exit
fi
if [ "${2:-}" = it ]; then
  # (the timeout of 16, 268 ms: emulated RDMA READ pipelines outlast shorter ones)
  # The same programs and assertions as over tcp and intra; where verbs truly
  # differs the test asserts the verbs behaviour itself (GPUWIRE_TRANSPORTS=verbs):
  #  - it_safety, it_api_ext: after the target's NIC refuses a forged or
  #    revoked key the RC queue pair, and so the endpoint, has failed with
  #    GW_ERR_INVALID_KEY (docs/VERBS.md); the test checks that and its
  #    detail, and goes on with a spare endpoint.
  #  - it_lifetime: only slower here (gw_ep_close(ep, 0) with 8 gets of 8 MiB
  #    outstanding took over its 1 s bound in the emulated guest):
  #    IT_TIME_SCALE (tests/integration/it.h) widens its time bounds.
  # it_batch runs on rxe0 in the main guest suite (batch_rxe0).
  for t in it_rma it_msg it_many it_handshake it_auth it_safety it_api_ext it_lifetime it_integrity; do
    IT_TIME_SCALE=10 GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 run ${t}_rxe0 "$I/$t"
  done
  if [ -n "${RXE_PAIR:-}" ]; then
    for t in it_rma it_msg it_many it_batch it_safety; do
      GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxeb IT_TARGET_IB_DEVICE=rxea GPUWIRE_IB_TIMEOUT=16 \
        run ${t}_rxea_rxeb "$I/$t"
    done
  fi
  # the batch suite with the batches of host memory expanded into lists
  # through verbs' scatter/gather primitive (rma_iov: WRs gathering several
  # entries, verbs_iov.c), and batches canceled while their lists are posted
  GPUWIRE_BATCH_PATH=iov GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 \
    run batch_iov_rxe0 "$I/it_batch"
  if [ -n "${RXE_PAIR:-}" ]; then
    GPUWIRE_BATCH_PATH=iov GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxeb IT_TARGET_IB_DEVICE=rxea \
      GPUWIRE_IB_TIMEOUT=16 run batch_iov_rxea_rxeb "$I/it_batch"
  fi
  IT_TIME_SCALE=10 GPUWIRE_BATCH_PATH=iov GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 \
    run cancel_batch_iov_rxe0 "$I/it_cancel" batch
  # active messages (tl.h am_send): echoed in order, and refused
  for c in echo refused; do
    GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 run am_${c}_rxe0 "$I/it_am" $c
  done
  # the batch suite with every batch expanded by the protocol layer into
  # single operations (verbs sets no notify_out: an ORDERED notification
  # rides on the last entry as a put_notify)
  GPUWIRE_BATCH_PATH=expand GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 \
    run batch_expand_rxe0 "$I/it_batch"
  # a target busy elsewhere (no gpuwire call for 2.5 peer timeouts) served
  # by its progress thread: host memory, and GPU memory on the staging rung
  # (the fake driver), whose chunks the target's CPU copies in
  for c in busy threads; do
    IT_TIME_SCALE=10 GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 \
      run progress_${c}_rxe0 "$I/it_progress" $c
  done
  if [ -f "$B/tests/fakecuda/libgwfakecuda.so" ]; then
    IT_TIME_SCALE=10 GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 IT_PROGRESS_GPU=1 \
      GPUWIRE_CUDA_LIB="$B/tests/fakecuda/libgwfakecuda.so" run progress_busy_gpu_rxe0 "$I/it_progress" busy
  fi
  # bounded operations: cancel of every kind (verbs withdraws nothing once
  # posted: each completes), a frozen, a killed and a revoking target, a put
  # stream racing a deregistration, native batches and a rendezvous send
  # canceled while they move
  for c in ops frozen killed revoked dereg_race batch rndv; do
    IT_TIME_SCALE=10 GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 \
      run cancel_${c}_rxe0 "$I/it_cancel" $c
  done
  # the soak (tests/fault/soak.c, docs/FAULTS.md): random puts, gets, paged
  # batches, notifications, cancels, deregistrations and peer kills for
  # SOAK_SECONDS (60 here); its totals are printed whatever the outcome
  IT_TIME_SCALE=10 SOAK_SECONDS=${SOAK_SECONDS:-60} GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 \
    GPUWIRE_IB_TIMEOUT=16 run soak_rxe0 "$B/tests/fault/soak"
  grep -h "^soak\|^by kind" /tmp/gw-soak_rxe0.log
  # the peer's last message completes at its side and the peer dies before
  # we progress: the receive must still get it (a CQE behind a closed socket)
  GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 run last_words_rxe0 "$I/it_peer_fail" last_words
  echo "verbs guest integration suite: $passes passed, $skips skipped, $fails failed"
  [ $fails = 0 ]
  exit
fi
run smoke_rxe0 "$T/verbs_smoke" rxe0
run api_loopback_rxe0 "$T/verbs_api" rxe0 rxe0
run rdv_loopback_rxe0 "$T/verbs_rdv" rxe0 rxe0
run negotiate_rxe0 "$T/verbs_negotiate" rxe0
# batched and paged transfers (the integration suite's program over verbs)
GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 GPUWIRE_IB_TIMEOUT=16 run batch_rxe0 "$B/tests/integration/it_batch"
# the GPU registration ladder against the fake CUDA driver (its dma-buf reaches rxe's real refusal)
if [ -f "$B/tests/fakecuda/libgwfakecuda.so" ]; then
  GPUWIRE_CUDA_LIB="$B/tests/fakecuda/libgwfakecuda.so" run gpu_ladder_rxe0 "$T/verbs_gpu_ladder" rxe0
  # the registration cache: ranges inside live registrations share their MRs
  GPUWIRE_CUDA_LIB="$B/tests/fakecuda/libgwfakecuda.so" GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=rxe0 \
    GPUWIRE_IB_TIMEOUT=16 run reg_cache_rxe0 "$B/tests/fakecuda/fakecuda_reg_cache"
  # every operation with GPU regions on the staging rung (one side and both)
  GPUWIRE_CUDA_LIB="$B/tests/fakecuda/libgwfakecuda.so" run gpu_staged_rxe0 "$T/verbs_gpu_staged" rxe0 rxe0
  # batches with GPU regions on the staging rung: gathered and scattered by the copy kernel
  # (the fake driver's launch log counts the launches), the owner by copy-engine copies
  rm -f /tmp/gw-gpu-batch.launches
  GPUWIRE_CUDA_LIB="$B/tests/fakecuda/libgwfakecuda.so" FAKECUDA_LAUNCHES=/tmp/gw-gpu-batch.launches \
    run gpu_batch_rxe0 "$T/verbs_gpu_batch" rxe0 rxe0
  # a staged send to a receiver that does not announce staged transfers: a clear refusal
  GPUWIRE_CUDA_LIB="$B/tests/fakecuda/libgwfakecuda.so" run rdv_staged_rxe0 "$T/verbs_rdv" rxe0 rxe0 staged
fi
if [ -n "${RXE_PAIR:-}" ]; then
  run smoke_rxea "$T/verbs_smoke" rxea
  # the client (rxeb) side drops its RoCE packets for one test: retry exceeded
  GW_TEST_BREAK_LINK="tc qdisc add dev vb root netem loss 100%" \
  GW_TEST_RESTORE_LINK="tc qdisc del dev vb root" \
    run api_pair_rxea_rxeb "$T/verbs_api" rxea rxeb
  run rdv_pair_rxea_rxeb "$T/verbs_rdv" rxea rxeb
  if [ -f "$B/tests/fakecuda/libgwfakecuda.so" ]; then
    GPUWIRE_CUDA_LIB="$B/tests/fakecuda/libgwfakecuda.so" run gpu_staged_rxea_rxeb "$T/verbs_gpu_staged" rxea rxeb
  fi
fi
[ -x "$T/verbs_select" ] && run select "$T/verbs_select"
# the NCCL net plugin (plugin/nccl) driven as NCCL's proxy drives it, over verbs
# (dev 0: the first active RDMA port), host and fake-GPU buffers (on: the
# guest has no GPUDirect RDMA, where auto takes host buffers)
N=$B/tests/nccl/nccl_plugin_tcp; P=$B/plugin/nccl/libnccl-net-gpuwire.so
if [ -x "$N" ] && [ -f "$P" ]; then
  GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_TIMEOUT=16 run nccl_plugin_verbs "$N" "$P" --expect-transport verbs
  if [ -f "$B/tests/fakecuda/libgwfakecuda.so" ]; then
    GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_TIMEOUT=16 GPUWIRE_CUDA_LIB="$B/tests/fakecuda/libgwfakecuda.so" \
      GPUWIRE_NCCL_GPU_BUFFERS=on run nccl_plugin_verbs_fakecuda "$N" "$P" --mem cuda --rounds 1 --expect-transport verbs
  fi
fi
echo "verbs guest suite: $passes passed, $skips skipped, $fails failed"
[ $fails = 0 ]
