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


def lossy_join(f, a):
    """Scenario 5: 2% loss and a 20 Mbit/s limit on a receiver during a join."""
    f.up()
    keys = 40000 if a.long else 12000
    f.load(keys, 1000)
    f.checker_start()
    nbytes, bps, join_s = join_under(f, "h4", loss=2, rate=f"{LINK_MBIT}mbit")
    link = LINK_MBIT * 1e6 / 8
    figure("lossy_join_bytes", int(nbytes))
    figure("lossy_join_rate_MBps", f"{bps / 1e6:.2f}")
    figure("lossy_join_share_of_link", f"{bps / link:.2f}")
    figure("lossy_join_s", f"{join_s:.1f}")
    f.finish(4)


SCENARIOS = {"lossy_join": lossy_join}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--long", action="store_true", default=os.environ.get("RING_LONG") == "1")
    ap.add_argument("scenario", choices=sorted(SCENARIOS) + ["sweep"])
    a = ap.parse_args()
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
