"""A small training script whose libraries draw from the global streams."""
import numpy as np
import torch
from sklearn.model_selection import train_test_split
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rngtrace import rng_trace

X = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")
y = (X[:, 0] > 0).astype("int64")

with rng_trace():
    X_train, X_test, y_train, y_test = train_test_split(X, y)          # no random_state
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
    loader = DataLoader(TensorDataset(torch.from_numpy(X_train), torch.from_numpy(y_train)),
                        batch_size=16, shuffle=True)
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb), yb)
