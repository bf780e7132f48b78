"""Tables for the tests and the benchmark, encoded here in Python from
proto/table.md and not through libring, so decoding them checks libring
against the format's page rather than against itself.
"""
import base64
import json
import struct

import xxhash

FORMAT = "ringkeeper.table.v1"


def owners_rr(tokens, replicas, n, shift=0):
    """Round robin: token t's slot r is node (t + shift + r) % n. With node
    i in zone z<i % zones> and R <= zones, consecutive nodes are in distinct
    zones, so every owner of a token is in a zone of its own."""
    return [[(t + shift + r) % n for r in range(replicas)] for t in range(tokens)]


def encode(cluster, version, owners, n, zones, seed=0, pending=(), states=None,
           weights=None):
    """The table's bytes as proto/table.md writes them: compact, fields in
    order, owners as base64 of T*R little-endian uint16 and their XXH3 64
    checksum. `pending`: (token, slot, node) triples, ascending."""
    tokens, replicas = len(owners), len(owners[0])
    raw = b"".join(struct.pack("<%dH" % replicas, *row) for row in owners)
    nodes = []
    for i in range(n):
        nodes.append({
            "id": "n%d" % i,
            "addr": "127.0.0.1:%d" % (7000 + i),
            "labels": {"zone": "z%d" % (i % zones)},
            "weight": (weights or {}).get(i, 1.0),
            "state": (states or {}).get(i, "active"),
        })
    doc = {
        "format": FORMAT,
        "cluster": cluster,
        "version": version,
        "tokens": tokens,
        "replicas": replicas,
        "hash": {"name": "xxh3-64", "seed": seed},
        "failure_domain": "zone",
        "nodes": nodes,
        "owners": base64.b64encode(raw).decode("ascii"),
        "pending": [list(p) for p in pending],
        "checksum": "xxh3-64:%016x" % xxhash.xxh3_64_intdigest(raw),
    }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def token_of(key, seed, tokens):
    """proto/table.md: the top log2(T) bits of XXH3_64bits_withSeed(key)."""
    return xxhash.xxh3_64_intdigest(key, seed) >> (64 - (tokens.bit_length() - 1))
