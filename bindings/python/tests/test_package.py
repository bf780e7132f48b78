"""`pip install bindings/python` as a user does it, against libring as
installed: the lib component installed under a scratch root (DESTDIR, the
packages' /usr prefix), the package installed offline into a fresh
virtualenv (Debian's setuptools, --no-build-isolation --no-index), then
imported there, outside the source tree, finding the installed libring."""
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from conftest import need_env

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)  # bindings/python
STEP_S = 240  # one install step, bounded

PROBE = ("import os, ringkeeper as rk; "
         "print(rk.__version__, rk.LIBRING_PATH, rk.__file__, rk.LIBRING_VERSION, "
         "os.path.exists(os.path.join(os.path.dirname(rk.__file__), 'py.typed')))")


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=STEP_S,
                       stdin=subprocess.DEVNULL, **kw)
    if r.returncode != 0:
        pytest.fail("%s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv's python, libring's folder under the scratch root, scratch dir)."""
    tmp = tmp_path_factory.mktemp("pkg")
    root = tmp / "root"
    run(["cmake", "--install", need_env("RINGKEEPER_BUILD"), "--prefix", "/usr",
         "--component", "lib"], env=dict(os.environ, DESTDIR=str(root)))
    libs = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
            if f.startswith("libring.so.")]
    assert libs, "the lib component installed no libring.so"
    # A copy of the source: pip builds in place, and the tree stays clean.
    src = tmp / "src"
    shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns("tests", "bench", "build",
                                                                "*.egg-info", "__pycache__"))
    venv = tmp / "venv"
    # System site packages: Debian's python3-cffi and python3-xxhash, offline.
    run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    py = str(venv / "bin" / "python")
    run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", "-q", str(src)])
    return py, os.path.dirname(libs[0]), tmp


def probe(installed, **env):
    py, _, tmp = installed
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "RINGKEEPER_LIBRING", "LD_LIBRARY_PATH")}
    return subprocess.run([py, "-c", PROBE], capture_output=True, text=True, timeout=STEP_S,
                          cwd=str(tmp), env=dict(clean, **env), stdin=subprocess.DEVNULL)


def test_imports_installed_libring_by_folder(installed):
    py, libdir, tmp = installed
    r = probe(installed, RINGKEEPER_LIBRING=libdir)
    assert r.returncode == 0, r.stderr
    version, path, module, libring, typed = r.stdout.split()
    assert version == need_env("RINGKEEPER_VERSION") and libring == version
    assert path.startswith(libdir + "/"), path  # the installed library, not the build's
    assert module.startswith(str(tmp / "venv")), module  # the installed package
    assert typed == "True"


def test_imports_installed_libring_by_soname(installed):
    _, libdir, _ = installed
    r = probe(installed, LD_LIBRARY_PATH=libdir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[1].startswith(libdir + "/")


def test_no_libring_says_what_to_set(installed):
    triplet = sysconfig.get_config_var("MULTIARCH") or ""
    if any(os.path.exists(os.path.join(p, d, "libring.so.0.2")) for p in ("/usr", "/usr/local")
           for d in ("lib", "lib64", os.path.join("lib", triplet))):
        pytest.skip("a libring is installed system-wide")
    r = probe(installed)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "RINGKEEPER_LIBRING" in r.stderr, r.stderr
