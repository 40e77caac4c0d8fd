#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# install_smoke.sh BUILD_DIR - installs into a temporary prefix, then builds
# and runs a program against the installed header and library found through
# pkg-config (shared), and one linked statically against libgpuwire.a.
set -eu
b=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cmake --install "$b" --prefix "$d/prefix" >/dev/null
command -v pkg-config >/dev/null || { echo "SKIP: pkg-config not installed"; exit 77; }
export PKG_CONFIG_PATH="$d/prefix/lib/pkgconfig"
cat >"$d/hello.c" <<'C'
#include <gpuwire.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    gw_context_t *c;
    if (gw_context_create(NULL, &c) != GW_OK)
        return 1;
    printf("gpuwire %s (%s)\n", gw_version(), gw_build_features());
    return strcmp(gw_version(), GW_VERSION_STRING) != 0 || gw_context_destroy(c) != GW_OK;
}
C
cc "$d/hello.c" -o "$d/hello" $(pkg-config --cflags --libs gpuwire) -Wl,-rpath,"$d/prefix/lib"
"$d/hello"
cc "$d/hello.c" -o "$d/hello_static" $(pkg-config --cflags gpuwire) "$d/prefix/lib/libgpuwire.a" \
   $(pkg-config --static --libs-only-l gpuwire | sed 's/-lgpuwire//')
"$d/hello_static"
[ -x "$d/prefix/bin/gpuwire" ] && "$d/prefix/bin/gpuwire" --version
