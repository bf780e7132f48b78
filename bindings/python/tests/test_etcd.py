"""The live ring against a real etcd: a cluster made with `ringctl init`,
tables written to etcd as the C tests seed them (tables/<v>, then the
`version` key), and the binding's answers compared with `ringctl lookup
--json` (the C library in another process) before and after the watcher
follows a new version."""
import json
import time

import pytest

import ringkeeper as rk
import tables

T, R, N, ZONES, SEED = 64, 3, 6, 3, 11
SAMPLE = ["user:%d" % i for i in range(12)] + ["", "ключ"]
WAIT_S = 15  # a new version reaches the watcher in well under a second


def prefix(cluster):
    return "/ringkeeper/%s/" % cluster


def publish(etcd, cluster, version, data):
    """A coordinator's order: the table first, then the version pointing at it."""
    etcd.put(prefix(cluster) + "tables/%d" % version, data)
    etcd.put(prefix(cluster) + "version", str(version))


def init(ringctl, cluster):
    ringctl.run(cluster, "init", "--failure-domain", "zone", "--tokens", str(T),
                "--replicas", str(R), "--seed", str(SEED))


def check_against_ringctl(ringctl, cluster, ring, version):
    t = ring.table()
    assert t.version == version
    for key in SAMPLE:
        want = ringctl.lookup(cluster, key)
        assert want["version"] == version
        assert t.token(key) == want["token"], key
        assert ring.owners(key) == tuple(want["owners"]), key
        assert ring.lookup(key) == tuple(want["owners"]), key
        assert ring.write_set(key) == tuple(want["owners"] + want["pending"]), key


def test_ring_follows_versions(etcd, ringctl):
    cluster = "py-follow"
    init(ringctl, cluster)
    v1 = tables.owners_rr(T, R, N)
    publish(etcd, cluster, 1, tables.encode(cluster, 1, v1, N, ZONES, seed=SEED))
    with rk.Ring(etcd.endpoints, cluster, ack_id="pyclient") as ring:
        assert ring.version == 1  # read before the constructor returned
        check_against_ringctl(ringctl, cluster, ring, 1)

        # Version 2 moves every token one node on and has a migration in
        # flight: the watcher must swap it in and the answers must follow.
        v2 = tables.owners_rr(T, R, N, shift=1)
        pend = [(t, 0, (v2[t][0] + R) % N) for t in range(0, T, 4)]
        publish(etcd, cluster, 2, tables.encode(cluster, 2, v2, N, ZONES, seed=SEED,
                                                pending=pend))
        assert ring.wait_for_version(2, timeout=WAIT_S) == 2
        check_against_ringctl(ringctl, cluster, ring, 2)
        for t in range(0, T, 4):
            k = next(("k%d" % i for i in range(100000)
                      if tables.token_of(b"k%d" % i, SEED, T) == t))
            assert ring.write_set(k) == tuple("n%d" % n for n in v2[t] + [pend[t // 4][2]])

        stats = ring.stats
        assert (stats.version, stats.swaps, stats.rejected) == (2, 2, 0)
        # The ack (proto/etcd.md, acks/<id>): the version barrier sees us.
        end = time.monotonic() + WAIT_S
        while etcd.get(prefix(cluster) + "acks/pyclient") != b"2":
            assert time.monotonic() < end, "no ack of version 2"
            time.sleep(0.05)

        # A refused table keeps the last good one in service.
        bad = tables.encode(cluster, 3, v1, N, ZONES, seed=SEED).replace(b'"n5"', b'"n4"')
        publish(etcd, cluster, 3, bad)
        end = time.monotonic() + WAIT_S
        while ring.stats.rejected == 0:
            assert time.monotonic() < end, "version 3 was not refused"
            time.sleep(0.05)
        assert ring.version == 2 and ring.table().version == 2
    assert "closed" in repr(ring)
    with pytest.raises(ValueError):
        ring.version


def test_ring_before_any_table(etcd, ringctl):
    cluster = "py-empty"
    init(ringctl, cluster)
    with rk.Ring(etcd.endpoints, cluster) as ring:
        assert ring.version == 0
        with pytest.raises(LookupError):
            ring.owners("k")
        publish(etcd, cluster, 1, tables.encode(cluster, 1, tables.owners_rr(T, R, N), N,
                                                ZONES, seed=SEED))
        ring.wait_for_version(1, timeout=WAIT_S)
        check_against_ringctl(ringctl, cluster, ring, 1)
        with pytest.raises(TimeoutError):
            ring.wait_for_version(5, timeout=0.2)


def test_ring_errors(etcd):
    with pytest.raises(ValueError):
        rk.Ring(etcd.endpoints, "x" * 64)
    with pytest.raises(rk.RingError) as e:
        rk.Ring(etcd.endpoints, "Bad Name")
    assert e.value.code < 0 and e.value.message
    # Nothing listens on a port just found free: the start fails, bounded by
    # the client's timeouts.
    from conftest import free_port
    t0 = time.monotonic()
    with pytest.raises(rk.RingError) as e:
        rk.Ring("http://127.0.0.1:%d" % free_port(), "py-none", timeout_ms=300,
                connect_timeout_ms=200)
    assert e.value.name == "RING_ECONNECT", e.value
    assert time.monotonic() - t0 < 30


def test_many_rings_close_cleanly(etcd, ringctl):
    cluster = "py-many"
    init(ringctl, cluster)
    publish(etcd, cluster, 1, tables.encode(cluster, 1, tables.owners_rr(T, R, N), N, ZONES,
                                            seed=SEED))
    for i in range(20):
        ring = rk.Ring(etcd.endpoints, cluster)
        assert ring.owners("k") == ring.lookup("k")
        if i % 2:
            ring.close()
        del ring  # the rest are closed by __del__


def test_ring_wait_fails_fast(etcd, ringctl):
    # A cluster with no table (a typo of a name): the constructor raises
    # within `wait`, rather than the first lookup failing later.
    t0 = time.monotonic()
    with pytest.raises(rk.RingTimeoutError) as e:
        rk.Ring(etcd.endpoints, "py-typo", wait=0.5)
    assert isinstance(e.value, TimeoutError) and "py-typo" in str(e.value)
    assert time.monotonic() - t0 < 10
    # Unreachable etcd: a ConnectionError, its connect timeout bounded by wait.
    from conftest import free_port
    t0 = time.monotonic()
    with pytest.raises(rk.RingConnectionError) as e:
        rk.Ring("http://127.0.0.1:%d" % free_port(), "py-none", wait=0.5)
    assert isinstance(e.value, ConnectionError) and e.value.name == "RING_ECONNECT"
    assert time.monotonic() - t0 < 10
    # With a table in service the constructor returns with it.
    cluster = "py-wait"
    init(ringctl, cluster)
    publish(etcd, cluster, 1, tables.encode(cluster, 1, tables.owners_rr(T, R, N), N, ZONES,
                                            seed=SEED))
    with rk.Ring(etcd.endpoints, cluster, wait=WAIT_S) as ring:
        assert ring.version == 1
        check_against_ringctl(ringctl, cluster, ring, 1)
    with pytest.raises(ValueError):
        rk.Ring(etcd.endpoints, cluster, wait=0)


def test_ring_tells_new_versions(etcd, ringctl):
    cluster = "py-tell"
    init(ringctl, cluster)
    told = []
    with rk.Ring(etcd.endpoints, cluster, on_version=told.append) as ring:
        it = ring.versions(timeout=WAIT_S)
        for v in (1, 2, 3):
            publish(etcd, cluster, v, tables.encode(cluster, v, tables.owners_rr(T, R, N,
                                                                                shift=v),
                                                    N, ZONES, seed=SEED))
            assert next(it) == v  # each version, as the watcher swaps it in
            assert ring.table().version == v
        assert told == [1, 2, 3]  # the callback, on the watcher's thread, in order
        with pytest.raises(rk.RingTimeoutError):
            _next_after(ring, 3)
    assert list(it) == []  # a closed ring ends the iteration


def _next_after(ring, seen):
    """A step of versions() past `seen` with none coming: times out."""
    it = ring.versions(timeout=0.2)
    assert next(it) == seen  # the version in service first
    return next(it)
