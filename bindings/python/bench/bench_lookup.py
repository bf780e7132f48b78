#!/usr/bin/python3
"""bench_lookup.py: a key's owners through the binding, against what a
program does without it: the key's XXH3 64 (python3-xxhash, the hash libring
uses) and a Python dict lookup of the token's owners.

Prints ns per lookup, the best and the median of repeated runs over the same
hot keys (each figure includes the Python loop, the same for all). Never
fails on time.

Usage: bench_lookup.py [--quick] [--tokens T] [--nodes N] [--keys K]
Needs RINGKEEPER_LIBRING (the built libring.so), as the tests do.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import ringkeeper as rk  # noqa: E402
import tables  # noqa: E402
from xxhash import xxh3_64_intdigest  # noqa: E402

ZONES = 4


def timed(run, keys, repeats):
    """(best, median) ns per key of `repeats` runs of run(keys). The best is
    the figure compared, as bench_lookup.c keeps it: on a shared machine the
    other runs measure the neighbours."""
    per = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        run(keys)
        per.append((time.perf_counter_ns() - t0) / len(keys))
    return min(per), statistics.median(per)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a CI smoke run: fewer repeats")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--keys", type=int, default=10000)
    a = ap.parse_args()
    if a.nodes % ZONES or not 3 <= a.nodes <= 10000 or not 1 <= a.keys <= 10 ** 6:
        ap.error("--nodes a multiple of 4 in [4, 10000], --keys 1 .. 10^6")
    repeats = 5 if a.quick else 31
    seed = 5
    owners = tables.owners_rr(a.tokens, 3, a.nodes)
    t = rk.Table.decode(tables.encode("bench", 1, owners, a.nodes, ZONES, seed=seed))
    keys = [b"key-%d" % i for i in range(a.keys)]
    shift = 64 - (a.tokens.bit_length() - 1)
    by_token = {tok: tuple("n%d" % n for n in row) for tok, row in enumerate(owners)}
    assert all(t.owners(k) == by_token[xxh3_64_intdigest(k, seed) >> shift] for k in keys)

    def loop_only(ks):
        for k in ks:
            pass

    def hash_only(ks):
        h = xxh3_64_intdigest
        for k in ks:
            h(k, seed)

    def dict_plus_hash(ks):
        h, d = xxh3_64_intdigest, by_token
        for k in ks:
            d[h(k, seed) >> shift]

    def list_plus_hash(ks):  # the floor of any lookup that hashes in Python
        h, rows = xxh3_64_intdigest, list(by_token.values())
        for k in ks:
            rows[h(k, seed) >> shift]

    def binding_owners(ks):  # the in-place path: hash in Python, the view's rows
        f = t.owners
        for k in ks:
            f(k)

    # A reference taken before the table's first lookup: the closure itself
    # (Table.owners is a descriptor), no bound method's slower path.
    t_fresh = rk.Table.decode(tables.encode("bench", 1, owners, a.nodes, ZONES, seed=seed))
    taken_before = t_fresh.owners

    def binding_owners_taken_before(ks):
        f = taken_before
        for k in ks:
            f(k)

    def binding_lookup(ks):  # ring_lookup through cffi
        f = t.lookup
        for k in ks:
            f(k)

    def binding_token(ks):  # one bare cffi call: the floor of any C call here
        f = t.token
        for k in ks:
            f(k)

    t.owners(keys[0])  # builds the rows outside the timing
    cases = [("python loop alone", loop_only),
             ("xxh3_64 of the key alone", hash_only),
             ("dict lookup + xxh3_64 (the target)", dict_plus_hash),
             ("list index + xxh3_64 (the floor)", list_plus_hash),
             ("Table.owners (binding, in place)", binding_owners),
             ("Table.owners taken before 1st lookup", binding_owners_taken_before),
             ("Table.lookup (binding, ring_lookup)", binding_lookup),
             ("Table.token (binding, one C call)", binding_token)]
    print("bench_lookup.py: T=%d R=3 nodes=%d keys=%d repeats=%d libring %s, %s"
          % (a.tokens, a.nodes, a.keys, repeats, rk.LIBRING_VERSION, sys.version.split()[0]))
    figures = {}
    print("  %-40s %8s %8s" % ("ns/op", "best", "median"))
    for name, run in cases:
        best, median = timed(run, keys, repeats)
        figures[name] = best
        print("  %-40s %8.1f %8.1f" % (name, best, median))
    target = figures["dict lookup + xxh3_64 (the target)"]
    for name in ("Table.owners (binding, in place)", "Table.lookup (binding, ring_lookup)"):
        print("  %-40s %8.2fx the target" % (name, figures[name] / target))
    t.close()
    t_fresh.close()


if __name__ == "__main__":
    main()
