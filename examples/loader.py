"""Seeded, then a shuffling DataLoader draws before the model is built: the model's weights depend on it."""
import torch
from torch import nn
from torch.utils.data import DataLoader

from rngtrace import rng_trace

with rng_trace():
    torch.manual_seed(0)
    loader = DataLoader(list(range(32)), batch_size=8, shuffle=True)
    first_batch = next(iter(loader))
    model = nn.Linear(4, 2)
