"""The PyTorch plugin (backend "tdist") against torch's Gloo, through torch.distributed, in one run.

    PYTHONPATH=build/python $(scripts/torch_venv.sh | tail -n 1) bench/torch_plugin_vs_gloo.py
    ... --worlds 2,4 --sizes 8,64K,1M,16M --repeat 5 --ddp-steps 20 --json out.json

Each rank is a forked process (one host) whose default group is "tdist" and which also has a
Gloo group over the same ranks: both backends meet the machine in the same state, the same
tensors, the same torch calls (dist.all_reduce on CPU float32 tensors, synchronous). For each
world size and message size the two are measured in turn, `--repeat` times, alternating which
goes first; a measurement is the slowest rank's mean time per all_reduce over enough iterations
to last ~0.2 s; a cell is the median of the repeats. "gloo/tdist" above 1 means tdist is faster.

The physical reference: busbw (nccl-tests' 2(n-1)/n factor) beside this machine's memcpy
bandwidth (one core copying 16 MiB), which a shared-memory all_reduce cannot beat per byte moved.

DDP: the step time (forward, backward with DDP's bucketed all_reduce, SGD step) of a small MLP
(~0.5 M parameters, default 25 MB buckets cut to 1 MB so several all_reduces overlap backward),
median over --ddp-steps after warm-up, per backend.
"""

import argparse
import datetime
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def show_size(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def slowest(seconds, gloo):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return t.item()


def time_all_reduce(nbytes, group, gloo):
    t = torch.ones(max(nbytes // 4, 1))
    iters = int(max(20, min(2000, 2e8 / max(nbytes, 1) / 8)))
    for _ in range(max(3, iters // 10)):
        dist.all_reduce(t, group=group)
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    return slowest((time.perf_counter() - start) / iters, gloo)


def ddp_step_times(group, gloo, steps):
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    ddp = DDP(model, process_group=group, bucket_cap_mb=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(dist.get_rank())
    x, y = torch.randn(64, 256, generator=g), torch.randint(0, 10, (64,), generator=g)
    times = []
    for step in range(steps + 3):
        dist.barrier(group=gloo)
        start = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
        if step >= 3:
            times.append(slowest(time.perf_counter() - start, gloo))
    return statistics.median(times)


def rank_main(rank, world, store_path, args, results):
    os.environ.setdefault("TDIST_JOB_TOKEN", "bench")  # one job, said once: no warning per rank
    torch.set_num_threads(1)
    import tdist.torch  # noqa: F401  registers "tdist"

    dist.init_process_group("tdist", init_method="file://" + store_path, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    tdist_group = dist.distributed_c10d._get_default_group()
    rows = []
    for nbytes in args.sizes:
        samples = {"tdist": [], "gloo": []}
        for rep in range(args.repeat):
            order = ("tdist", "gloo") if rep % 2 == 0 else ("gloo", "tdist")
            for name in order:
                samples[name].append(time_all_reduce(nbytes, tdist_group if name == "tdist" else gloo, gloo))
        rows.append({"world": world, "bytes": nbytes, **{k: statistics.median(v) for k, v in samples.items()}})
    ddp = {}
    if args.ddp_steps:
        for rep in range(2):
            for name in (("tdist", "gloo") if rep == 0 else ("gloo", "tdist")):
                ddp.setdefault(name, []).append(
                    ddp_step_times(tdist_group if name == "tdist" else gloo, gloo, args.ddp_steps))
        ddp = {k: min(v) for k, v in ddp.items()}
    if rank == 0:
        results.put({"world": world, "rows": rows, "ddp": ddp})
    dist.destroy_process_group()


def memcpy_bandwidth():
    a, b = torch.ones(4 << 20), torch.empty(4 << 20)
    for _ in range(3):
        b.copy_(a)
    start = time.perf_counter()
    for _ in range(20):
        b.copy_(a)
    return 20 * a.numel() * 4 / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--sizes", default="8,64K,1M,16M")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--ddp-steps", type=int, default=20)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    torch.set_num_threads(1)
    copy_bw = memcpy_bandwidth()
    print("torch %s, %d cores; memcpy (one core, 16 MiB): %.1f GB/s" % (torch.__version__, os.cpu_count(), copy_bw / 1e9))
    ctx = multiprocessing.get_context("fork")
    report = {"torch": torch.__version__, "cores": os.cpu_count(), "memcpy_GBps": copy_bw / 1e9, "worlds": []}
    for world in [int(w) for w in args.worlds.split(",")]:
        results = ctx.SimpleQueue()
        with tempfile.TemporaryDirectory(prefix="tdist_bench_") as tmp:
            procs = [ctx.Process(target=rank_main, args=(r, world, os.path.join(tmp, "store"), args, results))
                     for r in range(world)]
            for proc in procs:
                proc.start()
            for proc in procs:
                proc.join()
            if any(proc.exitcode != 0 for proc in procs):
                sys.exit("a rank failed (world %d): exit codes %s" % (world, [proc.exitcode for proc in procs]))
        res = results.get()
        report["worlds"].append(res)
        print("\nall_reduce, %d ranks (float32, in place; slowest rank's mean; median of %d)" % (world, args.repeat))
        print("%10s %12s %12s %11s %14s" % ("size", "tdist us", "gloo us", "gloo/tdist", "tdist busbw"))
        for row in res["rows"]:
            busbw = row["bytes"] * 2 * (world - 1) / world / row["tdist"] if world > 1 else 0
            print("%10s %12.1f %12.1f %11.2f %11.2f GB/s" % (show_size(row["bytes"]), row["tdist"] * 1e6,
                                                          row["gloo"] * 1e6, row["gloo"] / row["tdist"], busbw / 1e9))
        if res["ddp"]:
            d = res["ddp"]
            print("DDP step (MLP 0.4 M params, batch 64): tdist %.2f ms, gloo %.2f ms, gloo/tdist %.2f" % (
                d["tdist"] * 1e3, d["gloo"] * 1e3, d["gloo"] / d["tdist"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
