"""Loading libring: cffi in ABI mode (ffi.dlopen, no compiler at import).

Which file, the first of:
  1. $RINGKEEPER_LIBRING: the library's path (the tests point it at the build
     tree), or a folder holding libring.so.<SONAME version>;
  2. the installed library by its SONAME, libring.so.0.2, where the dynamic
     loader looks (its cache, LD_LIBRARY_PATH);
  3. the folders an install puts it in, which the loader may not search:
     <prefix>/lib/<multiarch triplet>, lib64 and lib under /usr/local and /usr.
The SONAME and the check of ring_version() below keep the declarations of
_cdef.py and the library in step: while libring is 0.x a different minor
version is a different ABI.
"""
import os
import sysconfig
from typing import List, Tuple

from cffi import FFI

from ._cdef import ABI_VERSION, CDEF

ffi = FFI()
ffi.cdef(CDEF)
# free() for the malloc()'ed buffers libring hands out (ring_table_encode):
# the C library's own, which libring's malloc is.
ffi.cdef("void free(void *);")

SONAME = "libring.so.%d.%d" % ABI_VERSION


def _candidates() -> List[str]:
    """Where to look, in order (the module's docstring says why)."""
    env = os.environ.get("RINGKEEPER_LIBRING")
    if env:
        return [os.path.join(env, SONAME) if os.path.isdir(env) else env]
    triplet = sysconfig.get_config_var("MULTIARCH") or ""
    found = [SONAME]
    for prefix in ("/usr/local", "/usr"):
        for sub in (os.path.join("lib", triplet) if triplet else None, "lib64", "lib"):
            if sub and os.path.exists(os.path.join(prefix, sub, SONAME)):
                found.append(os.path.join(prefix, sub, SONAME))
    return found


def _loaded_path(name: str) -> str:
    """The file the loader mapped for `name` (it may have been a bare SONAME)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1]
                if os.path.basename(path).startswith(SONAME):
                    return path
    except OSError:
        pass
    return name


def _open() -> Tuple[object, str, str]:
    errors = []
    for path in _candidates():
        try:
            lib = ffi.dlopen(path)
            break
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    else:
        raise ImportError(
            "ringkeeper: cannot load libring (%s); install libring%d.%d or set "
            "RINGKEEPER_LIBRING to the path of %s" % (("; ".join(errors),) + ABI_VERSION + (SONAME,))
        )
    version = ffi.string(lib.ring_version()).decode("ascii", "replace")
    parts = version.split(".")
    # Only major.minor fixes the ABI while 0.x; a patch release changes no layout.
    if tuple(int(p) for p in parts[:2] if p.isdigit()) != ABI_VERSION:
        raise ImportError(
            "ringkeeper: %s is libring %s; this binding declares the ABI of %d.%d"
            % ((path, version) + ABI_VERSION)
        )
    return lib, version, _loaded_path(path)


lib, LIBRING_VERSION, LIBRING_PATH = _open()
libc = ffi.dlopen(None)

# Error names by code, from the declared enum: one list, the header's (the
# cdef mirrors it and test_cdef.py checks that it does).
ERROR_NAMES = dict(ffi.typeof("ring_errno").elements)
