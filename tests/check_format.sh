#!/usr/bin/env bash
# Fails when a tracked C file differs from what clang-format (the repository's
# .clang-format, clang-format 14 as Debian ships it) would write, naming each
# file. Usage: tests/check_format.sh [--fix]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cf=$(command -v clang-format-14 || command -v clang-format) ||
  { echo "check_format: clang-format not found (apt-get install clang-format-14)" >&2; exit 2; }
cd "$root"
mapfile -t files < <(git ls-files '*.c' '*.h')
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
