#!/usr/bin/env python3
"""FSDP2 (`torch.distributed.fsdp.fully_shard`) trains a tiny transformer-like language model:
embedding, two pre-norm blocks (self-attention, MLP, layer norms), a final norm and an output
layer. Each block and then the whole model is sharded over all ranks: parameters are all-gathered
for forward and backward, gradients reduce-scattered.

    torchrun --nproc-per-node 4 examples/python/torch2/fsdp2_transformer.py [gloo|tdist]
    PYTHONPATH=build/python python3 -m tdist.run --nproc-per-node 4 examples/python/torch2/fsdp2_transformer.py tdist
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

import _launch

VOCAB, DIM, HEADS, SEQ, STEPS = 32, 16, 2, 8, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True)
        self.norm2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        h = self.norm1(x)
        causal = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm = nn.LayerNorm(DIM)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.out(self.norm(x))


def batch(rank, step):
    """This rank's sequences: the task is to predict the next token of (t * 3 + 1) % VOCAB."""
    g = torch.Generator().manual_seed(100 * step + rank)
    seq = [torch.randint(0, VOCAB, (4, 1), generator=g)]
    for _ in range(SEQ):
        seq.append((seq[-1] * 3 + 1) % VOCAB)
    seq = torch.cat(seq, dim=1)
    return seq[:, :-1], seq[:, 1:]


def run():
    torch.manual_seed(0)  # fully_shard keeps each rank's shard of the (same) initial weights
    model = TinyLM()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    # SGD: its update is linear in the gradients, so the last-bit differences that another order
    # of summation in a reduce-scatter makes stay that small (Adam divides tiny gradients by
    # their own size).
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
    losses = []
    for step in range(STEPS):
        x, y = batch(dist.get_rank(), step)
        opt.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    losses = torch.stack(losses)
    dist.all_reduce(losses)
    losses /= dist.get_world_size()
    # The parameters are DTensors sharded over the ranks: full_tensor() all-gathers each one.
    params = torch.cat([p.detach().full_tensor().flatten() for p in model.parameters()])
    summary = "fsdp2: mean loss %.4f -> %.4f over %d steps, params checksum %.4f" % (
        losses[0], losses[-1], STEPS, params.sum())
    return summary, {"losses": losses, "params": params}


if __name__ == "__main__":
    _launch.main(run)
