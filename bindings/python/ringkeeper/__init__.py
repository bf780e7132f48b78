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
from __future__ import annotations

import atexit
import collections
import collections.abc
import threading
import time
import weakref
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Tuple, Union

from ._native import ERROR_NAMES, LIBRING_PATH, LIBRING_VERSION, ffi, lib, libc
from ._version import __version__

try:  # the fast lookup path hashes in Python: XXH3 64, the hash libring uses
    from xxhash import xxh3_64_intdigest as _xxh3
except ImportError:  # then every lookup goes through ring_lookup
    _xxh3 = None

__all__ = [
    "__version__",
    "RingError",
    "RingConnectionError",
    "RingTimeoutError",
    "Table",
    "Node",
    "BoundedRouter",
    "Ring",
    "WatcherStats",
    "LIBRING_VERSION",
    "LIBRING_PATH",
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
    ring_strerror's text when the call gives none). The codes of an
    unreachable etcd and of a timeout raise the two subclasses below, so an
    `except ConnectionError` or `except TimeoutError` catches them too."""

    code: int
    name: str
    message: str

    def __init__(self, code: int, message: Optional[str] = None) -> None:
        self.code = code
        self.name = ERROR_NAMES.get(code, "RING_E?")
        self.message = message or ffi.string(lib.ring_strerror(code)).decode("utf-8", "replace")
        super().__init__("%s (%d): %s" % (self.name, code, self.message))


class RingConnectionError(RingError, ConnectionError):
    """No etcd endpoint answered (RING_ECONNECT)."""


class RingTimeoutError(RingError, TimeoutError):
    """A call or a wait ran out of time (RING_ETIMEDOUT, Ring's `wait`)."""


def _error(code: int, message: Optional[str] = None) -> RingError:
    """The exception for a negative ring_errno: one place maps codes to
    classes."""
    if code == lib.RING_ETIMEDOUT:
        return RingTimeoutError(code, message)
    if code == lib.RING_ECONNECT:
        return RingConnectionError(code, message)
    return RingError(code, message)


def _check(rc: int, err: Any = None) -> int:
    """Raises the RingError for a negative rc, with err's message when it has one."""
    if rc < 0:
        detail = None
        if err is not None and err.message[0] != b"\0":
            detail = ffi.string(err.message).decode("utf-8", "replace")
        raise _error(rc, detail)
    return rc


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    raise TypeError("a key is bytes or str, not %s" % type(key).__name__)


def _text(p: Any) -> Optional[str]:
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


Key = Union[bytes, str]
Owners = Tuple[str, ...]


class _InPlaceOwners:
    """Table.owners(key): the key's owners in slot order, as node ids: the
    same answer as lookup(), read in place from the table's view (ring_view,
    as ring_inline.h does in C) after hashing in Python, so a lookup costs
    one hash and one list index instead of a call into C. Without the xxhash
    module the hash is ring_table_token's, one call into C.

    A descriptor, not a method: the first time `table.owners` is read, it
    builds the rows and puts a closure over them on the instance, which every
    later read returns. So `f = table.owners` taken before any lookup is that
    closure already, never a bound method's slower path. The closure does no
    attribute lookups and no checks but the hash's own (xxhash takes
    bytes-like objects and str, hashed as UTF-8 as _key_bytes does; anything
    else is a TypeError)."""

    def __get__(self, table: Optional["Table"], cls: Any = None) -> Callable[[Key], Owners]:
        if table is None:
            return self  # type: ignore[return-value] # the class attribute, for help()
        rows = table._by_token
        if rows is None:
            rows = table._build_by_token()
        if _xxh3 is None:  # the hash in C, the row still in place
            def owners(key: Key) -> Owners:
                t = table._t  # read each call: close() frees it
                if t is None:
                    raise ValueError("table is closed")
                k = _key_bytes(key)
                return rows[lib.ring_table_token(t, k, len(k))]
        else:
            def owners(key: Key, rows: Any = rows, h: Any = _xxh3, seed: int = table._seed,
                       shift: int = table._shift) -> Owners:
                return rows[h(key, seed) >> shift]
        table.__dict__["owners"] = owners
        return owners




class Table(_Closing):
    """An immutable, versioned placement (ring_table), decoded from the
    ringkeeper.table.v1 JSON bytes. Safe to share between threads."""

    # No __slots__: `owners` installs a faster function of its own on the
    # instance (_InPlaceOwners), which needs the instance's __dict__.

    def __init__(self, handle: Any) -> None:
        """Takes ownership of a sealed ring_table * (use Table.decode)."""
        self._t = ffi.gc(handle, lib.ring_table_free)
        n = lib.ring_table_node_count(handle)
        self._ids = tuple(_text(lib.ring_table_node_id(handle, i)) for i in range(n))
        self._by_token = None  # built on the first fast lookup
        view = lib.ring_table_view(handle)
        self._seed = view.seed
        self._shift = view.shift

    @classmethod
    def decode(cls, data: Union[bytes, bytearray, str]) -> "Table":
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
    def close(self) -> None:
        """Frees the table now (idempotent). Objects built on it (routers)
        must not be used after."""
        if self._t is not None:
            ffi.release(self._t)
            self._t = None
            self._by_token = None
            self.__dict__.pop("owners", None)  # back to the descriptor, which raises now

    def _handle(self):
        if self._t is None:
            raise ValueError("table is closed")
        return self._t

    # Inspection.
    @property
    def version(self) -> int:
        return lib.ring_table_version(self._handle())

    @property
    def cluster(self) -> str:
        return _text(lib.ring_table_cluster(self._handle()))

    @property
    def failure_domain(self) -> str:
        return _text(lib.ring_table_failure_domain(self._handle()))

    @property
    def seed(self) -> int:
        return lib.ring_table_seed(self._handle())

    @property
    def tokens(self) -> int:
        return lib.ring_table_tokens(self._handle())

    @property
    def replicas(self) -> int:
        return lib.ring_table_replicas(self._handle())

    @property
    def pending_count(self) -> int:
        return lib.ring_table_pending_count(self._handle())

    @property
    def node_ids(self) -> Tuple[str, ...]:
        """Node ids in index order."""
        self._handle()
        return self._ids

    # A Table is the collection of its nodes: len() counts them, iteration
    # gives their ids in index order, `in` asks whether an id is one of them.
    def __len__(self) -> int:
        self._handle()
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        self._handle()
        return iter(self._ids)

    def __contains__(self, node_id: object) -> bool:
        self._handle()
        return node_id in self._ids

    def node(self, which: Union[int, str]) -> Node:
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
    def nodes(self) -> "list[Node]":
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

    def encode(self) -> bytes:
        """The canonical ringkeeper.table.v1 bytes (ring_table_encode)."""
        out, n = ffi.new("char **"), ffi.new("size_t *")
        _check(lib.ring_table_encode(self._handle(), out, n))
        try:
            return ffi.unpack(out[0], n[0])
        finally:
            libc.free(out[0])  # a malloc()'ed buffer, ring.h says

    # Lookup.
    def token(self, key: Key) -> int:
        """The token a key hashes to (ring_table_token)."""
        k = _key_bytes(key)
        return lib.ring_table_token(self._handle(), k, len(k))

    def lookup(self, key: Key, max: int = REPLICAS_MAX) -> Owners:
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
            raise _error(n)
        ids = self._ids
        return tuple([ids[i] for i in ffi.unpack(buf, n)])

    owners = _InPlaceOwners()

    def owner(self, key: Key) -> str:
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

    def write_set(self, key: Key) -> Owners:
        """Node ids a write of key goes to: its token's owners, then the
        pending owners of a migration in flight (ring_write_set)."""
        return self.token_write_set(self.token(key))

    def token_write_set(self, token: int) -> Owners:
        t = self._handle()
        if not 0 <= token < lib.ring_table_tokens(t):
            raise ValueError("token out of range")
        buf = ffi.new("uint16_t[]", _WRITE_SET_MAX)
        n = _check(lib.ring_write_set(t, token, buf, _WRITE_SET_MAX))
        return tuple(self._ids[buf[i]] for i in range(n))

    def read_replica(self, key: Key) -> str:
        """The owner that serves reads of key (weighted rendezvous among the
        owners not down); RingError RING_EUNAVAIL when every owner is down."""
        k = _key_bytes(key)
        node = ffi.new("uint16_t *")
        _check(lib.ring_read_replica(self._handle(), k, len(k), node))
        return self._ids[node[0]]

    def router(self, c: float = 1.25, margin: float = 0.05, sticky_capacity: int = 0,
               sticky_ttl_ms: int = 0) -> "BoundedRouter":
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

    def route(self, key: Key, loads: Union[Sequence[int], Mapping[str, int]],
              now_ms: Optional[int] = None, table: Optional[Table] = None) -> Tuple[str, bool]:
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

    The constructor reads the current table before returning. With `wait`
    (seconds) it also insists on one: an unreachable etcd raises
    RingConnectionError (its connect timeout bounded by `wait`), a cluster
    with no table in service after `wait` seconds (a typo in its name, a
    cluster not yet made) RingTimeoutError. Without it a cluster with none
    yet leaves the ring empty: version 0, lookups raise LookupError.

    New versions: `on_version(version)` is called on the watcher's thread
    after each swap (keep it short: the next swap waits for it; what it
    raises is reported, never propagated), and `versions()` iterates the
    versions as they come into service.

    close() stops the watcher, then frees the holder and the client, in that
    order (each needs the next)."""

    def __init__(self, endpoints: str, cluster: str, ack_id: Optional[str] = None,
                 user: Optional[str] = None, password: Optional[str] = None,
                 ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                 key_file: Optional[str] = None, timeout_ms: int = 0,
                 connect_timeout_ms: int = 0, wait: Optional[float] = None,
                 on_version: Optional[Callable[[int], None]] = None) -> None:
        self._c = self._live = self._w = None
        self._snap = None  # the copy table() made, of the swap numbered _snap_gen
        self._snap_gen = -1
        self._swaps = 0  # swaps the watcher has told of (on_table)
        self._lock = threading.Lock()  # snapshots and close
        self._swapped = threading.Condition(threading.Lock())  # versions() waits on it
        self._on_version = on_version
        if wait is not None:
            if not 0 < wait <= 3600:
                raise ValueError("wait is 0 .. 3600 seconds")
            if connect_timeout_ms == 0:
                connect_timeout_ms = max(1, int(wait * 1000))
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
                    ring._swapped_to(lib.ring_table_version(table))

            self._on_table = ffi.callback("ring_table_cb", on_table)
            wopts = ffi.new("ring_watcher_opts *", {"cluster": cl, "ack_id": ack,
                                                    "on_table": self._on_table})
            w = ffi.new("ring_watcher **")
            _check(lib.ring_watcher_start(self._c, wopts, self._live, w, err), err)
            self._w = w[0]
            if wait is not None:
                self._wait_first(cluster, wait)
        except BaseException:
            self.close()
            raise
        _open_rings.add(self)

    def _swapped_to(self, version: int) -> None:
        """On the watcher's thread, after each swap: counted first (lookups
        read the count), then the waiters and the callback told."""
        with self._swapped:
            self._swaps += 1
            self._swapped.notify_all()
        if self._on_version is not None:
            self._on_version(version)  # cffi reports what it raises

    def _wait_first(self, cluster: str, wait: float) -> None:
        """Ring(wait=S): a table in service within S seconds, or the error."""
        try:
            self.wait_for_version(1, timeout=wait)
        except RingTimeoutError:
            errors = self.stats.errors
            raise RingTimeoutError(lib.RING_ETIMEDOUT, "cluster %r: no table in service after "
                                   "%gs%s" % (cluster, wait, " (%d etcd errors)" % errors
                                              if errors else "")) from None

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
    def version(self) -> int:
        """The version of the table in service, 0 before the first."""
        return lib.ring_live_version(self._live_handle())

    @property
    def stats(self) -> WatcherStats:
        if self._w is None:
            raise ValueError("ring is closed")
        s = ffi.new("ring_watcher_stats *")
        lib.ring_watcher_stats_get(self._w, s)
        return WatcherStats(s.version, s.swaps, s.deltas, s.rejected, s.errors)

    def wait_for_version(self, version: int, timeout: float = 10.0) -> int:
        """Waits (woken by each swap, at most `timeout` seconds) until the
        version in service is at least `version` and lookups answer from it;
        returns it, or raises RingTimeoutError (a TimeoutError)."""
        end = time.monotonic() + timeout
        with self._swapped:
            while True:
                v = self.version
                # And the watcher has told of its swaps (it counts one, then
                # calls on_table), so lookups here answer from that version too.
                if v >= version and self._swaps >= self.stats.swaps:
                    return v
                left = end - time.monotonic()
                if left <= 0:
                    raise RingTimeoutError(lib.RING_ETIMEDOUT, "ring at version %d, waited "
                                           "%.1fs for %d" % (v, timeout, version))
                # Bounded: a swap counted between the check and this wait
                # still wakes it, but the check reads C state too.
                self._swapped.wait(min(left, 0.05))

    def versions(self, timeout: Optional[float] = None) -> Iterator[int]:
        """Iterates the versions in service, from the one now (when there is
        one) to each newer one as the watcher swaps it in; versions that
        come and go between two steps are skipped (a step gives the latest).
        A step waits at most `timeout` seconds (None: as long as it takes)
        and then raises RingTimeoutError; the iteration ends when the ring
        is closed."""
        seen = 0
        while True:
            end = None if timeout is None else time.monotonic() + timeout
            with self._swapped:
                while self._live is not None and self.version <= seen:
                    left = None if end is None else end - time.monotonic()
                    if left is not None and left <= 0:
                        raise RingTimeoutError(lib.RING_ETIMEDOUT, "no version after %d in "
                                               "%gs" % (seen, timeout))
                    self._swapped.wait(0.05 if left is None else min(left, 0.05))
                if self._live is None:
                    return
                seen = self.version
            yield seen

    def table(self) -> Table:
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
    def owners(self, key: Key) -> Owners:
        snap = self._snap
        if snap is None or self._snap_gen != self._swaps:
            snap = self.table()
        return snap.owners(key)

    def owner(self, key: Key) -> str:
        return self.table().owner(key)

    def lookup(self, key: Key, max: int = REPLICAS_MAX) -> Owners:
        return self.table().lookup(key, max)

    def write_set(self, key: Key) -> Owners:
        return self.table().write_set(key)

    def read_replica(self, key: Key) -> str:
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
