"""ringkeeper: Python binding of libring, Ringkeeper's embeddable routing library.

Sections:
  1. errors: RingError carries libring's code, its name and the message
  2. Table: decode, inspect, lookup (owners, write set, read replica)
  3. BoundedRouter: routing with bounded loads
  4. Ring: the live ring that follows a cluster's table in etcd

Ownership: every object here owns its C handle and frees it on close() (or
when it leaves a `with` block, or when it is collected); a closed object
raises ValueError when used. Lookups never hand out C memory: results are
Python strings and tuples.

Keys are bytes, or str (hashed as its UTF-8 bytes, as ringctl does).
"""
import atexit
import collections
import threading
import time
import weakref

from ._native import ERROR_NAMES, LIBRING_VERSION, ffi, lib, libc

try:  # the fast lookup path hashes in Python: XXH3 64, the hash libring uses
    from xxhash import xxh3_64_intdigest as _xxh3
except ImportError:  # then every lookup goes through ring_lookup
    _xxh3 = None

__all__ = [
    "RingError",
    "Table",
    "Node",
    "BoundedRouter",
    "Ring",
    "WatcherStats",
    "LIBRING_VERSION",
    "REPLICAS_MAX",
]

REPLICAS_MAX = 7  # RING_REPLICAS_MAX: sizes the owners buffer of a lookup
_OWNERS_T = "uint16_t[%d]" % REPLICAS_MAX  # a lookup's buffer, parsed once by cffi
_WRITE_SET_MAX = 2 * REPLICAS_MAX  # R owners and at most one pending per slot
_NODE_NONE = 0xFFFF
_U64_MAX = (1 << 64) - 1
_ID_MAX = 63  # RING_ID_MAX: cluster names and node ids


# ------------------------------------------------------------------ 1. errors


class RingError(Exception):
    """A libring call failed. `code` is the negative ring_errno value, `name`
    its enum name (e.g. "RING_EJSON"), `message` the library's detail (or
    ring_strerror's text when the call gives none)."""

    def __init__(self, code, message=None):
        self.code = code
        self.name = ERROR_NAMES.get(code, "RING_E?")
        self.message = message or ffi.string(lib.ring_strerror(code)).decode("utf-8", "replace")
        super().__init__("%s (%d): %s" % (self.name, code, self.message))


def _check(rc, err=None):
    """Raises RingError for a negative rc, with err's message when it has one."""
    if rc < 0:
        detail = None
        if err is not None and err.message[0] != b"\0":
            detail = ffi.string(err.message).decode("utf-8", "replace")
        raise RingError(rc, detail)
    return rc


def _key_bytes(key):
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    raise TypeError("a key is bytes or str, not %s" % type(key).__name__)


def _text(p):
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else None


def _opt_text(name, value, limit):
    """A str option as a NUL-terminated C string (a char[] the caller keeps
    alive while C may read it), bounded: the library bounds it too, this
    says which argument was wrong."""
    if value is None:
        return ffi.NULL
    if not isinstance(value, str):
        raise TypeError("%s must be str" % name)
    b = value.encode("utf-8")
    if len(b) > limit or b"\0" in b:
        raise ValueError("%s: at most %d bytes, no NUL" % (name, limit))
    return ffi.new("char[]", b)


class _Closing:
    """`with obj:` closes obj at the end, for each class that owns a handle."""

    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------------- 2. Table

Node = collections.namedtuple("Node", "index id addr weight state labels")


class Table(_Closing):
    """An immutable, versioned placement (ring_table), decoded from the
    ringkeeper.table.v1 JSON bytes. Safe to share between threads."""

    # No __slots__: owners() installs a faster function of its own on the
    # instance (see there), which needs the instance's __dict__.

    def __init__(self, handle):
        """Takes ownership of a sealed ring_table * (use Table.decode)."""
        self._t = ffi.gc(handle, lib.ring_table_free)
        n = lib.ring_table_node_count(handle)
        self._ids = tuple(_text(lib.ring_table_node_id(handle, i)) for i in range(n))
        self._by_token = None  # built on the first fast lookup
        view = lib.ring_table_view(handle)
        self._seed = view.seed
        self._shift = view.shift

    @classmethod
    def decode(cls, data):
        """Parses and validates a table (ring_table_decode). Raises RingError
        with the offending field on a bad table; the input is bounded by the
        library (RING_ETOOBIG past 64 MiB)."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("a table is bytes or str")
        out = ffi.new("ring_table **")
        err = ffi.new("ring_error *")
        _check(lib.ring_table_decode(bytes(data), len(data), out, err), err)
        return cls(out[0])

    # Resources.
    def close(self):
        """Frees the table now (idempotent). Objects built on it (routers)
        must not be used after."""
        if self._t is not None:
            ffi.release(self._t)
            self._t = None
            self._by_token = None
            self.__dict__.pop("owners", None)  # back to the method, which raises now

    def _handle(self):
        if self._t is None:
            raise ValueError("table is closed")
        return self._t

    # Inspection.
    @property
    def version(self):
        return lib.ring_table_version(self._handle())

    @property
    def cluster(self):
        return _text(lib.ring_table_cluster(self._handle()))

    @property
    def failure_domain(self):
        return _text(lib.ring_table_failure_domain(self._handle()))

    @property
    def seed(self):
        return lib.ring_table_seed(self._handle())

    @property
    def tokens(self):
        return lib.ring_table_tokens(self._handle())

    @property
    def replicas(self):
        return lib.ring_table_replicas(self._handle())

    @property
    def pending_count(self):
        return lib.ring_table_pending_count(self._handle())

    @property
    def node_ids(self):
        """Node ids in index order."""
        self._handle()
        return self._ids

    def node(self, which):
        """A Node by index or id; KeyError if there is none."""
        t = self._handle()
        i = self._index(which)
        labels = {}
        k, v = ffi.new("const char **"), ffi.new("const char **")
        for j in range(lib.ring_table_node_label_count(t, i)):
            _check(lib.ring_table_node_label_at(t, i, j, k, v))
            labels[_text(k[0])] = _text(v[0])
        state = _text(lib.ring_node_state_name(lib.ring_table_node_state(t, i)))
        return Node(i, self._ids[i], _text(lib.ring_table_node_addr(t, i)),
                    lib.ring_table_node_weight(t, i), state, labels)

    @property
    def nodes(self):
        return [self.node(i) for i in range(len(self._ids))]

    def _index(self, which):
        if isinstance(which, int):
            if not 0 <= which < len(self._ids):
                raise KeyError(which)
            return which
        b = _opt_text("node id", which, _ID_MAX)
        i = lib.ring_table_find_node(self._handle(), b)
        if i < 0:
            raise KeyError(which)
        return i

    def encode(self):
        """The canonical ringkeeper.table.v1 bytes (ring_table_encode)."""
        out, n = ffi.new("char **"), ffi.new("size_t *")
        _check(lib.ring_table_encode(self._handle(), out, n))
        try:
            return ffi.unpack(out[0], n[0])
        finally:
            libc.free(out[0])  # a malloc()'ed buffer, ring.h says

    # Lookup.
    def token(self, key):
        """The token a key hashes to (ring_table_token)."""
        k = _key_bytes(key)
        return lib.ring_table_token(self._handle(), k, len(k))

    def lookup(self, key, max=REPLICAS_MAX):
        """The key's owners in slot order through ring_lookup (the first is
        the primary), at most `max` of them, as node ids."""
        if key.__class__ is not bytes:
            key = _key_bytes(key)
        if not 1 <= max <= REPLICAS_MAX:
            raise ValueError("max is 1 .. %d" % REPLICAS_MAX)
        t = self._t
        if t is None:
            raise ValueError("table is closed")
        buf = ffi.new(_OWNERS_T)
        n = lib.ring_lookup(t, key, len(key), buf, max)
        if n < 0:
            raise RingError(n)
        ids = self._ids
        return tuple([ids[i] for i in ffi.unpack(buf, n)])

    def owners(self, key):
        """The key's owners in slot order, as node ids: the same answer as
        lookup(), read in place from the table's view (ring_view, as
        ring_inline.h does in C) after hashing in Python, so a lookup costs
        one hash and one list index instead of a call into C. Without the
        xxhash module the hash is ring_table_token's, one call into C.

        The first call builds the rows and puts a closure over them on the
        instance, which later calls reach directly: no attribute lookups, no
        checks but the hash's own (xxhash takes bytes-like objects and str,
        hashed as UTF-8 as _key_bytes does; anything else is a TypeError)."""
        rows = self._by_token
        if rows is None:
            rows = self._build_by_token()
        if _xxh3 is None:  # the hash in C, the row still in place
            def owners(key):
                t = self._t  # read each call: close() frees it
                if t is None:
                    raise ValueError("table is closed")
                k = _key_bytes(key)
                return rows[lib.ring_table_token(t, k, len(k))]
        else:
            def owners(key, rows=rows, h=_xxh3, seed=self._seed, shift=self._shift):
                return rows[h(key, seed) >> shift]
        self.owners = owners
        return owners(key)

    def owner(self, key):
        """The key's primary owner (slot 0)."""
        return self.owners(key)[0]

    def _build_by_token(self):
        """Every token's owner ids, read once from the view's owners array
        (T*R uint16, token-major): the table is immutable, so this never goes
        stale."""
        t = self._handle()
        view = lib.ring_table_view(t)
        T, R = view.tokens, view.replicas
        raw = ffi.unpack(view.owners, T * R)
        ids = self._ids
        self._by_token = [tuple(ids[n] for n in raw[i * R:(i + 1) * R]) for i in range(T)]
        return self._by_token

    def write_set(self, key):
        """Node ids a write of key goes to: its token's owners, then the
        pending owners of a migration in flight (ring_write_set)."""
        return self.token_write_set(self.token(key))

    def token_write_set(self, token):
        t = self._handle()
        if not 0 <= token < lib.ring_table_tokens(t):
            raise ValueError("token out of range")
        buf = ffi.new("uint16_t[]", _WRITE_SET_MAX)
        n = _check(lib.ring_write_set(t, token, buf, _WRITE_SET_MAX))
        return tuple(self._ids[buf[i]] for i in range(n))

    def read_replica(self, key):
        """The owner that serves reads of key (weighted rendezvous among the
        owners not down); RingError RING_EUNAVAIL when every owner is down."""
        k = _key_bytes(key)
        node = ffi.new("uint16_t *")
        _check(lib.ring_read_replica(self._handle(), k, len(k), node))
        return self._ids[node[0]]

    def router(self, c=1.25, margin=0.05, sticky_capacity=0, sticky_ttl_ms=0):
        """A BoundedRouter over this table (see there)."""
        return BoundedRouter(self, c, margin, sticky_capacity, sticky_ttl_ms)

    def __repr__(self):
        if self._t is None:
            return "<ringkeeper.Table closed>"
        return "<ringkeeper.Table %s v%d T=%d R=%d nodes=%d>" % (
            self.cluster, self.version, self.tokens, self.replicas, len(self._ids))


# ---------------------------------------------------------- 3. BoundedRouter


class BoundedRouter(_Closing):
    """Routing with bounded loads (ring_bounded): a key goes to the first
    node in its preference order whose load is under the cap; state
    (hysteresis, the sticky map) lives in the router. The C router wants one
    thread at a time: calls here take a lock."""

    def __init__(self, table, c=1.25, margin=0.05, sticky_capacity=0, sticky_ttl_ms=0):
        if not isinstance(table, Table):
            raise TypeError("a router routes over a Table")
        table._handle()  # a closed table raises here, not at the first route
        opts = ffi.new("ring_bounded_opts *", {"c": c, "margin": margin,
                                               "sticky_capacity": sticky_capacity,
                                               "sticky_ttl_ms": sticky_ttl_ms})
        out = ffi.new("ring_bounded **")
        _check(lib.ring_bounded_new(opts, out))
        self._b = ffi.gc(out[0], lib.ring_bounded_free)
        self.table = table
        self._lock = threading.Lock()

    def route(self, key, loads, now_ms=None, table=None):
        """Routes key given each node's current load: `loads` is a sequence
        in node-index order (one per node) or a mapping id -> load (absent
        ids count 0). Returns (node id, first_choice). RingError
        RING_EUNAVAIL when no serving node is under the cap. `table` routes
        over another table (a newer version) from now on."""
        if table is not None:
            if not isinstance(table, Table):
                raise TypeError("table must be a Table")
            self.table = table
        t = self.table._handle()
        ids = self.table._ids
        if isinstance(loads, collections.abc.Mapping):
            unknown = set(loads) - set(ids)
            if unknown:
                raise KeyError("loads name nodes not in the table: %s" % sorted(unknown)[:5])
            vals = [loads.get(i, 0) for i in ids]
        else:
            vals = list(loads)
            if len(vals) != len(ids):
                raise ValueError("loads: %d values for %d nodes" % (len(vals), len(ids)))
        total = sum(vals)
        if any(v < 0 for v in vals) or total > _U64_MAX:
            raise ValueError("loads are 0 .. 2^64-1 and so is their sum")
        if now_ms is None:
            now_ms = time.monotonic_ns() // 1000000
        k = _key_bytes(key)
        arr = ffi.new("uint64_t[]", vals if vals else 1)
        node, first = ffi.new("uint16_t *"), ffi.new("int *")
        with self._lock:
            if self._b is None:
                raise ValueError("router is closed")
            _check(lib.ring_bounded_route(self._b, t, k, len(k), arr, total, now_ms, node, first))
        return ids[node[0]], bool(first[0])

    def close(self):
        with self._lock:
            if self._b is not None:
                ffi.release(self._b)
                self._b = None


# -------------------------------------------------------------------- 4. Ring

WatcherStats = collections.namedtuple("WatcherStats", "version swaps deltas rejected errors")


class Ring(_Closing):
    """The live ring of one cluster: a watcher (ring_watcher) follows
    /ringkeeper/<cluster>/version in etcd and swaps each new table into a
    lock-free holder (ring_live) on a thread of its own. Lookups go to the
    table in service; `table()` hands out that table as a Table of its own
    (a copy, made once per version), for hot loops and for routers.

        with Ring("http://127.0.0.1:2379", "demo") as ring:
            ring.owners(b"user:42")

    The constructor reads the current table before returning (a cluster with
    none yet leaves the ring empty: version 0, lookups raise LookupError).
    close() stops the watcher, then frees the holder and the client, in that
    order (each needs the next)."""

    def __init__(self, endpoints, cluster, ack_id=None, user=None, password=None,
                 ca_file=None, cert_file=None, key_file=None, timeout_ms=0,
                 connect_timeout_ms=0):
        self._c = self._live = self._w = None
        self._snap = None  # the copy table() made, of the swap numbered _snap_gen
        self._snap_gen = -1
        self._swaps = 0  # swaps the watcher has told of (on_table)
        self._lock = threading.Lock()  # snapshots and close
        # Bytes the C structs point at: kept alive as long as the handles.
        self._keep = [_opt_text("endpoints", endpoints, 4096),
                      _opt_text("cluster", cluster, _ID_MAX),
                      _opt_text("ack_id", ack_id, _ID_MAX),
                      _opt_text("user", user, 255), _opt_text("password", password, 255),
                      _opt_text("ca_file", ca_file, 4096),
                      _opt_text("cert_file", cert_file, 4096),
                      _opt_text("key_file", key_file, 4096)]
        ep, cl, ack, us, pw, ca, cert, key = self._keep
        if ep == ffi.NULL or cl == ffi.NULL:
            raise ValueError("endpoints and cluster are required")
        err = ffi.new("ring_error *")
        copts = ffi.new("ring_etcd_opts *", {"endpoints": ep, "user": us, "password": pw,
                                             "ca_file": ca, "cert_file": cert, "key_file": key,
                                             "timeout_ms": timeout_ms,
                                             "connect_timeout_ms": connect_timeout_ms})
        try:
            c = ffi.new("ring_etcd **")
            _check(lib.ring_etcd_open(copts, c, err), err)
            self._c = c[0]
            live = ffi.new("ring_live **")
            _check(lib.ring_live_new(live))
            self._live = live[0]
            # After each swap the watcher's thread counts it here (taking the
            # GIL for a moment), so a lookup knows its copy is current without
            # asking C. A weak reference: the callback keeps no Ring alive,
            # and __del__ can stop the watcher.
            ref = weakref.ref(self)

            def on_table(ud, table):
                ring = ref()
                if ring is not None:
                    ring._swaps += 1

            self._on_table = ffi.callback("ring_table_cb", on_table)
            wopts = ffi.new("ring_watcher_opts *", {"cluster": cl, "ack_id": ack,
                                                    "on_table": self._on_table})
            w = ffi.new("ring_watcher **")
            _check(lib.ring_watcher_start(self._c, wopts, self._live, w, err), err)
            self._w = w[0]
        except BaseException:
            self.close()
            raise
        _open_rings.add(self)

    def close(self):
        """Stops following and frees everything (idempotent). No lookup may
        run in another thread meanwhile."""
        with self._lock:
            if self._w is not None:
                lib.ring_watcher_stop(self._w)  # first: it writes into live, through c
                self._w = None
            if self._live is not None:
                lib.ring_live_free(self._live)
                self._live = None
            if self._c is not None:
                lib.ring_etcd_close(self._c)
                self._c = None
            self._snap = None
            _open_rings.discard(self)

    def __del__(self):
        self.close()

    def _live_handle(self):
        live = self._live
        if live is None:
            raise ValueError("ring is closed")
        return live

    @property
    def version(self):
        """The version of the table in service, 0 before the first."""
        return lib.ring_live_version(self._live_handle())

    @property
    def stats(self):
        if self._w is None:
            raise ValueError("ring is closed")
        s = ffi.new("ring_watcher_stats *")
        lib.ring_watcher_stats_get(self._w, s)
        return WatcherStats(s.version, s.swaps, s.deltas, s.rejected, s.errors)

    def wait_for_version(self, version, timeout=10.0):
        """Waits (polling every 10 ms, at most `timeout` seconds) until the
        version in service is at least `version` and lookups answer from it;
        returns it, or raises TimeoutError."""
        end = time.monotonic() + timeout
        while True:
            v = self.version
            # And the watcher has told of its swaps (it counts one, then
            # calls on_table), so lookups here answer from that version too.
            if v >= version and self._swaps >= self.stats.swaps:
                return v
            if time.monotonic() >= end:
                raise TimeoutError("ring at version %d, waited %.1fs for %d" % (v, timeout, version))
            time.sleep(0.01)

    def table(self):
        """The table in service as a Table of its own (a sealed copy, made
        inside one short read section and kept until the watcher swaps in
        another version). LookupError while the cluster has no table."""
        snap = self._snap
        if snap is not None and self._snap_gen == self._swaps:
            return snap
        with self._lock:
            live = self._live_handle()
            gen = self._swaps  # read first: a swap after this makes the copy stale
            out = ffi.new("ring_table **")
            cur = lib.ring_live_enter(live)
            try:
                rc = RING_ENOTFOUND if cur == ffi.NULL else lib.ring_table_clone(
                    cur, lib.ring_table_version(cur), out)
            finally:
                lib.ring_live_exit(live)  # the read section stays short: swaps wait for it
            if rc == RING_ENOTFOUND:
                raise LookupError("no table is published yet")
            _check(rc)
            copy = out[0]
            err = ffi.new("ring_error *")
            rc = lib.ring_table_seal(copy, err)
            if rc < 0:
                lib.ring_table_free(copy)  # unsealed, the copy is nobody's
                _check(rc, err)
            self._snap, self._snap_gen = Table(copy), gen  # the Table owns the copy
            return self._snap

    # The lookups of the table in service.
    def owners(self, key):
        snap = self._snap
        if snap is None or self._snap_gen != self._swaps:
            snap = self.table()
        return snap.owners(key)

    def owner(self, key):
        return self.table().owner(key)

    def lookup(self, key, max=REPLICAS_MAX):
        return self.table().lookup(key, max)

    def write_set(self, key):
        return self.table().write_set(key)

    def read_replica(self, key):
        return self.table().read_replica(key)

    def __repr__(self):
        state = "closed" if self._live is None else "v%d" % self.version
        return "<ringkeeper.Ring %s>" % state


RING_ENOTFOUND = lib.RING_ENOTFOUND

# Rings still open when the interpreter exits are closed first: a watcher
# thread must not call into an interpreter that is going away.
_open_rings = weakref.WeakSet()


@atexit.register
def _close_open_rings():
    for ring in list(_open_rings):
        ring.close()
