"""word_language_model's shape: seed, build, train. `--eval` scores the data before each epoch, but in
training mode (no model.eval()): its dropout draws move torch's stream, and the trained weights change."""
import sys

import torch
from torch import nn

from model import RNNModel

torch.manual_seed(1111)
data = torch.randint(0, 50, (35, 8))
model = RNNModel(50, 16, 16, 2, dropout=0.2)
opt = torch.optim.SGD(model.parameters(), lr=0.5)


def evaluate():
    with torch.no_grad():
        return model(data).sum().item()


def train():
    output = model(data[:-1])
    loss = nn.functional.cross_entropy(output.view(-1, 50), data[1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()


for epoch in range(2):
    if "--eval" in sys.argv:
        evaluate()
    train()
print(f"weight = {model.decoder.weight[0, 0].item():.6f}")
