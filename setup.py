"""Builds the compiled linearizability search (checkers/_lincore.c) when `pip install -e .` (setup.sh)
runs; everything else is in pyproject.toml. The extension is optional: without a C compiler the
install still succeeds and the checker uses its pure-Python search (it says so once)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("checkers._lincore", ["checkers/_lincore.c"], optional=True, extra_compile_args=["-O2"]),
    ]
)
