#!/usr/bin/env bash
# Installs every Debian package Ringkeeper needs to build, test and run its demo.
# Idempotent; run as root on Debian 12 (bookworm) or later.
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config git ca-certificates
  clang libclang-rt-14-dev          # libFuzzer, ASan/UBSan/TSan runtimes
  clang-format-14                   # tests/check_format.sh: the tree stays formatted
  libxxhash-dev                     # XXH3, the ring hash
  libcjson-dev                      # JSON codec for tables, plans, etcd gateway
  libcurl4-openssl-dev              # etcd gateway and arc client
  libmicrohttpd-dev                 # arc server, /metrics, /healthz
  libsodium-dev                     # HMAC-SHA-256 of signed arc requests and answers
  check                             # unit test framework
  libmemcached-dev                  # ketama, the benchmark peer
  etcd-server etcd-client           # the source of truth (tests start their own)
  procps psmisc iproute2 curl       # process and port handling in tests and demo
  chromium                          # headless browser: the coordinator's status page test
  python3                           # the demo's replica comparison (deploy/compare-replicas.py)
  python3-cffi python3-pytest       # the Python binding (bindings/python) and its tests
  python3-xxhash                    # its in-place lookup: XXH3 64 of a key in Python
  python3-venv python3-pip python3-setuptools  # test_package.py: pip install into a fresh venv, offline
  openssl                           # test certificates for the TLS arc transfers
  libxml2-utils                     # xmllint: the rendered SVG is checked as XML
  util-linux                        # mount (tmpfs for the full-disk tests), script (a tty for apply --wait)
  e2fsprogs                         # mkfs.ext4: the failing-disk test's file system on a loop device
  faketime                          # libfaketime: test_coord_clock fakes the coordinator's clocks
  prometheus                        # promtool check/test rules on deploy/prometheus, and the
                                    # Prometheus test_e2e_prometheus scrapes a cluster with (the
                                    # package's own service is not used: tests start their own)
  man-db groff-base                 # man --warnings: the man_pages test renders the built pages
  dpkg-dev                          # dpkg-shlibdeps: cpack -G DEB finds the packages' dependencies
  lintian                           # install_deb: no lintian error or warning on the packages
  zsh                               # ringctl_completion: the zsh script parses (zsh -n)
  nftables                          # tests/net: partitions and loss inside the fleet's namespaces
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: must run as root (it calls apt-get)" >&2
  exit 2
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps.sh: all ${#pkgs[@]} packages present"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
