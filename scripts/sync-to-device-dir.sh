#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# sync-to-device-dir.sh DEST - copies this checkout's tracked and untracked
# (not ignored) files into DEST, for sending to a GPU machine from another
# checkout (the device tool sends only the session's own checkout).
set -eu
dest=$1
cd "$(dirname "$0")/.."
rm -rf "$dest"
mkdir -p "$dest"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$dest"
