"""pytorch/examples word_language_model's start: seeded, then the model initialises its own weights.

Reproducible as it stands: rngtrace finds no cause, and names the risk (its init draws from the global
generator, so a draw added before it would move the weights).
"""
import torch
from torch import nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid)
        self.decoder = nn.Linear(nhid, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)


torch.manual_seed(1111)
model = RNNModel(ntoken=50, ninp=8, nhid=8)
print(model.decoder.weight.detach().sum().item())
