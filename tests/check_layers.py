#!/usr/bin/env python3
"""check_layers.py: the layers point one way (docs/STYLE.md, rule 7).

    embedders -> libring -> ringx
    daemons (ring-agent, ring-coordinator, ringctl, examples/kv)
        -> their own libraries -> ringdaemon -> ringproto -> libring (public API)
                                                         -> ringx (util/ringx.h)

Usage: check_layers.py SOURCE_DIR SCRATCH_DIR

Configures SOURCE_DIR into SCRATCH_DIR (tests off; nothing is built) with
the CMake file API's codemodel and `--graphviz`, then checks:

  1. links: every target of ours (the codemodel's) links, directly or
     through others (the graphviz edges), only the targets its layer allows
     below it (LINKS);
  2. include paths: every -I a target of ours compiles with is one of the
     source folders its layer may see (FOLDERS), or outside the source tree;
  3. sources: every #include "x.h" (or <x.h>) in a folder of ours, nested
     folders included, names a header in a folder that folder may see
     (FOLDERS), and never another folder's private header (*_int.h);
  4. tests: a file under tests/ includes a private header (libring's, or
     another folder's *_int.h) only if TEST_PRIVATE names it with that
     header (unit tests and fuzz targets of private code).

A target or folder the tables do not name fails too, so a new one is placed
in a layer when it is added. Prints one line per violation and exits 1 if
there is any, else prints a summary and exits 0.
"""
import json
import os
import re
import subprocess
import sys

# libring's two builds carry ringx's objects (util/), so each stands alone.
LIBRING = {"ring_objects", "ringx_objects", "ring_static", "ring"}
PROTO = LIBRING | {"ringx", "ringproto"}
DAEMON = PROTO | {"ringdaemon"}

# What each target of ours may link (transitively); anything of ours not
# listed is an arrow against the flow.
LINKS = {
    "ringx_objects": set(),  # util/: compiled into libring's objects too
    "ringx": {"ringx_objects"},
    "ring_objects": set(),
    "ring_static": {"ring_objects", "ringx_objects"},
    "ring": {"ring_objects", "ringx_objects"},
    "ringproto": LIBRING | {"ringx"},
    "ringdaemon": PROTO,
    "ringcluster": DAEMON,
    "ringsim": DAEMON,
    "ringarc": DAEMON,
    "ringkv": DAEMON,
    "ringkvclient": DAEMON,
    "ring-coordinator": DAEMON | {"ringcluster"},
    "ringctl": DAEMON | {"ringcluster", "ringsim"},
    "ring-agent": DAEMON | {"ringarc"},
    "ring-kv": DAEMON | {"ringkv"},
    "ring-kv-load": DAEMON | {"ringkvclient"},
    "ringprefix": LIBRING,  # the prefix router's core: libring alone
    "prefix-router": DAEMON | {"ringprefix"},
    "prefix-router-load": DAEMON | {"ringprefix"},
    "ring_lookup_demo": LIBRING,  # an embedder: libring alone
    # deploy/: build steps that run the built binaries (manual pages,
    # completion) or write package files; they link nothing.
    "man-ringctl": set(),
    "man-ring-coordinator": set(),
    "man-ring-agent": set(),
    "completion-ringctl": set(),
    "deb-changelog": set(),
}

# What each source folder of ours may see (its own and these), for include
# paths and #include lines alike. libring/ is libring's alone: above it one
# sees its public headers (include/) and ringx (util/).
F_UTIL = {"include", "util"}
F_PROTO = F_UTIL | {"proto"}
F_DAEMON = F_PROTO | {"daemon"}
FOLDERS = {
    "include": {"include"},
    "util": F_UTIL,
    "libring": F_UTIL | {"libring"},
    "proto": F_PROTO,
    "daemon": F_DAEMON,
    "coordinator/cluster": F_DAEMON | {"coordinator/cluster"},
    "coordinator/simulate": F_DAEMON | {"coordinator/simulate"},
    "coordinator/coord": F_DAEMON | {"coordinator/coord", "coordinator/cluster"},
    "coordinator/ringctl": F_DAEMON
    | {"coordinator/ringctl", "coordinator/cluster", "coordinator/simulate"},
    "agent": F_DAEMON | {"agent"},
    "examples/kv": F_DAEMON | {"examples/kv"},
    "examples/prefix-router": F_DAEMON | {"examples/prefix-router"},
    "examples": {"include", "examples"},  # an embedder: the public headers alone
}

# The test files that may include a private header (a folder's *_int.h,
# or any header of libring/), and which: unit tests, fuzz targets and
# benchmarks of private code, which must call the production function.
TEST_PRIVATE = {
    "tests/unit/test_delta_cache.c": {"delta_int.h"},
    "tests/unit/test_delta_codec.c": {"delta_int.h"},
    "tests/unit/test_json_stream.c": {"json_stream.h"},
    "tests/etcd/test_watcher.c": {"table_reads.h"},  # counted tests start with no table read
    "tests/fuzz/fuzz_delta_apply.c": {"delta_int.h"},
    "tests/fuzz/fuzz_etcd_response.c": {"etcd_watch_int.h"},
    "tests/fuzz/fuzz_etcd_txn.c": {"etcd_int.h"},
    "tests/fuzz/fuzz_watch_stream.c": {"etcd_watch_int.h", "json_stream.h"},
    "tests/bench/bench_delta.c": {"delta_int.h"},
    # agent/arc_int.h: the arc transfer's parsers, sink and signatures
    "tests/agent/arc_env.h": {"arc_int.h"},
    "tests/agent/test_arc_manifest.c": {"arc_int.h"},
    "tests/agent/test_arc_sink.c": {"arc_int.h"},
    "tests/fault/test_fault_trust.c": {"arc_int.h"},
    "tests/fuzz/fuzz_arc_manifest.c": {"arc_int.h"},
    "tests/fuzz/fuzz_arc_auth.c": {"arc_int.h"},
    "tests/bench/bench_arc.c": {"arc_int.h"},
    "tests/bench/bench_arc_auth.c": {"arc_int.h"},
}

# Folders not part of the product (checked elsewhere or not at all).
SKIP = ("tests", "deploy", "build")


def configure(src, scratch):
    """Configures src into scratch; returns (codemodel reply dir, dot file)."""
    query = os.path.join(scratch, ".cmake", "api", "v1", "query")
    os.makedirs(query, exist_ok=True)
    open(os.path.join(query, "codemodel-v2"), "w").close()
    dot = os.path.join(scratch, "layers.dot")
    cmd = ["cmake", "-S", src, "-B", scratch, "-DRING_TESTS=OFF", "--graphviz=" + dot]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("check_layers: configuring failed:\n" + r.stdout)
    return os.path.join(scratch, ".cmake", "api", "v1", "reply"), dot


def codemodel(reply):
    """{target name: its codemodel JSON} for the targets of ours."""
    index = max(f for f in os.listdir(reply) if f.startswith("index-"))
    with open(os.path.join(reply, index)) as f:
        cm = json.load(f)["reply"]["codemodel-v2"]["jsonFile"]
    with open(os.path.join(reply, cm)) as f:
        model = json.load(f)
    targets = {}
    for t in model["configurations"][0]["targets"]:
        with open(os.path.join(reply, t["jsonFile"])) as f:
            targets[t["name"]] = json.load(f)
    return targets


def link_edges(dot):
    """{name: set of names it links directly}, from the graphviz file."""
    label, edges = {}, {}
    for line in open(dot):
        m = re.match(r'\s*"(node\d+)" \[ label = "([^"\\]*)', line)
        if m:
            label[m.group(1)] = m.group(2)
            continue
        m = re.match(r'\s*"(node\d+)" -> "(node\d+)"', line)
        if m:
            edges.setdefault(m.group(1), set()).add(m.group(2))
    return {label[a]: {label[b] for b in bs} for a, bs in edges.items()}


def closure(name, edges, ours):
    seen, todo = set(), [name]
    while todo:
        for d in edges.get(todo.pop(), ()):
            if d in ours and d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def folder_of(path, src):
    """The FOLDERS key a path lies in ("" outside the source tree, None
    for a folder no table names)."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(src))
    if rel.startswith(".."):
        return ""
    if rel.split(os.sep)[0] in SKIP:
        return "skip"
    best = None
    for f in FOLDERS:
        if rel == f or rel.startswith(f + os.sep):
            best = f if best is None or len(f) > len(best) else best
    return best


def check_links(targets, edges, bad):
    ours = set(targets)
    for name in sorted(ours):
        if name not in LINKS:
            bad.append(f"link: target {name} is in no layer (add it to LINKS)")
            continue
        for d in sorted(closure(name, edges, ours) - LINKS[name]):
            bad.append(f"link: {name} -> {d} goes against the layers")


def target_folder(t, src):
    """The folder a target's sources lie in (the first that is ours)."""
    for s in t.get("sources", []):
        f = folder_of(os.path.join(src, s["path"]), src)
        if f not in ("", "skip", None):
            return f
    return None


def check_include_paths(targets, src, bad):
    for name, t in sorted(targets.items()):
        home = target_folder(t, src)
        if home is None:
            continue  # no sources of its own (ring, ring_static)
        for g in t.get("compileGroups", []):
            for inc in g.get("includes", []):
                f = folder_of(inc["path"], src)
                if f in ("", "skip"):
                    continue
                if f is None or f not in FOLDERS[home]:
                    bad.append(f"include path: {name} ({home}/) compiles with -I {inc['path']}")


def walk(src, top, skip=SKIP):
    """(relative path, FOLDERS key) of every .c and .h under src/top,
    nested folders included, in a stable order."""
    base = os.path.join(src, top)
    for root, dirs, files in os.walk(base):
        top_level = os.path.samefile(root, base)
        dirs[:] = sorted(x for x in dirs
                         if not x.startswith(".") and not (top_level and x in skip))
        for n in sorted(files):
            if n.endswith((".c", ".h", ".h.in", ".cc")):
                path = os.path.join(root, n)
                yield os.path.relpath(path, src), folder_of(path, src)


def headers(src):
    """{header basename: [folders holding one]} over the folders of ours."""
    found = {}
    for rel, f in walk(src, "."):
        n = os.path.basename(rel)
        if f not in (None, "skip") and (n.endswith(".h") or n.endswith(".h.in")):
            found.setdefault(n.replace(".h.in", ".h"), []).append(f)
    return found


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def includes(src, rel):
    """(line number, included name) of each #include of a file."""
    for i, line in enumerate(open(os.path.join(src, rel), errors="replace"), 1):
        m = INCLUDE.match(line)
        if m:
            yield i, m.group(1)


def private(name, where):
    """Whether a header found in folders `where` is private to them: any
    *_int.h, and every header of libring/ (its public ones are include/'s)."""
    return name.endswith("_int.h") or "libring" in where


def check_sources(src, bad):
    known = headers(src)
    n = 0
    for rel, home in walk(src, "."):
        if home in (None, "skip") or rel.endswith(".h.in"):
            continue
        n += 1
        for i, inc in includes(src, rel):
            name = os.path.basename(inc)
            where = known.get(name, [])
            if home in where or not where:
                continue  # its own folder's, or not ours (system, dependency)
            if not any(w in FOLDERS[home] for w in where):
                bad.append(f"#include: {rel}:{i} includes {inc} "
                           f"from {' or '.join(w + '/' for w in where)}")
            elif name.endswith("_int.h"):
                bad.append(f"#include: {rel}:{i} includes {inc}, private to "
                           f"{' or '.join(w + '/' for w in where)}")
    # Every folder of ours with C sources must be in the table.
    for root, dirs, files in os.walk(src):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in SKIP]
        if any(x.endswith(".c") for x in files) and folder_of(root, src) is None:
            bad.append(f"folder: {os.path.relpath(root, src)}/ is in no layer "
                       "(add it to FOLDERS)")
    return n


def check_tests(src, bad):
    """tests/ may include a private header only where TEST_PRIVATE says."""
    known = headers(src)
    n = 0
    for rel, _ in walk(src, "tests", skip=("build",)):
        n += 1
        allowed = TEST_PRIVATE.get(rel, set())
        for i, inc in includes(src, rel):
            name = os.path.basename(inc)
            where = known.get(name, [])
            if where and private(name, where) and name not in allowed:
                bad.append(f"#include: {rel}:{i} includes {inc}, private to "
                           f"{' or '.join(w + '/' for w in where)} "
                           "(a test that must reach it goes in TEST_PRIVATE)")
    for rel in sorted(set(TEST_PRIVATE) - {r for r, _ in walk(src, "tests", skip=("build",))}):
        bad.append(f"TEST_PRIVATE names {rel}, which does not exist")
    return n


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, scratch = sys.argv[1], sys.argv[2]
    reply, dot = configure(src, scratch)
    targets = codemodel(reply)
    edges = link_edges(dot)
    bad = []
    check_links(targets, edges, bad)
    check_include_paths(targets, src, bad)
    files = check_sources(src, bad)
    tests = check_tests(src, bad)
    for b in bad:
        print(b)
    if bad:
        print(f"check_layers: {len(bad)} arrow(s) against the layers")
        return 1
    print(f"check_layers: {len(targets)} targets and {files} source files point one way; "
          f"{tests} test files reach no private header unlisted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
