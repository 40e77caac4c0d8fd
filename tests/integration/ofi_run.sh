#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs an integration test over the ofi transport: skipped (77) with the
# reason when libfabric.so.1 is not installed (the transport loads it at run
# time; the build only needs its headers).
# usage: ofi_run.sh PROVIDER PROGRAM [ARGS...]
prov=$1
shift
if ! ldconfig -p 2>/dev/null | grep -q 'libfabric\.so\.1 ' && [ -z "${GPUWIRE_OFI_LIB:-}" ]; then
  echo "SKIP: libfabric.so.1 is not installed (apt-get install libfabric1): no ofi transport to test"
  exit 77
fi
GPUWIRE_TRANSPORTS=ofi GPUWIRE_OFI_PROVIDER=$prov exec "$@"
