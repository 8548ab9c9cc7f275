"""A spawned pool whose workers draw from NumPy: the seed in the main process never reaches them."""
import multiprocessing as mp

import numpy as np


def work(i):
    return i + np.random.rand()


if __name__ == "__main__":
    np.random.seed(0)
    with mp.get_context("spawn").Pool(2) as pool:
        print(pool.map(work, range(4)))
