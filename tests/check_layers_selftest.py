#!/usr/bin/env python3
"""check_layers_selftest.py: check_layers.py fails on what it must refuse.

Usage: check_layers_selftest.py SOURCE_DIR SCRATCH_DIR

Runs check_layers.py on SOURCE_DIR (it must pass), then on a copy of the
source tree (no build, no .git) with one arrow against the layers injected
at a time; each must fail, and name the injected file. The copy is restored
between cases, so each failure is that case's alone.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# (what, file relative to the tree, line to add): a new file when it does
# not exist, else the line appended to it.
CASES = [
    ("a daemon header includes libring's private header",
     "daemon/daemon.h", '#include "ring_int.h"'),
    ("a product file includes another folder's *_int.h it may otherwise see",
     "coordinator/coord/coord_main.c", '#include "cluster_int.h"'),
    ("a file in a nested folder includes libring's private header",
     "agent/nested/probe.c", '#include "ring_int.h"'),
    ("a file in a nested folder includes another folder's *_int.h",
     "coordinator/coord/nested/deeper/probe.c", '#include "cluster_int.h"'),
    ("proto/ includes a libring header that is not *_int.h",
     "proto/records.c", '#include "json_stream.h"'),
    ("a test not in TEST_PRIVATE includes libring's private header",
     "tests/unit/test_bounded.c", '#include "ring_int.h"'),
    ("a listed test includes a private header it is not listed with",
     "tests/unit/test_delta_codec.c", '#include "etcd_int.h"'),
]


def run(src, scratch):
    r = subprocess.run([sys.executable, os.path.join(HERE, "check_layers.py"), src, scratch],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode, r.stdout


def inject(tree, rel, line):
    """Adds line to tree/rel; returns how to undo it."""
    path = os.path.join(tree, rel)
    if os.path.exists(path):
        with open(path) as f:
            before = f.read()
        with open(path, "a") as f:
            f.write(line + "\n")
        return lambda: open(path, "w").write(before)
    made = os.path.dirname(path)
    while not os.path.exists(os.path.dirname(made)):
        made = os.path.dirname(made)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(line + "\n")
    return lambda: shutil.rmtree(made) if os.path.isdir(made) else os.remove(path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, scratch = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    failed = 0
    rc, out = run(src, os.path.join(scratch, "real"))
    if rc != 0:
        print("FAIL: check_layers fails on the real tree:\n" + out)
        failed += 1
    else:
        print("ok: the real tree passes")
    tree = os.path.join(scratch, "tree")
    shutil.copytree(src, tree, ignore=shutil.ignore_patterns("build", ".git", "__pycache__"))
    for i, (what, rel, line) in enumerate(CASES):
        undo = inject(tree, rel, line)
        try:
            rc, out = run(tree, os.path.join(scratch, f"case{i}"))
        finally:
            undo()
        if rc == 1 and rel in out:
            print(f"ok: fails when {what} ({rel})")
        else:
            print(f"FAIL: check_layers exit {rc} when {what} ({rel}):\n{out}")
            failed += 1
    rc, out = run(tree, os.path.join(scratch, "restored"))
    if rc != 0:
        print("FAIL: the restored copy does not pass:\n" + out)
        failed += 1
    print(f"check_layers_selftest: {len(CASES)} injected arrows, {failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
