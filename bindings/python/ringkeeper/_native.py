"""Loading libring: cffi in ABI mode (ffi.dlopen, no compiler at import).

Which file: $RINGKEEPER_LIBRING when set (the build tree's libring.so, as
the tests do), else the installed library by its SONAME, libring.so.0.2,
which the dynamic loader finds on its usual path. The SONAME and the check
of ring_version() below keep the declarations of _cdef.py and the library
in step: while libring is 0.x a different minor version is a different ABI.
"""
import os

from cffi import FFI

from ._cdef import ABI_VERSION, CDEF

ffi = FFI()
ffi.cdef(CDEF)
# free() for the malloc()'ed buffers libring hands out (ring_table_encode):
# the C library's own, which libring's malloc is.
ffi.cdef("void free(void *);")


def _open():
    path = os.environ.get("RINGKEEPER_LIBRING") or "libring.so.%d.%d" % ABI_VERSION
    try:
        lib = ffi.dlopen(path)
    except OSError as e:
        raise ImportError(
            "ringkeeper: cannot load libring (%s): %s; set RINGKEEPER_LIBRING to the "
            "path of libring.so.%d.%d" % ((path, e) + ABI_VERSION)
        ) from e
    version = ffi.string(lib.ring_version()).decode("ascii", "replace")
    parts = version.split(".")
    # Only major.minor fixes the ABI while 0.x; a patch release changes no layout.
    if tuple(int(p) for p in parts[:2] if p.isdigit()) != ABI_VERSION:
        raise ImportError(
            "ringkeeper: %s is libring %s; this binding declares the ABI of %d.%d"
            % ((path, version) + ABI_VERSION)
        )
    return lib, version


lib, LIBRING_VERSION = _open()
libc = ffi.dlopen(None)

# Error names by code, from the declared enum: one list, the header's (the
# cdef mirrors it and test_cdef.py checks that it does).
ERROR_NAMES = dict(ffi.typeof("ring_errno").elements)
