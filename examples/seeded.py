"""The story as a plain script, for `rngtrace run`: pass --init to initialise the device first."""
import sys

import numpy as np

from acc import devinit

np.random.seed(666)
if "--init" in sys.argv:
    devinit.init()
x = np.random.rand(1)
print(f"x = {x[0]:.6f}")
