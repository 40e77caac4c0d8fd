#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every source file of the project carries its licence as an SPDX line near
# its top, so a file copied out of the tree still says under what terms.
# Usage: check_spdx.sh <source root>
root=${1:-.}
cd "$root" || exit 2
if [ -d .git ] || [ -f .git ]; then
  files=$(git ls-files)
else
  files=$(find . -type f ! -path './build*' ! -path './.git/*' | sed 's|^\./||')
fi
bad=0
for f in $files; do
  case "$f" in
    docs/results/*|tests/*/fixtures/*|*.md|*.txt|*.log|*.json|*.jsonl|*.csv|*.png|*.tgz|*.patch|*.err|LICENSE) continue ;;
    *.c|*.h|*.cu|*.py|*.sh|*.cmake|*.map|*.def|*.awk|*.in|*/CMakeLists.txt|CMakeLists.txt|Makefile|*/Makefile|.ci/run|*.toml|*.cfg) ;;
    *) continue ;;
  esac
  [ -f "$f" ] || continue
  if ! head -n 5 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0'; then
    echo "no SPDX-License-Identifier: Apache-2.0 line in the first 5 lines of $f"
    bad=$((bad + 1))
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "check_spdx: $bad file(s) without the licence line"
  exit 1
fi
echo "check_spdx: every source file carries its SPDX line"
