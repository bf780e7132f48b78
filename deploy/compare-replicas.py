#!/usr/bin/env python3
"""Compares every arc's replicas across its owners, for ring-kv data.

Usage: compare-replicas.py --endpoints URL --cluster NAME --nodes DIR [--new ID]

Reads the live table from etcd (the v3 gRPC-JSON gateway, so nothing but the
Python standard library is needed), then for every token reads the arc of each
of its R owners from DIR/<id>/ (a local cluster's data dirs: arcs/<token>/ and,
for the moments around a cutover, kv/staging/<token>/). ring-kv on each host
writes its own segment files (named after the host, batched its own way), so
the files of two replicas differ while their records must not: the script
merges each replica's segments the way ring-kv does (examples/kv/PROTOCOL.md,
"Merging": the newest timestamp wins, ties to the larger checksum) and compares
the winning records, header and bytes, between the owners.

Prints one summary line (and the first mismatches); exit 0 when every token's
replicas are identical, 1 otherwise, 2 on a usage or etcd error. With --new
ID it also prints the share of key-replicas that node holds: after a join,
the share of the data that moved to it.
"""
import argparse
import base64
import json
import os
import struct
import sys
import time
import urllib.request

MAGIC = b"RKVSEG1\n"
HEAD = struct.Struct("<QQIHBB")  # checksum, timestamp, value_len, key_len, kind, 0
END = 2


def etcd_get(endpoint, key):
    """The value of key (bytes), or None when absent."""
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    req = urllib.request.Request(endpoint.rstrip("/") + "/v3/kv/range", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        kvs = json.load(r).get("kvs") or []
    return base64.b64decode(kvs[0]["value"]) if kvs else None


def live_table(endpoints, cluster):
    last = None
    for ep in endpoints.split(","):
        try:
            prefix = "/ringkeeper/%s/" % cluster
            version = etcd_get(ep, prefix + "version")
            if version is None:
                raise RuntimeError("no table published (no %sversion key)" % prefix)
            table = etcd_get(ep, prefix + "tables/" + version.decode())
            if table is None:
                raise RuntimeError("tables/%s is missing" % version.decode())
            return json.loads(table)
        except (OSError, RuntimeError, ValueError) as e:
            last = e
    raise RuntimeError("cannot read the table from %s: %s" % (endpoints, last))


def read_segment(path, records):
    """Merges the records of one segment file into records: key -> (ts, csum, raw)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError("%s: not a segment (bad magic)" % path)
    off, ended = 8, False
    while off + HEAD.size <= len(data):
        csum, ts, vlen, klen, kind, _ = HEAD.unpack_from(data, off)
        if kind == END:
            ended = True
            break
        end = off + HEAD.size + klen + vlen
        if end > len(data) or klen == 0:
            break
        key = data[off + HEAD.size:off + HEAD.size + klen]
        old = records.get(key)
        if old is None or (ts, csum) > (old[0], old[1]):
            records[key] = (ts, csum, data[off:end])
        off = end
    if not ended:
        raise ValueError("%s: torn segment (no end marker)" % path)


def replica(node_dir, token):
    """The merged records of one token in one node's data dir. A segment may
    vanish under us (ring-kv compacts, an agent installs): read it again."""
    for attempt in range(10):
        records = {}
        try:
            for sub in ("arcs", os.path.join("kv", "staging")):
                d = os.path.join(node_dir, sub, str(token))
                if os.path.isdir(d):
                    for name in sorted(os.listdir(d)):
                        if name.endswith(".kv"):
                            read_segment(os.path.join(d, name), records)
            return records
        except FileNotFoundError:
            time.sleep(0.05 * (attempt + 1))
    raise RuntimeError("%s: token %d kept changing while read" % (node_dir, token))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoints", required=True)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--nodes", required=True, help="DIR holding each node's data dir DIR/<id>")
    ap.add_argument("--new", help="a node that joined: print the share it holds")
    a = ap.parse_args()
    try:
        t = live_table(a.endpoints, a.cluster)
    except RuntimeError as e:
        print("compare-replicas: %s" % e, file=sys.stderr)
        return 2
    T, R = t["tokens"], t["replicas"]
    ids = [n["id"] for n in t["nodes"]]
    owners = struct.unpack("<%dH" % (T * R), base64.b64decode(t["owners"]))
    if t.get("pending"):
        print("compare-replicas: version %d has %d pending slots: a migration is running"
              % (t["version"], len(t["pending"])), file=sys.stderr)
        return 2
    bad, keys, recs, nbytes, per_node = [], set(), 0, 0, {}
    for tok in range(T):
        reps = []
        for s in range(R):
            nid = ids[owners[tok * R + s]]
            reps.append((nid, replica(os.path.join(a.nodes, nid), tok)))
        first_id, first = reps[0]
        for nid, r in reps:
            per_node[nid] = per_node.get(nid, 0) + len(r)
            recs += len(r)
            nbytes += sum(len(v[2]) for v in r.values())
            if r != first:
                only = len(set(first) ^ set(r))
                differ = sum(1 for k in set(first) & set(r) if first[k] != r[k])
                bad.append("token %d: %s and %s differ (%d keys in one only, %d with other "
                           "records)" % (tok, first_id, nid, only, differ))
        keys.update(first)
    print("replicas: version %d, %d tokens x %d owners compared, %d keys, %d key-replicas, "
          "%d record bytes: %s" % (t["version"], T, R, len(keys), recs, nbytes,
                                   "all identical" if not bad else "%d differ" % len(bad)))
    for line in bad[:10]:
        print("  " + line)
    if a.new:
        held = per_node.get(a.new, 0)
        print("moved data: %s holds %d of %d key-replicas = %.2f%%" %
              (a.new, held, recs, 100.0 * held / recs if recs else 0.0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
