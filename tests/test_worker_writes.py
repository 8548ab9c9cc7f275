"""What a DataLoader worker's writer does before each batch it sends: written, and no more asked than needed."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rngtrace import _processes, rng_trace

torch = pytest.importorskip("torch")


class _Drawing(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int):
        return torch.tensor(np.random.rand())


def test_a_dataloader_worker_asks_its_role_once_not_at_every_batch_it_sends(monkeypatch):
    read, write = os.pipe()
    asked = _processes.role

    def counted_role():
        os.write(write, b"r")  # from the worker: its count comes back through the pipe
        return asked()

    monkeypatch.setattr(_processes, "role", counted_role)
    loader = torch.utils.data.DataLoader(_Drawing(), batch_size=2, num_workers=2, multiprocessing_context="fork")
    with rng_trace(print=False) as trace:
        batches = list(loader)
    os.close(write)
    with os.fdopen(read, "rb") as calls:
        asked_times = len(calls.read())
    assert len(batches) == 16  # 8 sent by each worker, each written before it went
    roles = sorted(p.role for p in trace.processes if p.role)
    assert roles == ["DataLoader worker 0", "DataLoader worker 1"]
    assert len([e for e in trace.events if e.api == "numpy.random.rand"]) == 32
    assert asked_times <= 2 * 2  # at most twice a worker (its first write, and its header's)
