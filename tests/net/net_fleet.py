#!/usr/bin/env python3
"""net_fleet.py: a Ringkeeper fleet in network namespaces, its faults and
its scenarios (tests/net/README.md).

    net_fleet.py --build BUILD_DIR SCENARIO     run one scenario (ctest net_*)
    net_fleet.py --build BUILD_DIR bench        the link figures (tests/bench)
    net_fleet.py sweep                          remove what dead runs left

Every host (ring-agent + ring-kv), etcd member and coordinator lives in a
namespace of its own, wired by a veth to a bridge that sits in a namespace
of its own too: nothing of the fleet is in the machine's namespace, so the
bridge has no route off the machine and runs never see each other. The
harness itself enters a client namespace on the bridge (ctl) and runs
ringctl, ring-kv-load and net_check from there.

Names are rkn<pid>-<role>; the run removes everything it made at its end
(atexit, SIGTERM, SIGINT) and sweeps what dead runs of the prefix left at
its start. Without root, ip, nft or tc the run prints why and exits 77.
"""
import argparse
import atexit
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

PREFIX = "rkn"
SKIP = 77
NET = "10.77.0"
CLUSTER = "net"
libc = ctypes.CDLL(None, use_errno=True)


def say(*a):
    print("net_fleet:", *a, flush=True)


def run(*cmd, check=True, timeout=60):
    """Runs cmd; returns its stdout (stderr on failure in the exception)."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def wait(cond, timeout, what, poll=0.2):
    """Polls cond until it holds (returns its value) or fails after timeout."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)  # a polling loop: waits for cond, bounded by timeout


# ------------------------------------------------------------ namespaces


def netns_list():
    out = run("ip", "netns", "list", check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_remove(ns):
    """Kills what runs in ns, then deletes it (its veths go with it)."""
    for pid in run("ip", "netns", "pids", ns, check=False).split():
        if pid == str(os.getpid()):  # the harness itself, in ctl
            continue
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    run("ip", "netns", "del", ns, check=False)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def sweep(own_pid=None):
    """Removes the namespaces and temporary dirs of runs that are gone."""
    for ns in netns_list():
        m = re.match(rf"^{PREFIX}(\d+)-", ns)
        if m and (int(m.group(1)) == own_pid or not pid_alive(int(m.group(1)))):
            netns_remove(ns)
    for d in os.listdir(tempfile.gettempdir()):
        m = re.match(rf"^{PREFIX}(\d+)-", d)
        if m and not pid_alive(int(m.group(1))):
            shutil.rmtree(os.path.join(tempfile.gettempdir(), d), ignore_errors=True)


def why_not():
    """Why namespaces cannot be made here ('' when they can)."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_NET_ADMIN"
    for tool in ("ip", "nft", "tc", "etcd"):
        if not shutil.which(tool):
            return f"{tool} is not installed (deploy/install-deps.sh)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        run("ip", "netns", "add", probe)
        run("ip", "netns", "exec", probe, "nft", "list", "tables")
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        return f"cannot make a namespace with nftables: {e}"
    finally:
        run("ip", "netns", "del", probe, check=False)
    return ""


def enter_netns(ns):
    """Moves this (single-threaded) process into namespace ns."""
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), f"setns {ns}")
    finally:
        os.close(fd)


def die_with_parent():
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a killed run leaves no daemon


# ------------------------------------------------------------------ fleet


class Fleet:
    """The namespaces, the bridge, the daemons and the faults of one run."""

    def __init__(self, build, hosts, keep=False):
        self.build = build
        self.run_id = f"{PREFIX}{os.getpid()}"
        self.dir = tempfile.mkdtemp(prefix=f"{self.run_id}-")
        self.keep = keep
        self.ns = []  # every namespace made, in order
        self.procs = {}  # role -> Popen
        self.addr = {}  # role -> its address on the bridge
        self.hosts = hosts  # hosts made at the start (h1..hN); more may join
        self.flapping = None
        self.passed = False
        self.delay_ms = 0  # hosts started while > 0 serve arcs behind a delay proxy

    # ------------------------------------------------------------ plumbing

    def nsname(self, role):
        return f"{self.run_id}-{role}"

    def make_bridge(self):
        br = self.nsname("br")
        run("ip", "netns", "add", br)
        self.ns.append(br)
        run("ip", "-n", br, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", br, "link", "set", "br0", "up")
        run("ip", "-n", br, "link", "set", "lo", "up")

    def make_ns(self, role, octet):
        """A namespace for role at NET.octet, wired to the bridge."""
        ns = self.nsname(role)
        run("ip", "netns", "add", ns)
        self.ns.append(ns)
        br = self.nsname("br")
        run("ip", "-n", br, "link", "add", f"v{role}", "type", "veth", "peer", "name", "eth0",
            "netns", ns)
        run("ip", "-n", br, "link", "set", f"v{role}", "master", "br0", "up")
        run("ip", "-n", ns, "addr", "add", f"{NET}.{octet}/24", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        self.addr[role] = f"{NET}.{octet}"

    def bin(self, sub, name):
        path = os.path.join(self.build, sub, name)
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"{path} is not built")
        return path

    def spawn(self, role, argv, ns_role=None):
        """Starts argv in role's namespace (or ns_role's), its output in a log."""
        log = open(os.path.join(self.dir, f"{role}.log"), "ab")
        ns = self.nsname(ns_role or role)
        self.procs[role] = subprocess.Popen(["ip", "netns", "exec", ns] + argv, stdout=log,
                                            stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        log.close()

    def stop(self, role, sig=signal.SIGTERM, timeout=15):
        p = self.procs.get(role)
        if p and p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def alive(self, role):
        p = self.procs.get(role)
        return p is not None and p.poll() is None

    # -------------------------------------------------------------- etcd

    def endpoints(self):
        return ",".join(f"http://{self.addr[f'e{i}']}:2379" for i in (1, 2, 3))

    def start_etcd(self):
        peers = ",".join(f"e{i}=http://{NET}.{20 + i}:2380" for i in (1, 2, 3))
        for i in (1, 2, 3):
            self.make_ns(f"e{i}", 20 + i)
        for i in (1, 2, 3):
            a = self.addr[f"e{i}"]
            self.spawn(f"e{i}", [
                "etcd", "--name", f"e{i}", "--data-dir", os.path.join(self.dir, f"e{i}"),
                "--listen-client-urls", f"http://{a}:2379", "--advertise-client-urls",
                f"http://{a}:2379", "--listen-peer-urls", f"http://{a}:2380",
                "--initial-advertise-peer-urls", f"http://{a}:2380", "--initial-cluster", peers,
                "--initial-cluster-state", "new", "--initial-cluster-token", self.run_id,
                "--heartbeat-interval", "100", "--election-timeout", "1000", "--log-level",
                "warn"])
        for i in (1, 2, 3):
            wait(lambda i=i: self.http(f"{self.addr[f'e{i}']}:2379", "/health") == 200, 30,
                 f"etcd e{i}")

    # ---------------------------------------------------------- daemons

    def conf(self, name, lines):
        path = os.path.join(self.dir, f"{name}.conf")
        with open(path, "w") as f:
            f.write("".join(f"{k} = {v}\n" for k, v in lines.items()))
        return path

    def base_conf(self, role):
        return {"endpoints": self.endpoints(), "cluster": CLUSTER, "id": role}

    def start_coord(self, k):
        role = f"c{k}"
        if role not in self.addr:
            self.make_ns(role, 30 + k)
        a = f"{self.addr[role]}:7200"
        c = self.conf(role, {**self.base_conf(role), "listen": a, "lease-ttl": "3s"})
        self.spawn(role, [self.bin("coordinator/coord", "ring-coordinator"), "--config", c])
        wait(lambda: self.http(a, "/healthz") or not self.alive(role), 20, f"{role} listening")
        if not self.alive(role):
            raise AssertionError(f"{role} exited at its start")

    def start_host(self, i):
        """Host h<i>: ring-agent and ring-kv, node id h<i>, zone z<i>."""
        role = f"h{i}"
        if role not in self.addr:
            self.make_ns(role, 10 + i)
        a, data = self.addr[role], os.path.join(self.dir, role)
        os.makedirs(data, exist_ok=True)
        ac = self.conf(f"agent-{role}", {
            **self.base_conf(role), "listen": f"{a}:7000", "advertise": self.arc_addr(role),
            "metrics": f"{a}:7001", "data-dir": data, "zone": f"z{i}",
            "secret-file": os.path.join(self.dir, "secret"), "lease-ttl": "3s",
            "drop-grace": "30s"})
        kc = self.conf(f"kv-{role}", {**self.base_conf(role), "listen": f"{a}:7100",
                                     "advertise": f"{a}:7100", "data-dir": data,
                                     "lease-ttl": "3s"})
        self.spawn(f"agent-{role}", [self.bin("agent", "ring-agent"), "--config", ac], role)
        self.spawn(f"kv-{role}", [self.bin("examples/kv", "ring-kv"), "--config", kc], role)
        wait(lambda: self.http(f"{a}:7001", "/healthz") == 200, 30, f"{role}'s agent healthy")

    def arc_addr(self, role):
        """The address role's agent advertises: its arc server, or while
        delay_ms > 0 a delay proxy in its namespace in front of it, so that
        every peer's fetch from it crosses delay_ms each way."""
        a = self.addr[role]
        if not self.delay_ms:
            return f"{a}:7000"
        log = os.path.join(self.dir, f"delay-{role}.log")
        self.spawn(f"delay-{role}", [
            sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "delay_proxy.py"), "--listen", f"{a}:7002", "--to",
            f"{a}:7000", "--delay-ms", str(self.delay_ms), "--max-seconds", "1800"], role)

        def listening():
            with open(log, errors="replace") as f:
                return "delay_proxy: listening" in f.read()

        wait(lambda: listening() or not self.alive(f"delay-{role}"), 20,
             f"{role}'s delay proxy listening")
        if not self.alive(f"delay-{role}"):
            raise AssertionError(f"{role}'s delay proxy exited at its start")
        return f"{a}:7002"

    def http(self, hostport, path, timeout=2):
        """The HTTP status of GET hostport/path (0: nothing answered)."""
        try:
            with urllib.request.urlopen(f"http://{hostport}{path}", timeout=timeout) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except (OSError, ValueError):
            return 0

    def metric(self, role, name, port=7001, inside=False):
        """Sample `name` (no labels) of role's daemon on port (7001 a host's
        agent, 7200 a coordinator); None when unread. inside: read from
        role's own namespace (the harness may be cut from it)."""
        url = f"http://{self.addr[role]}:{port}/metrics"
        try:
            if inside:
                text = run("ip", "netns", "exec", self.nsname(role), "curl", "-sf", "-m", "2",
                           url, timeout=10)
            else:
                with urllib.request.urlopen(url, timeout=2) as r:
                    text = r.read().decode()
        except (OSError, RuntimeError, subprocess.TimeoutExpired):
            return None
        m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None

    # ----------------------------------------------------------- ringctl

    def ringctl(self, *args, check=True, timeout=60):
        argv = [self.bin("coordinator/ringctl", "ringctl"), "--endpoints", self.endpoints(),
                "--cluster", CLUSTER] + list(args)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"ringctl {' '.join(args)}: exit {r.returncode}: "
                                 f"{r.stdout.strip()} {r.stderr.strip()}")
        return r

    def status(self):
        r = self.ringctl("status", "--json", check=False, timeout=20)
        try:
            return json.loads(r.stdout) if r.returncode in (0, 1) else None
        except json.JSONDecodeError:
            return None

    def settled(self, active):
        """Whether `active` nodes are active and no plan runs or waits."""
        s = self.status()
        if not s:
            return False
        n = sum(1 for x in s.get("nodes", []) if x.get("state") == "active")
        plan = s.get("plan") or {}
        return n == active and plan.get("state") in (None, "done")

    def node_field(self, node, field):
        s = self.status() or {}
        return next((x.get(field) for x in s.get("nodes", []) if x.get("id") == node), None)

    def node_state(self, node):
        return self.node_field(node, "state")

    def replicas(self, node):
        """Token-replicas node owns in the table in service (None: unread)."""
        return self.node_field(node, "replicas")

    def leader(self, inside=False):
        """The coordinator that says it leads (None: none says so)."""
        for k in (1, 2):
            if self.metric(f"c{k}", "ring_coordinator_leader", 7200, inside) == 1:
                return f"c{k}"
        return None

    # ------------------------------------------------------------ bring-up

    def hold(self, seconds):
        """A fault's span: every daemon must stay up through it."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            dead = [r for r, p in self.procs.items() if r != "checker" and p.poll() is not None]
            if dead:
                raise AssertionError(f"{', '.join(dead)} exited during the fault")
            time.sleep(0.25)  # a fixed span is the point: the fault lasts this long, checked as it goes

    def up(self, tokens=256, replicas=2, down_after="4s", rate=0, hosts=None):
        self.make_bridge()
        self.make_ns("ctl", 250)
        with open(os.path.join(self.dir, "secret"), "w") as f:
            f.write(os.urandom(32).hex())
        os.chmod(os.path.join(self.dir, "secret"), 0o600)
        enter_netns(self.nsname("ctl"))
        self.start_etcd()
        self.ringctl("init", "--failure-domain", "zone", "--tokens", str(tokens), "--replicas",
                     str(replicas), "--migration", "stream", "--down-after", down_after,
                     "--auto-apply", "all", "--bytes-per-sec", str(rate))
        for k in (1, 2):
            self.start_coord(k)
        self.hosts = hosts or self.hosts
        for i in range(1, self.hosts + 1):
            self.start_host(i)
        self.settle(self.hosts, 40)

    def settle(self, active, timeout):
        try:
            wait(lambda: self.settled(active), timeout, f"{active} nodes active, no plan running",
                 poll=0.5)
        except AssertionError as e:
            raise AssertionError(f"{e}; status: {json.dumps(self.status())}") from None

    def load(self, keys, value_size, timeout=300):
        argv = [self.bin("examples/kv", "ring-kv-load"), "--endpoints", self.endpoints(),
                "--cluster", CLUSTER, "--keys", str(keys), "--value-size", str(value_size),
                "--threads", "8", "--load"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise AssertionError(f"ring-kv-load --load: {r.stdout}{r.stderr}")

    # -------------------------------------------------------------- faults

    def nft(self, role, script):
        r = subprocess.run(["ip", "netns", "exec", self.nsname(role), "nft", "-f", "-"],
                           input=script, text=True, capture_output=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"nft in {role}: {r.stderr.strip()}")

    def fault_table(self, role):
        """The fault table of role's namespace, made on first use."""
        self.nft(role, "table inet rkfault {\n"
                 " chain in { type filter hook input priority 0; policy accept; }\n"
                 " chain out { type filter hook output priority 0; policy accept; }\n}\n")

    def cut(self, role, peers, direction="both"):
        """Drops role's traffic with peers: 'in' (from them), 'out' (to them)
        or 'both'. A partition on one side only is an asymmetric one."""
        self.fault_table(role)
        addrs = ", ".join(self.addr[p] for p in peers)
        rules = []
        if direction in ("in", "both"):
            rules.append(f"add rule inet rkfault in ip saddr {{ {addrs} }} drop")
        if direction in ("out", "both"):
            rules.append(f"add rule inet rkfault out ip daddr {{ {addrs} }} drop")
        self.nft(role, "\n".join(rules) + "\n")

    def partition(self, side_a, side_b):
        """A full partition: every role of side_a cut from every one of side_b."""
        for r in side_a:
            self.cut(r, side_b)
        for r in side_b:
            self.cut(r, side_a)

    def loss(self, role, percent):
        """Drops percent % of the packets role receives, at random."""
        self.fault_table(role)
        self.nft(role, f"add rule inet rkfault in numgen random mod 100 < {percent} drop\n")

    def heal(self, role):
        run("ip", "netns", "exec", self.nsname(role), "nft", "delete", "table", "inet",
            "rkfault", check=False)

    def heal_all(self):
        self.stop_flap()
        for role in list(self.addr):
            self.heal(role)

    def limit(self, role, rate="20mbit"):
        """A tbf limit on what role receives: the bridge's side of its veth."""
        run("ip", "-n", self.nsname("br"), "link", "set", f"v{role}", "up")
        run("tc", "-n", self.nsname("br"), "qdisc", "replace", "dev", f"v{role}", "root", "tbf",
            "rate", rate, "burst", "32kb", "latency", "200ms")

    def unlimit(self, role):
        run("tc", "-n", self.nsname("br"), "qdisc", "del", "dev", f"v{role}", "root", check=False)

    def flap(self, role, up_s=2.0, down_s=2.0, total_s=60.0):
        """Takes role's link down and up in a thread: bounded by total_s."""
        stop = threading.Event()

        def loop():
            end = time.monotonic() + total_s
            link = ["ip", "-n", self.nsname("br"), "link", "set", f"v{role}"]
            while time.monotonic() < end and not stop.is_set():
                run(*link, "down", check=False)
                stop.wait(down_s)
                run(*link, "up", check=False)
                stop.wait(up_s)
            run(*link, "up", check=False)

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        self.flapping = (stop, t)
        return t

    def stop_flap(self):
        if self.flapping:
            self.flapping[0].set()
            self.flapping[1].join(30)
            self.flapping = None

    # ------------------------------------------------------------ checker

    def checker_start(self, writers=4, keys=64, value_size=100):
        self.stop_file = os.path.join(self.dir, "checker.stop")
        self.spawn("checker", [
            self.bin("tests/net", "net_check"), "--endpoints", self.endpoints(), "--cluster",
            CLUSTER, "--stop", self.stop_file, "--writers", str(writers), "--keys-per-writer",
            str(keys), "--value-size", str(value_size), "--max-seconds", "900"], "ctl")

    def checker_end(self):
        """Stops the writers, reads every key back: the counts, or a failure."""
        open(self.stop_file, "w").close()
        p = self.procs["checker"]
        try:
            rc = p.wait(180)
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError("net_check did not finish its reads in 180 s")
        with open(os.path.join(self.dir, "checker.log")) as f:
            text = f.read()
        line = next((l for l in text.splitlines() if l.startswith("net_check: acked=")), "")
        say(line or "net_check printed no counts")
        if rc != 0:
            raise AssertionError(f"net_check exit {rc}: {text[-2000:]}")
        return dict(kv.split("=") for kv in line.split()[1:])

    def verify(self):
        r = self.ringctl("verify", check=False, timeout=120)
        say(f"ringctl verify: exit {r.returncode}")
        if r.returncode != 0:
            raise AssertionError(f"ringctl verify: {r.stdout}{r.stderr}")

    def finish(self, active, timeout=180):
        """What every scenario ends with: faults healed, settled, checker, verify."""
        self.heal_all()
        self.settle(active, timeout)
        counts = self.checker_end()
        self.verify()
        self.passed = True
        return counts

    # ------------------------------------------------------------ teardown

    def logs_tail(self, lines=15):
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".log"):
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    tail = f.read().splitlines()[-lines:]
                print(f"--- {name} (last {len(tail)} lines)\n" + "\n".join(tail), file=sys.stderr)

    def teardown(self):
        self.stop_flap()
        for role in [r for r in self.procs if r.startswith("delay-")]:
            self.stop(role, timeout=5)  # SIGTERM: the proxy logs its counts
        for role in list(self.procs):
            if self.alive(role):
                self.procs[role].kill()
                self.procs[role].wait(10)
        if not self.passed:
            self.logs_tail()
        for ns in reversed(self.ns):
            netns_remove(ns)
        self.ns = []
        if self.keep or not self.passed:
            say(f"logs kept in {self.dir}" if self.keep else f"logs were in {self.dir}")
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
