#!/usr/bin/env python3
"""分布式同步SGD (distributed synchronous SGD) of the tutorial on backend "tdist".

The tutorial trains on MNIST, which needs a download; this trains on the 8x8
handwritten digits that scikit-learn ships (Debian's python3-sklearn installs
digits.csv.gz; $TDIST_DIGITS_CSV or --data point elsewhere), read without
importing sklearn. Each rank trains on its partition; average_gradients()
all-reduces the gradients, so the replicas stay identical, which every rank
checks at the end.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/torch_sgd.py [world_size] [epochs]
"""
import gzip
import os
import sys
from math import ceil
from random import Random

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tdist.torch  # noqa: F401  registers the backend "tdist" with torch.distributed

DIGITS_CSV = os.environ.get("TDIST_DIGITS_CSV", "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz")


""" 数据集划分助手 """
class Partition(object):

    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, index):
        data_idx = self.index[index]
        return self.data[data_idx]


class DataPartitioner(object):

    def __init__(self, data, sizes=[0.7, 0.2, 0.1], seed=1234):
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


def load_digits(path=DIGITS_CSV):
    """(image, label) pairs: 64 pixels scaled to [0, 1], label 0..9."""
    with gzip.open(path, "rt") as f:
        rows = [[float(v) for v in line.split(",")] for line in f if line.strip()]
    data = torch.tensor(rows)
    images, labels = data[:, :64] / 16.0, data[:, 64].long()
    return [(images[i], labels[i]) for i in range(len(rows))]


""" 划分数据集 (the tutorial's partition_dataset, on digits instead of MNIST) """
def partition_dataset():
    dataset = load_digits()
    size = dist.get_world_size()
    bsz = 128 // size
    partition_sizes = [1.0 / size for _ in range(size)]
    partition = DataPartitioner(dataset, partition_sizes)
    partition = partition.use(dist.get_rank())
    train_set = torch.utils.data.DataLoader(partition,
                                            batch_size=bsz,
                                            shuffle=True)
    return train_set, bsz


class Net(nn.Module):
    """ A small network for 8x8 digits (the tutorial's Net is for 28x28 MNIST). """

    def __init__(self):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


""" 梯度平均。 """
def average_gradients(model):
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


""" 分布式同步SGD示例 """
def run(rank, size):
    torch.manual_seed(1234)
    train_set, bsz = partition_dataset()
    model = Net()
    optimizer = optim.SGD(model.parameters(),
                          lr=0.1, momentum=0.5)

    num_batches = ceil(len(train_set.dataset) / float(bsz))
    losses = []
    for epoch in range(EPOCHS):
        epoch_loss = 0.0
        for data, target in train_set:
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            epoch_loss += loss.item()
            loss.backward()
            average_gradients(model)
            optimizer.step()
        losses.append(epoch_loss / num_batches)
        print('Rank ', dist.get_rank(), ', epoch ',
              epoch, ': ', epoch_loss / num_batches, flush=True)
    # Every replica took the same steps: their parameters are equal.
    flat = torch.cat([p.data.flatten() for p in model.parameters()])
    replicas = [torch.zeros_like(flat) for _ in range(size)]
    dist.all_gather(replicas, flat)
    assert all(torch.equal(r, flat) for r in replicas), "replicas diverged"
    assert losses[-1] < losses[0], "loss did not go down: %s" % losses
    print("Rank %d: replicas identical, loss %.3f -> %.3f" % (rank, losses[0], losses[-1]), flush=True)


def init_process(rank, size, fn, backend="tdist"):
    """ 初始化分布式环境。 """
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ.setdefault("MASTER_PORT", "29500")  # the tutorial's port, unless one is given
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)
    # Rank 0 hosts the store; it waits here until every rank is past
    # init_process_group's use of it before it leaves.
    dist.barrier()
    dist.destroy_process_group()


EPOCHS = int(sys.argv[2]) if len(sys.argv) > 2 else 10

if __name__ == "__main__":
    world_size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    processes = []
    mp.set_start_method("spawn")
    for rank in range(world_size):
        p = mp.Process(target=init_process, args=(rank, world_size, run))
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
    sys.exit(1 if any(p.exitcode != 0 for p in processes) else 0)
