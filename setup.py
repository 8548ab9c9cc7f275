"""The optional C accelerator: without a compiler, rngtrace installs and runs in pure Python."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("rngtrace._speedups", ["src/rngtrace/_speedups.c"], optional=True)])
