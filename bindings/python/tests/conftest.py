"""Fixtures of the binding's tests: a real etcd on loopback, ringctl, and the
paths the build hands over (bindings/python/CMakeLists.txt sets them):

  RINGKEEPER_LIBRING   the built libring.so (read by ringkeeper itself)
  RINGCTL              the built ringctl
  RINGKEEPER_CC        the C compiler, RINGKEEPER_INCLUDES the header folders
                       (';'-separated), for test_cdef.py
  RINGKEEPER_BUILD     the build tree, which test_package.py installs from
  RINGKEEPER_VERSION   the project's version, which the package's must be

The etcd fixture is tests/common/etcd_harness.c's, in Python: one member on
two free loopback ports, a temporary data dir, killed and removed after the
session (and killed with this process should it die first: PDEATHSIG).
"""
import base64
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the ringkeeper package
sys.path.insert(0, HERE)  # tables.py

ETCD_START_S = 30  # etcd_harness.c's bound on a member's start
REQUEST_S = 5  # one gateway request


def need_env(name):
    """A path the build passes in; the test fails (never skips) without it."""
    value = os.environ.get(name)
    if not value:
        pytest.fail("%s is not set: run these tests through ctest -L python" % name)
    return value


_next_port = [0]


def free_port():
    """A free loopback port in 10000 .. the kernel's ephemeral range, as
    harness_free_port picks it: below that range no client's outgoing
    connection takes the port between this check and etcd's bind."""
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    if lo <= 12000:
        lo = 32768
    span = lo - 1 - 10000
    if _next_port[0] == 0:
        _next_port[0] = os.getpid() * 7919 + int(time.time())
    for _ in range(span):
        port = 10000 + _next_port[0] % span
        _next_port[0] += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port below %d" % lo)


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Etcd:
    """One etcd member and a few calls to its gRPC-JSON gateway."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ringkeeper-py-etcd-")
        client, peer = free_port(), free_port()
        self.endpoints = "http://127.0.0.1:%d" % client
        peer_url = "http://127.0.0.1:%d" % peer
        self.log_path = os.path.join(self.dir, "etcd.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            ["etcd", "--name", "m0", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", self.endpoints, "--advertise-client-urls", self.endpoints,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", "m0=" + peer_url, "--initial-cluster-state", "new",
             "--heartbeat-interval", "50", "--election-timeout", "500",
             "--logger", "zap", "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent)

    def wait(self):
        end = time.monotonic() + ETCD_START_S
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                break
            try:
                self.call("/v3/kv/range", {"key": _b64(b"\0")}, timeout=1)
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("etcd did not start; see %s" % self.log_path)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def call(self, path, body, timeout=REQUEST_S):
        req = urllib.request.Request(self.endpoints + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read(1 << 24))  # bounded: a table is far smaller

    def put(self, key, value):
        self.call("/v3/kv/put", {"key": _b64(key), "value": _b64(value)})

    def get(self, key):
        """The value of key as bytes, None when absent."""
        kvs = self.call("/v3/kv/range", {"key": _b64(key)}).get("kvs", [])
        return base64.b64decode(kvs[0].get("value", "")) if kvs else None


def _b64(b):
    if isinstance(b, str):
        b = b.encode()
    return base64.b64encode(b).decode("ascii")


@pytest.fixture(scope="session")
def etcd():
    e = Etcd()
    try:
        e.wait()
        yield e
    finally:
        e.stop()


class Ringctl:
    def __init__(self, path, endpoints):
        self.path, self.endpoints = path, endpoints

    def run(self, cluster, *args, check=True):
        """Runs ringctl against the test etcd; bounded at 60 s."""
        r = subprocess.run([self.path, "--endpoints", self.endpoints, "--cluster", cluster]
                           + list(args), capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            pytest.fail("ringctl %s: exit %d\n%s%s" % (" ".join(args), r.returncode,
                                                         r.stdout, r.stderr))
        return r

    def lookup(self, cluster, key):
        return json.loads(self.run(cluster, "lookup", key, "--json").stdout)


@pytest.fixture(scope="session")
def ringctl(etcd):
    return Ringctl(need_env("RINGCTL"), etcd.endpoints)
