"""A seeded training run; `--validate` adds a validation pass after each epoch, `--dropout P` dropout.

Each flag moves torch's global stream, so the weights and the rows picked to plot change:
`rngtrace run --json a.json train_val.py`, then `... --json b.json train_val.py --validate`,
and `rngtrace diff a.json b.json` names the line in validate() where the runs part.
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--validate", action="store_true")
parser.add_argument("--dropout", type=float, default=0.0)
args = parser.parse_args()

torch.manual_seed(0)
X = torch.randn(64, 4)
y = (X[:, 0] > 0).long()
train = DataLoader(TensorDataset(X[:48], y[:48]), batch_size=16, shuffle=True)
val = DataLoader(TensorDataset(X[48:], y[48:]), batch_size=16, shuffle=True)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(args.dropout), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def validate():
    model.eval()
    with torch.no_grad():
        for xb, yb in val:
            model(xb)
    model.train()


for epoch in range(2):
    for xb, yb in train:
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if args.validate:
        validate()
rows = torch.randint(0, 64, (4,))  # a few rows to plot
print(f"weight = {model[0].weight[0, 0].item():.6f}, rows = {rows.tolist()}")
