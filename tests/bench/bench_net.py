#!/usr/bin/env python3
"""bench_net.py: arc throughput over a tbf-limited 20 Mbit/s link, with and
without 2% loss (and, with --latency, with every source 50 ms away), against
the link's rate; the join's time (tests/net).

    python3 tests/bench/bench_net.py [--build build/release] [--long]
        [--join-mb N] [--runs N] [--moves-per-node N] [--latency]

Runs tests/net/net_scenarios.py's clean_join and lossy_join (a fleet in
namespaces each: root, ip, nft, tc) and prints their figures. By default h4
takes in about 6 MB (3 s at the link's rate: a noisy figure); --join-mb 60
makes it about 60 MB (about 25 s), --runs repeats each. Prints figures,
never fails on time; exits 77 where namespaces cannot be made.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "..", "net", "net_scenarios.py")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--long", action="store_true")
    ap.add_argument("--join-mb", type=float, default=0)
    ap.add_argument("--runs", type=int, default=1, choices=range(1, 11), metavar="1..10")
    ap.add_argument("--moves-per-node", type=int, default=0)
    ap.add_argument("--latency", action="store_true", help="slow_link too")
    a = ap.parse_args()
    opts = (["--long"] if a.long else []) + ["--join-mb", str(a.join_mb), "--moves-per-node",
                                             str(a.moves_per_node)]
    scenarios = ("clean_join", "lossy_join") + (("slow_link",) if a.latency else ())
    for run in range(1, a.runs + 1):
        for scenario in scenarios:
            argv = [sys.executable, SCENARIOS, "--build", a.build] + opts + [scenario]
            r = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
            if r.returncode == 77:
                print(r.stdout.strip())
                return 77
            figures = [l[len("figure: "):] for l in r.stdout.splitlines()
                       if l.startswith("figure: ")]
            print(f"{scenario} (run {run}): " + " ".join(figures) +
                  ("" if r.returncode == 0 else f" (scenario failed: exit {r.returncode})"),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
