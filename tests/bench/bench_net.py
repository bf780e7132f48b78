#!/usr/bin/env python3
"""bench_net.py: arc throughput over a tbf-limited 20 Mbit/s link, with and
without 2% loss, against the link's rate; the join's time (tests/net).

    python3 tests/bench/bench_net.py [--build build/release] [--long]

Runs tests/net/net_scenarios.py's clean_join and lossy_join (a fleet in
namespaces each: root, ip, nft, tc) and prints their figures. Prints
figures, never fails on time; exits 77 where namespaces cannot be made.
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
    a = ap.parse_args()
    for scenario in ("clean_join", "lossy_join"):
        argv = [sys.executable, SCENARIOS, "--build", a.build, scenario]
        r = subprocess.run(argv + (["--long"] if a.long else []), capture_output=True, text=True,
                           timeout=1200)
        if r.returncode == 77:
            print(r.stdout.strip())
            return 77
        figures = [l[len("figure: "):] for l in r.stdout.splitlines() if l.startswith("figure: ")]
        print(f"{scenario}: " + " ".join(figures) + ("" if r.returncode == 0 else
                                                     f" (scenario failed: exit {r.returncode})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
