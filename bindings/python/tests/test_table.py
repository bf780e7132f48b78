"""Table, lookups and the bounded router, on tables encoded in Python from
proto/table.md (tables.py), each answer checked against the format's rule
for it computed here (token = top bits of XXH3 64; owners = the token's row)."""
import gc
import os

import pytest

import ringkeeper as rk
import tables

T, R, N, ZONES, SEED = 64, 3, 6, 3, 7
KEYS = [b"key-%d" % i for i in range(3000)] + [b"", b"\xff" * 100, "ключ".encode()]


@pytest.fixture
def owners():
    return tables.owners_rr(T, R, N)


@pytest.fixture
def table(owners):
    with rk.Table.decode(tables.encode("pyt", 3, owners, N, ZONES, seed=SEED,
                                       pending=[(5, 0, 3), (9, 2, 0)])) as t:
        yield t


def ids(row):
    return tuple("n%d" % n for n in row)


def test_decode_inspect(table):
    assert (table.cluster, table.version, table.tokens, table.replicas, table.seed) == \
        ("pyt", 3, T, R, SEED)
    assert table.failure_domain == "zone"
    assert table.node_ids == ids(range(N))
    assert table.pending_count == 2
    n4 = table.node("n4")
    assert n4 == rk.Node(4, "n4", "127.0.0.1:7004", 1.0, "active", {"zone": "z1"})
    assert table.node(4) == n4
    with pytest.raises(KeyError):
        table.node("nope")
    with pytest.raises(KeyError):
        table.node(N)


def test_encode_is_canonical(owners):
    data = tables.encode("pyt", 1, owners, N, ZONES, seed=SEED)
    with rk.Table.decode(data) as t:
        assert t.encode() == data  # the Python encoder writes what libring would


def test_lookup_matches_the_format(table, owners):
    for k in KEYS:
        tok = tables.token_of(k, SEED, T)
        assert table.token(k) == tok
        assert table.lookup(k) == ids(owners[tok])
        assert table.owners(k) == ids(owners[tok])  # the in-place path
        assert table.owner(k) == "n%d" % owners[tok][0]
        assert table.lookup(k, max=1) == ids(owners[tok][:1])


def test_str_keys_hash_as_utf8(table):
    assert table.owners("ключ") == table.lookup("ключ".encode())
    assert table.token("abc") == table.token(b"abc")
    with pytest.raises(TypeError):
        table.owners(42)
    with pytest.raises(ValueError):
        table.lookup(b"k", max=0)


def test_write_set_adds_pending(table, owners):
    assert table.token_write_set(5) == ids(owners[5] + [3])
    assert table.token_write_set(9) == ids(owners[9] + [0])
    assert table.token_write_set(6) == ids(owners[6])
    k = next(k for k in KEYS if tables.token_of(k, SEED, T) == 5)
    assert table.write_set(k) == ids(owners[5] + [3])
    with pytest.raises(ValueError):
        table.token_write_set(T)


def test_read_replica_skips_down_owners(owners):
    # n0, n1 and n2 down: tokens owned by exactly those three have no reader.
    data = tables.encode("pyt", 1, owners, N, ZONES, seed=SEED,
                         states={0: "down", 1: "down", 2: "down"})
    with rk.Table.decode(data) as t:
        seen = set()
        for k in KEYS[:500]:
            row = owners[tables.token_of(k, SEED, T)]
            live = [n for n in row if n > 2]
            if live:
                r = t.read_replica(k)
                assert r in ids(live)
                assert t.read_replica(k) == r  # one key, one replica
                seen.add(r)
            else:
                with pytest.raises(rk.RingError) as e:
                    t.read_replica(k)
                assert e.value.code == -22 and e.value.name == "RING_EUNAVAIL"
        assert seen == {"n3", "n4", "n5"}


def test_errors_carry_code_and_message(owners):
    with pytest.raises(rk.RingError) as e:
        rk.Table.decode(b"{not json")
    assert (e.value.code, e.value.name) == (-4, "RING_EJSON")
    assert "RING_EJSON (-4)" in str(e.value) and e.value.message
    good = tables.encode("pyt", 1, owners, N, ZONES)
    bad = good.replace(b'"checksum":"xxh3-64:', b'"checksum":"xxh3-64:0')[:-2] + b'"}'
    with pytest.raises(rk.RingError) as e:
        rk.Table.decode(bad)
    assert e.value.name == "RING_ECHECKSUM", e.value
    with pytest.raises(rk.RingError) as e:
        rk.Table.decode(good.replace(b'"n1"', b'"n0"'))
    assert e.value.name == "RING_EDUPNODE" and "n0" in e.value.message
    with pytest.raises(TypeError):
        rk.Table.decode(42)


def test_bounded_router(table):
    with table.router(c=1.25, margin=0.0) as r:
        k = KEYS[0]
        first = table.owner(k)
        assert r.route(k, [0] * N) == (first, True)
        # The first choice at the cap: ceil(1.25 * (total + 1) / 6) with
        # total 100 is 22; the key goes on to the next node in its order.
        loads = {i: 0 for i in table.node_ids}
        loads[first] = 100
        node, was_first = r.route(k, loads)
        assert node != first and not was_first
        assert node == table.owners(k)[1]
        with pytest.raises(ValueError):
            r.route(k, [0] * (N - 1))
        with pytest.raises(ValueError):
            r.route(k, [-1] + [0] * (N - 1))
        with pytest.raises(KeyError):
            r.route(k, {"nx": 1})
    with pytest.raises(ValueError):
        r.route(k, [0] * N)
    with pytest.raises(rk.RingError) as e:
        table.router(c=0.5)
    assert e.value.name == "RING_EINVAL"


def test_close_and_context(owners):
    data = tables.encode("pyt", 1, owners, N, ZONES)
    t = rk.Table.decode(data)
    t.close()
    t.close()  # idempotent
    for call in (lambda: t.version, lambda: t.lookup(b"k"), lambda: t.owners(b"k"),
                 lambda: t.encode(), t.router):
        with pytest.raises(ValueError):
            call()
    assert "closed" in repr(t)


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_no_leak_on_close_or_collect():
    # A 16384 x 3 table holds ~100 KiB of owners in C; 400 leaked copies
    # (or their routers) would add tens of MiB.
    data = tables.encode("pyt", 1, tables.owners_rr(16384, 3, 6), 6, 3)
    def cycle(explicit):
        t = rk.Table.decode(data)
        t.lookup(b"k")
        t.router().route(b"k", [0] * 6)
        if explicit:
            t.close()
    for i in range(50):  # warm up the allocators
        cycle(i % 2 == 0)
    gc.collect()
    before = rss_kib()
    for i in range(400):
        cycle(i % 2 == 0)  # half closed, half left to the collector
    gc.collect()
    grown = rss_kib() - before
    assert grown < 8 * 1024, "RSS grew %d KiB over 400 tables" % grown
