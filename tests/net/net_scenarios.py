#!/usr/bin/env python3
"""net_scenarios.py: the fleet's scenarios (tests/net/README.md).

    net_scenarios.py --build BUILD_DIR SCENARIO [--long]
    net_scenarios.py sweep

Each scenario brings a fleet up (net_fleet.py), starts the checker, does its
faults, heals them and ends with Fleet.finish: settled, the checker's reads
(0 lost acknowledged writes, 0 versions gone back) and `ringctl verify`.
Figures go to stdout as `figure: name=value` lines. Exit 0 pass, 1 fail,
77 when namespaces cannot be made here.
"""
import argparse
import atexit
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import net_fleet as nf  # noqa: E402

LINK_MBIT = 20


def figure(name, value, unit=""):
    print(f"figure: {name}={value}{unit}", flush=True)


class Sampler:
    """Samples a host agent's bytes in every 0.25 s in a thread: the arc
    throughput of a join is the bytes over the time they took to come."""

    def __init__(self, fleet, role):
        self.f, self.role, self.samples = fleet, role, []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop.wait(0.25):
            b = self.f.metric(self.role, "ring_agent_bytes_in_total")
            if b is not None:
                self.samples.append((time.monotonic(), b))

    def rate(self):
        """Bytes and bytes/s from the first byte to the last."""
        self.stop.set()
        self.t.join(5)
        moving = [(t, b) for t, b in self.samples if b > 0]
        if len(moving) < 2:
            return 0, 0.0
        last = max(b for _, b in moving)
        t_end = next(t for t, b in moving if b == last)
        t0, b0 = moving[0]
        return last, (last - b0) / max(t_end - t0, 1e-3)


def join_under(f, role, loss=0, rate=None):
    """Host `role` joins with loss % and a tbf rate on its link: the bytes
    it took in, its rate and the join's time."""
    f.make_ns(role, 10 + int(role[1:]))
    if rate:
        f.limit(role, rate)
    if loss:
        f.loss(role, loss)
    t0 = time.monotonic()
    f.start_host(int(role[1:]))
    s = Sampler(f, role)
    f.settle(int(role[1:]), 600)
    join_s = time.monotonic() - t0
    nbytes, bps = s.rate()
    return nbytes, bps, join_s


def link_join(f, a, loss, delay_ms=0):
    """h4 joins over a 20 Mbit/s tbf link with loss %, every source it
    fetches from delay_ms away (a delay proxy in front of each arc server):
    its arc throughput against the link's rate, and the join's time.
    --join-mb sizes the data set so that h4 takes in about that many MB (it
    takes about half of it: 2 replicas over 4 hosts)."""
    f.delay_ms = delay_ms
    f.up()
    if a.moves_per_node:
        f.ringctl("throttle", "--moves-per-node", str(a.moves_per_node))
    if a.join_mb:
        value_size, keys = 4000, int(a.join_mb * 2e6 / 4000)
    else:
        value_size, keys = 1000, 40000 if a.long else 12000
    f.load(keys, value_size, timeout=900)
    f.checker_start()
    nbytes, bps, join_s = join_under(f, "h4", loss=loss, rate=f"{LINK_MBIT}mbit")
    link = LINK_MBIT * 1e6 / 8
    name = f"join_{LINK_MBIT}mbit_loss{loss}" + (f"_delay{delay_ms}ms" if delay_ms else "")
    figure(f"{name}_bytes", int(nbytes))
    figure(f"{name}_rate_MBps", f"{bps / 1e6:.2f}")
    figure(f"{name}_share_of_link", f"{bps / link:.2f}")
    figure(f"{name}_s", f"{join_s:.1f}")
    # Under latency a join is bound by round trips, not bytes: an arc costs a
    # manifest and a request per file, and only `parallel` arcs move at once.
    figure(f"{name}_arcs", int(f.metric("h4", "ring_agent_arcs_fetched_total") or 0))
    figure(f"{name}_parallel", int(f.metric("h4", "ring_agent_fetch_parallel") or 0))
    f.finish(4)


def lossy_join(f, a):
    """Scenario 5: 2% loss and a 20 Mbit/s limit on a receiver during a join."""
    link_join(f, a, 2)


def clean_join(f, a):
    """The figure lossy_join is held against: the same link, no loss."""
    link_join(f, a, 0)


def slow_link(f, a):
    """Latency: h4 joins over a 20 Mbit/s tbf link while every source it
    fetches from sits 50 ms away each way (delay proxies, advertised as the
    sources' arc addresses)."""
    link_join(f, a, 0, delay_ms=50)


def timed(what, cond, timeout):
    """Waits for cond; prints and returns the seconds it took."""
    t0 = time.monotonic()
    nf.wait(cond, timeout, what, poll=0.25)
    s = time.monotonic() - t0
    figure(what, f"{s:.1f}", "s")
    return s


def joining(f, keys=12000, rate="8mbit"):
    """Three hosts, a data set, the checker, and h4 joining over a slow link
    (so its arcs take seconds): waits for h4's first MiB."""
    f.up()
    f.load(keys, 1000)
    f.checker_start()
    f.make_ns("h4", 14)
    f.limit("h4", rate)
    f.start_host(4)
    nf.wait(lambda: (f.metric("h4", "ring_agent_bytes_in_total") or 0) > 1 << 20, 120,
            "h4 streaming its first MiB")


def cut_source(f, a):
    """Scenario 1: the receiver h4 cut from the source h1 mid-arc for 8 s;
    the other owner serves it, or it waits, and the join finishes."""
    t0 = time.monotonic()
    joining(f)
    f.cut("h4", ["h1"])
    f.hold(8)
    f.heal("h4")
    f.finish(4, 300)
    figure("cut_source_join_s", f"{time.monotonic() - t0:.1f}")


def agent_cut_etcd(f, a):
    """Scenario 2: h3 cut from etcd, not from its peers: down after
    down_after, its replicas re-made on the others, and back once healed."""
    f.up()
    f.load(6000, 1000)
    f.checker_start()
    f.cut("h3", ["e1", "e2", "e3"])
    timed("agent_cut_down_s", lambda: f.node_state("h3") == "down", 60)
    timed("agent_cut_repair_s", lambda: f.settled(2), 300)
    f.heal("h3")
    timed("agent_cut_rejoin_s", lambda: f.settled(3), 300)
    f.finish(3)


def leader_minority(f, a):
    """Scenario 3: the leading coordinator and e1 in a minority partition:
    it cannot hold its lease (no write of it lands), the other coordinator
    leads and runs h4's join."""
    f.up()
    f.load(6000, 1000)
    f.checker_start()
    old = f.leader()
    assert old, "no coordinator leads"
    other = "c2" if old == "c1" else "c1"
    majority = [r for r in f.addr if r not in (old, "e1", "br")]
    f.partition([old, "e1"], majority)
    timed("leader_minority_takeover_s", lambda: f.metric(other, "ring_coordinator_leader",
                                                           7200) == 1, 60)
    timed("leader_minority_stepdown_s", lambda: f.metric(old, "ring_coordinator_leader", 7200,
                                                           inside=True) == 0, 60)
    f.make_ns("h4", 14)
    f.partition([old, "e1"], ["h4"])
    t0 = time.monotonic()
    f.start_host(4)
    # Bounded: the new leader's watch may sit on e1, cut off. It must find
    # that stream dead by TCP keep-alive (16 s) and see the join; with the
    # kernel's 9 probes it stayed blind for 55 s (a join took 50 s).
    f.settle(4, 40)
    figure("leader_minority_join_s", f"{time.monotonic() - t0:.1f}")
    f.finish(4)


def etcd_member(f, a):
    """Scenario 4: an etcd member partitioned from everyone during a join,
    then healed; the run finishes and the member catches up."""
    t0 = time.monotonic()
    joining(f, keys=6000)
    f.partition(["e2"], [r for r in f.addr if r not in ("e2", "br")])
    f.hold(8)
    f.heal_all()
    f.finish(4, 300)
    figure("etcd_member_join_s", f"{time.monotonic() - t0:.1f}")


def flap_drain(f, a):
    """Scenario 6: h2's link flaps (2 s up, 2 s down) for 60 s while h1
    drains; the drain finishes once the link holds."""
    f.up(hosts=4)
    f.load(12000, 1000)
    f.checker_start()
    t0 = time.monotonic()
    f.ringctl("drain", "h1")
    f.flap("h2", 2, 2, 60).join(90)
    nf.wait(lambda: f.replicas("h1") == 0 and f.settled(3), 300, "the drain done", poll=0.5)
    figure("flap_drain_s", f"{time.monotonic() - t0:.1f}")
    f.finish(3)


SCENARIOS = {"lossy_join": lossy_join, "clean_join": clean_join, "cut_source": cut_source,
             "agent_cut_etcd": agent_cut_etcd, "leader_minority": leader_minority,
             "etcd_member": etcd_member, "flap_drain": flap_drain, "slow_link": slow_link}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--long", action="store_true", default=os.environ.get("RING_LONG") == "1")
    ap.add_argument("--join-mb", type=float, default=0,
                    help="the *_join scenarios: about this many MB for the joining host")
    ap.add_argument("--moves-per-node", type=int, default=0, choices=range(0, 17),
                    metavar="0..16", help="the *_join scenarios: ringctl throttle's limit")
    ap.add_argument("scenario", choices=sorted(SCENARIOS) + ["sweep"])
    a = ap.parse_args()
    if not 0 <= a.join_mb <= 1000:
        ap.error("--join-mb must be in [0, 1000]")
    why = nf.why_not()
    if why:
        print(f"net_scenarios: SKIP: {why}", flush=True)
        return nf.SKIP
    nf.sweep()
    if a.scenario == "sweep":
        return 0
    f = nf.Fleet(os.path.abspath(a.build), hosts=3, keep=os.environ.get("RING_TEST_KEEP") == "1")
    atexit.register(f.teardown)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _: sys.exit(128 + s))
    try:
        SCENARIOS[a.scenario](f, a)
    except (AssertionError, RuntimeError) as e:
        print(f"net_scenarios: {a.scenario} FAILED: {e}", file=sys.stderr, flush=True)
        return 1
    print(f"net_scenarios: {a.scenario} passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
