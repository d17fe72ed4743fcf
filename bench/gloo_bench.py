#!/usr/bin/python3
"""Gloo (through torch.distributed) measured as tdist-bench measures: the same
sizes, warm-up, iterations and placement, the slowest rank's mean time per
operation, and tdist-bench's CSV columns (library "gloo"). One rank per
process, started with torch's env:// variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT); bench/cluster.sh starts it on every emulated host.

  gloo_bench.py -t all_reduce --sizes 8,1M -n 20 -w 5 [--cap BYTES]

Sizes mean what they mean to tdist-bench: for all_gather the output, for
reduce_scatter the input, for all_to_all each rank's send buffer. Collectives
this torch's Gloo lacks print no rows.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def busbw_factor(coll, n):
    if coll == "all_reduce":
        return 2.0 * (n - 1) / n
    if coll in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def make_op(coll, nbytes, n):
    """A function running one operation of `nbytes` (tdist-bench's meaning), and the element count."""
    count = nbytes // 4
    if coll in ("all_gather", "reduce_scatter", "all_to_all"):
        count -= count % n
    if coll == "all_reduce":
        t = torch.ones(count)
        return (lambda: dist.all_reduce(t)), count
    if coll == "broadcast":
        t = torch.ones(count)
        return (lambda: dist.broadcast(t, 0)), count
    if coll == "reduce":
        t = torch.ones(count)
        return (lambda: dist.reduce(t, 0)), count
    if coll == "all_gather":
        inp = torch.ones(count // n)
        outs = [torch.empty(count // n) for _ in range(n)]
        return (lambda: dist.all_gather(outs, inp)), count
    if coll == "all_to_all":
        inp, out = torch.ones(count), torch.empty(count)
        return (lambda: dist.all_to_all_single(out, inp)), count
    return None, count


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-t", dest="colls", default="all_reduce")
    p.add_argument("--sizes", default="8,1M")
    p.add_argument("-n", dest="iters", type=int, default=20)
    p.add_argument("-w", dest="warmup", type=int, default=5)
    p.add_argument("--cap", type=parse_size, default=1 << 30, help="size x iterations at most this")
    a = p.parse_args()
    dist.init_process_group("gloo")
    n, rank = dist.get_world_size(), dist.get_rank()
    if rank == 0:
        print("library,collective,size,count,type,redop,root,world_size,warmup,iters,"
              "oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong")
    for coll in a.colls.split(","):
        for size in (parse_size(s) for s in a.sizes.split(",")):
            op, count = make_op(coll, size, n)
            if op is None or count == 0:  # Gloo divides by zero on empty all_gathers
                continue
            iters = max(1, min(a.iters, a.cap // max(size, 1)))
            warmup = max(1, min(a.warmup, iters))
            for _ in range(warmup):
                op()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                op()
            mine = torch.tensor([(time.perf_counter() - start) / iters * 1e6], dtype=torch.float64)
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
            us = mine.item()
            algbw = count * 4 / us / 1e3
            cells = f"{us:g},{algbw:g},{algbw * busbw_factor(coll, n):g},"
            in_place = coll in ("all_reduce", "broadcast", "reduce")
            root = 0 if coll in ("broadcast", "reduce") else -1
            redop = "sum" if coll in ("all_reduce", "reduce", "reduce_scatter") else "none"
            row = f"gloo,{coll},{count * 4},{count},float,{redop},{root},{n},{warmup},{iters},"
            row += ("," * 4 + cells) if in_place else (cells + "," * 4)
            if rank == 0:
                print(row, flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
