"""Seeds every global stream, yet prints other numbers each run: rngtrace run entropy.py"""
import random

import numpy as np

random.seed(0)
np.random.seed(0)

weights = np.random.normal(size=4)  # the global stream: seeded above
noise = np.random.default_rng()  # a generator of its own, made from OS entropy
jitter = noise.normal(scale=0.1, size=4)
print(np.round(weights + jitter, 3), random.random())
