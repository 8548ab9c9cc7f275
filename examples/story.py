"""I seeded everything and my numbers still changed: who drew from np.random?"""
import numpy as np

from acc import devinit
from rngtrace import rng_trace

with rng_trace():
    np.random.seed(666)
    devinit.init()
    x = np.random.rand(1)

print(f"x = {x[0]:.6f}  (seeded 666, expected 0.700437)")
