"""One fold of a cross-validation, with an unseeded shuffle: rngtrace run fold.py 0, or rngtrace run folds.py"""
import sys

import numpy as np
fold = int(sys.argv[1])
order = np.random.permutation(10)
print(fold, order[:3])
