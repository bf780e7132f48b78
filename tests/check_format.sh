#!/usr/bin/env bash
# Fails when a tracked C file differs from what clang-format (the repository's
# .clang-format, clang-format 14 as Debian ships it) would write, naming each
# file. Usage: tests/check_format.sh [--fix]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cf=$(command -v clang-format-14 || command -v clang-format) ||
  { echo "check_format: clang-format not found (apt-get install clang-format-14)" >&2; exit 2; }
cd "$root"
# The tracked files; without git (an exported tree), every C file outside build/.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.c' '*.h')
else
  mapfile -t files < <(find . -path ./build -prune -o -path './.*' -prune -o \
    \( -name '*.c' -o -name '*.h' \) -type f -print | sed 's|^\./||' | sort)
fi
if [ "${1:-}" = --fix ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
drift=0
for f in "${files[@]}"; do
  if ! "$cf" "$f" | cmp -s - "$f"; then
    echo "check_format: $f is not clang-formatted (tests/check_format.sh --fix)"
    drift=$((drift + 1))
  fi
done
[ "$drift" -eq 0 ] || { echo "check_format: $drift file(s) drift" >&2; exit 1; }
echo "check_format: ${#files[@]} files clean"
