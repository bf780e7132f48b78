#!/usr/bin/env bash
# Checks Ringkeeper's Prometheus rules (ctest: test_prometheus_rules):
# `promtool check rules` on every rule file in DIR (its *.yml but the unit
# tests), then `promtool test rules` on DIR/tests.yml, whose synthetic
# series make each alert fire on a bad series and stay quiet on a good one.
# Without promtool: exit 77 (ctest: skipped), or 1 when RING_REQUIRE_PROMETHEUS
# is set (tests/run.sh sets it: deploy/install-deps.sh installs it).
# Usage: check_rules.sh DIR
set -euo pipefail

dir=${1:?usage: check_rules.sh DIR}
if ! command -v promtool >/dev/null; then
  if [ -n "${RING_REQUIRE_PROMETHEUS:-}" ]; then
    echo "FAIL: promtool is missing and RING_REQUIRE_PROMETHEUS is set" >&2
    exit 1
  fi
  echo "SKIP: promtool is missing (deploy/install-deps.sh installs package prometheus)" >&2
  exit 77
fi

rules=()
for f in "$dir"/*.yml; do
  [ "$(basename "$f")" = tests.yml ] || rules+=("$f")
done
if [ "${#rules[@]}" -lt 2 ]; then
  echo "FAIL: expected the alert and the recording rule files in $dir, found ${#rules[@]}" >&2
  exit 1
fi
promtool check rules "${rules[@]}"
# promtool resolves tests.yml's rule_files against the working directory.
cd "$dir"
promtool test rules tests.yml
