"""Two DataLoader workers whose worker_init_fn seeds NumPy with one constant: both draw the same "random" crops.

PyTorch gives each worker its own torch seed, but NumPy's stream is copied into every worker; seeding it
with a constant in worker_init_fn makes every worker draw the same numbers.
"""

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Crops(Dataset):
    """Eight images; each item is a random crop offset, as an augmentation draws it."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return np.random.randint(0, 32)


def seed_worker(worker_id):
    # Meant to make the workers reproducible; a constant makes them identical.
    #
    #
    #
    #
    #
    #
    np.random.seed(42)


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(Crops(), batch_size=2, num_workers=2, worker_init_fn=seed_worker)
    print([batch.tolist() for batch in loader])
