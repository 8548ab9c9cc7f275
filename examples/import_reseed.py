"""Seeded, then a library that seeds NumPy as it is imported: its seed governs the draws, not yours.

The library is examples/site-packages/reseedlib, on the path as if installed:
    PYTHONPATH=site-packages rngtrace run import_reseed.py
"""
import numpy as np

np.random.seed(0)
import reseedlib.legacy  # noqa: E402  (imported after the seed, as a later notebook cell would)

print(np.random.rand())  # the same with np.random.seed(1) above: the library's seed decides
