"""The package's Python surface: its version, the exception hierarchy, a
Table as the collection of its nodes, and `owners` taken before the first
lookup being the fast closure itself."""
import os

import pytest

import ringkeeper as rk
import tables
from conftest import need_env

T, R, N, ZONES, SEED = 64, 3, 6, 3, 7


@pytest.fixture
def table():
    with rk.Table.decode(tables.encode("pyapi", 1, tables.owners_rr(T, R, N), N, ZONES,
                                       seed=SEED)) as t:
        yield t


def test_version_is_the_projects():
    assert rk.__version__ == need_env("RINGKEEPER_VERSION")
    assert rk.LIBRING_VERSION == rk.__version__
    assert os.path.realpath(rk.LIBRING_PATH) == os.path.realpath(need_env("RINGKEEPER_LIBRING"))
    assert os.path.exists(os.path.join(os.path.dirname(rk.__file__), "py.typed"))


def test_error_hierarchy():
    assert issubclass(rk.RingConnectionError, rk.RingError)
    assert issubclass(rk.RingConnectionError, ConnectionError)
    assert issubclass(rk.RingTimeoutError, rk.RingError)
    assert issubclass(rk.RingTimeoutError, TimeoutError)
    with pytest.raises(rk.RingError) as e:  # a plain library error stays a RingError
        rk.Table.decode(b"{")
    assert type(e.value) is rk.RingError and e.value.name == "RING_EJSON"
    e = rk.RingTimeoutError(-30)
    assert (e.code, e.name) == (-30, "RING_ETIMEDOUT") and "timed out" in str(e)


def test_table_is_its_nodes(table):
    assert len(table) == N
    assert list(table) == ["n%d" % i for i in range(N)]
    assert "n3" in table and "n%d" % N not in table and 3 not in table
    table.close()
    for use in (len, list, lambda t: "n3" in t):
        with pytest.raises(ValueError):
            use(table)


def test_owners_taken_before_first_call_is_the_fast_path(table):
    f = table.owners  # before any lookup
    assert f is table.owners  # the instance's closure, not a bound method
    assert not hasattr(f, "__self__")
    assert f(b"k") == table.lookup(b"k") == table.owners("k")
    assert isinstance(rk.Table.owners.__doc__, str)  # the class attribute documents it
    table.close()
    with pytest.raises(ValueError):
        table.owners(b"k")
