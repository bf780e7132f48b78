"""The binding's version: the project's (CMakeLists.txt's project()), which
pyproject.toml reads from here and test_package.py checks against the build."""
__version__ = "0.2.0"
