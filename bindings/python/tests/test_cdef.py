"""The declarations of ringkeeper/_cdef.py against the real headers.

cffi's ABI mode trusts _cdef.py for every struct layout and prototype; a
header change it missed would corrupt memory silently. So the headers are
run through the C preprocessor (which expands RING_ERRNO_MAP and the limits)
and every struct, enum value and prototype of the cdef must appear there as
written, whitespace aside."""
import os
import re
import subprocess

import pytest

from conftest import need_env
from ringkeeper import _cdef


def normalize(text):
    text = re.sub(r"\s+", " ", text)
    return re.sub(r" ?([(){}\[\],;*=]) ?", r"\1", text).strip()


@pytest.fixture(scope="module")
def header():
    cc = need_env("RINGKEEPER_CC")
    incs = [i for i in need_env("RINGKEEPER_INCLUDES").split(os.pathsep) if i]
    src = '#include "ring.h"\n#include "ring_etcd.h"\n'
    r = subprocess.run([cc, "-E", "-P", "-x", "c", "-"] + ["-I" + i for i in incs],
                       input=src, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return normalize(r.stdout)


def declarations():
    """The cdef's top-level declarations: each ends at a ';' outside braces."""
    out, depth, cur = [], 0, ""
    for ch in _cdef.CDEF:
        cur += ch
        depth += ch == "{"
        depth -= ch == "}"
        if ch == ";" and depth == 0:
            out.append(normalize(cur))
            cur = ""
    return out


def test_every_declaration_is_the_headers(header):
    decls = declarations()
    assert len(decls) > 50  # the parse found them all, not one run-on string
    for d in decls:
        if d.startswith("typedef enum ring_errno"):
            continue  # the X-macro writes its values as -(n): compared below
        assert d in header, "cdef declaration not in the headers:\n" + d


def test_errno_values_are_the_headers(header):
    m = re.search(r"typedef enum ring_errno\{(.*?)\}ring_errno;", header)
    want = dict((n, -int(v)) for n, v in re.findall(r"(RING_E\w+)=-\(?(\d+)\)?", m.group(1)))
    got = dict((n, -int(v)) for n, v in re.findall(r"(RING_E\w+)=-(\d+)", normalize(_cdef.CDEF)))
    assert want and got == want


def test_abi_version_is_the_headers(header):
    # The version macros are gone after -E: read the generated header itself.
    inc = [i for i in os.environ["RINGKEEPER_INCLUDES"].split(os.pathsep) if i]
    text = ""
    for d in inc:
        p = os.path.join(d, "ring_version.h")
        if os.path.exists(p):
            text = open(p).read()
    got = tuple(int(re.search(r"#define RING_VERSION_%s (\d+)" % w, text).group(1))
                for w in ("MAJOR", "MINOR"))
    assert got == _cdef.ABI_VERSION, "headers are %d.%d, the cdef %d.%d" % (got + _cdef.ABI_VERSION)
