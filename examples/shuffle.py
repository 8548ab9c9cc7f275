"""Seeded, or so it seems: NumPy is seeded, but the shuffle draws from Python's random."""
import random

import numpy as np

np.random.seed(0)
order = list(range(8))
random.shuffle(order)  # Python's random was never seeded
noise = np.random.normal(size=2)
print(order[:4], noise.round(3))
