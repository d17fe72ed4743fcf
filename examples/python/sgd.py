#!/usr/bin/env python3
"""分布式同步SGD (the tutorial's distributed synchronous SGD) in NumPy.

Every rank trains the same small network (64-32-10 MLP, softmax and negative log-likelihood) on
its own partition of the 8x8 digits that Debian's python3-sklearn ships (digits.csv.gz; without
it, a seeded synthetic set of the same shape). After each backward pass average_gradients()
all-reduces the gradients and divides them by the world size, so every rank takes the same step
and the replicas stay identical. At the end every rank checks that, and reports the held-out
accuracy.

    python3 -m tdist.run --nproc-per-node 4 examples/python/sgd.py [--epochs N]
    python3 examples/python/sgd.py [world_size] [--epochs N]
"""
import gzip
import os
import sys
from math import ceil
from random import Random

import numpy as np

import tdist as dist
from _launch import main

DIGITS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def load_data():
    """(features float32 [n, 64] scaled to [0, 1], labels int64 [n])."""
    path = os.environ.get("TDIST_DIGITS_CSV", DIGITS)
    if os.path.exists(path):
        with gzip.open(path, "rt") as f:
            raw = np.loadtxt(f, delimiter=",", dtype=np.float32)
        return raw[:, :64] / 16.0, raw[:, 64].astype(np.int64)
    rng = np.random.default_rng(0)  # the same on every rank
    centers = rng.random((10, 64), dtype=np.float32)
    labels = rng.integers(0, 10, 1797)
    return (centers[labels] + 0.15 * rng.standard_normal((1797, 64), dtype=np.float32)), labels


class Partition:
    """数据集划分助手: the rows of one partition."""

    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, index):
        data_idx = self.index[index]
        return self.data[data_idx]


class DataPartitioner:
    """The tutorial's seeded partitioner: shuffle, then cut by the given fractions."""

    def __init__(self, data, sizes=(0.7, 0.2, 0.1), seed=1234):
        self.data = data
        self.partitions = []
        rng = Random()
        rng.seed(seed)
        data_len = len(data)
        indexes = [x for x in range(0, data_len)]
        rng.shuffle(indexes)

        for frac in sizes:
            part_len = int(frac * data_len)
            self.partitions.append(indexes[0:part_len])
            indexes = indexes[part_len:]

    def use(self, partition):
        return Partition(self.data, self.partitions[partition])


class Net:
    """64 -> 32 (ReLU) -> 10 (log-softmax); parameters and gradients as float32 arrays."""

    def __init__(self, rng):
        self.params = {
            "w1": (rng.standard_normal((64, 32)) * np.sqrt(2 / 64)).astype(np.float32),
            "b1": np.zeros(32, np.float32),
            "w2": (rng.standard_normal((32, 10)) * np.sqrt(2 / 32)).astype(np.float32),
            "b2": np.zeros(10, np.float32),
        }
        self.grads = {k: np.zeros_like(v) for k, v in self.params.items()}

    def forward_backward(self, x, y):
        """The mean NLL loss of the batch; fills self.grads."""
        p = self.params
        h_pre = x @ p["w1"] + p["b1"]
        h = np.maximum(h_pre, 0)
        logits = h @ p["w2"] + p["b2"]
        logits -= logits.max(axis=1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        n = len(y)
        loss = -log_probs[np.arange(n), y].mean()
        d_logits = np.exp(log_probs)
        d_logits[np.arange(n), y] -= 1
        d_logits /= n
        self.grads["w2"][...] = h.T @ d_logits
        self.grads["b2"][...] = d_logits.sum(axis=0)
        d_h = (d_logits @ p["w2"].T) * (h_pre > 0)
        self.grads["w1"][...] = x.T @ d_h
        self.grads["b1"][...] = d_h.sum(axis=0)
        return float(loss)

    def predict(self, x):
        h = np.maximum(x @ self.params["w1"] + self.params["b1"], 0)
        return (h @ self.params["w2"] + self.params["b2"]).argmax(axis=1)


def average_gradients(model):
    """梯度平均: all-reduce every gradient (in place) and divide by the world size."""
    size = float(dist.get_world_size())
    for grad in model.grads.values():
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        grad /= size


def run(rank, size):
    epochs = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 10
    x, y = load_data()
    held_out = len(x) // 5  # the last fifth is never trained on
    train_rows = np.arange(len(x) - held_out)
    bsz = 128 // size
    partition = DataPartitioner(train_rows, [1.0 / size for _ in range(size)]).use(dist.get_rank())
    rows = np.array([partition[i] for i in range(len(partition))])
    model = Net(np.random.default_rng(1234))  # the same initial weights everywhere
    lr, momentum = 0.1, 0.5
    velocity = {k: np.zeros_like(v) for k, v in model.params.items()}
    shuffle = np.random.default_rng(rank)
    num_batches = ceil(len(rows) / float(bsz))
    for epoch in range(epochs):
        epoch_loss = 0.0
        order = shuffle.permutation(rows)
        for b in range(num_batches):
            batch = order[b * bsz:(b + 1) * bsz]
            epoch_loss += model.forward_backward(x[batch], y[batch])
            average_gradients(model)
            for k, v in model.params.items():
                velocity[k] = momentum * velocity[k] + model.grads[k]
                v -= lr * velocity[k]
        print(f"Rank {dist.get_rank()}, epoch {epoch}: loss {epoch_loss / num_batches:.4f}", flush=True)

    # The replicas must be identical: compare with rank 0's weights.
    flat = np.concatenate([v.ravel() for v in model.params.values()])
    reference = flat.copy()
    dist.broadcast(reference, src=0)
    same = np.array([1 if np.array_equal(flat, reference) else 0], dtype=np.int32)
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    print(f"Rank {rank}: weights identical on all ranks: {'yes' if same[0] else 'no'}", flush=True)
    test_x, test_y = x[len(x) - held_out:], y[len(x) - held_out:]
    correct = int((model.predict(test_x) == test_y).sum())
    print(f"Rank {rank}: held-out accuracy {correct / held_out:.3f} ({correct} of {held_out})", flush=True)
    if not same[0]:
        raise SystemExit(1)


if __name__ == "__main__":
    main(run)
