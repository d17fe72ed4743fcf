"""The PyTorch plugin (backend "tdist") against torch's Gloo, through torch.distributed, in one run.

    PYTHONPATH=build/python $(scripts/torch_venv.sh | tail -n 1) bench/torch_plugin_vs_gloo.py
    ... --worlds 2,4 --sizes 8,64K,1M,16M --repeat 5 --ddp-steps 20 --json out.json
    ... --ops all_reduce,broadcast,all_gather_into_tensor,send_recv --modes blocking,async

Each rank is a forked process (one host) whose default group is "tdist" and which also has a
Gloo group over the same ranks: both backends meet the machine in the same state, the same
tensors, the same torch calls (dist.all_reduce, dist.broadcast from rank 0,
dist.all_gather_into_tensor of `size` bytes per rank, dist.send/dist.recv ping-pong between ranks
2k and 2k+1, timed per half round trip; on CPU float32 tensors; "blocking": the plain call,
"async": async_op=True or isend/irecv, then wait()). For each world size, op, size and mode the
two are measured in turn, `--repeat` times, alternating which goes first; a measurement is the
slowest rank's mean time per call over a number of calls that depends only on the size
(bench/call_timing.py); a cell is the median of the repeats. "gloo/tdist" above 1 means tdist is
faster. bench/python_overhead.py runs this with every op and mode beside its NumPy/mpi4py table.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from call_timing import alternating_medians, iterations, parse_size, print_table, show_size, time_calls  # noqa: E402


def slowest(seconds, gloo):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return t.item()


OPS = ("all_reduce", "broadcast", "all_gather_into_tensor", "send_recv")


def make_step(op, mode, nbytes, group, rank, world):
    """One step of `op` on fresh CPU float32 tensors of `nbytes` per rank (zeros, so that repeated
    sums stay finite) and the number of calls it makes. async: the call with async_op=True (isend,
    irecv), then wait() on its Work."""
    n = max(nbytes // 4, 1)
    t = torch.zeros(n)
    if op == "all_reduce":
        if mode == "async":
            return (lambda: dist.all_reduce(t, group=group, async_op=True).wait()), 1
        return (lambda: dist.all_reduce(t, group=group)), 1
    if op == "broadcast":
        if mode == "async":
            return (lambda: dist.broadcast(t, src=0, group=group, async_op=True).wait()), 1
        return (lambda: dist.broadcast(t, src=0, group=group)), 1
    if op == "all_gather_into_tensor":
        out = torch.zeros(n * world)
        if mode == "async":
            return (lambda: dist.all_gather_into_tensor(out, t, group=group, async_op=True).wait()), 1
        return (lambda: dist.all_gather_into_tensor(out, t, group=group)), 1
    # send_recv: ranks 2k and 2k+1 ping-pong (the even one sends first); a call is half a round trip.
    peer = rank ^ 1
    if peer >= world:
        return (lambda: None), 2
    if mode == "async":
        send = lambda: dist.isend(t, peer, group=group).wait()  # noqa: E731
        recv = lambda: dist.irecv(t, peer, group=group).wait()  # noqa: E731
    else:
        send = lambda: dist.send(t, peer, group=group)  # noqa: E731
        recv = lambda: dist.recv(t, peer, group=group)  # noqa: E731
    if rank % 2 == 0:
        return (lambda: (send(), recv())), 2
    return (lambda: (recv(), send())), 2


def time_op(op, mode, nbytes, group, gloo):
    step, calls = make_step(op, mode, nbytes, group, dist.get_rank(), dist.get_world_size())
    return time_calls(step, iterations(nbytes), lambda: dist.barrier(group=gloo), lambda s: slowest(s, gloo), calls)


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
    groups = {"tdist": dist.distributed_c10d._get_default_group(), "gloo": gloo}
    rows = []
    for op in args.ops:
        for nbytes in args.sizes:
            row = {"world": world, "op": op, "bytes": nbytes}
            for mode in args.modes:
                row[mode] = alternating_medians(("tdist", "gloo"), args.repeat,
                                                lambda name: time_op(op, mode, nbytes, groups[name], gloo))
            rows.append(row)
    ddp = {}
    if args.ddp_steps:
        for rep in range(2):
            for name in (("tdist", "gloo") if rep == 0 else ("gloo", "tdist")):
                ddp.setdefault(name, []).append(ddp_step_times(groups[name], gloo, args.ddp_steps))
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


def run_world(world, args):
    """Forks `world` ranks, measures, and returns rank 0's results (exits if a rank failed)."""
    ctx = multiprocessing.get_context("fork")
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
    return results.get()


def print_world(res, repeat):
    world = res["world"]
    print_table("the plugin (tdist) vs torch's Gloo, %d ranks (CPU float32 tensors through torch.distributed; "
                "slowest rank's mean per call; median of %d)" % (world, repeat), res["rows"], "tdist", "gloo")
    for row in res["rows"]:
        if row["op"] == "all_reduce" and "blocking" in row and world > 1:
            t = row["blocking"]["tdist"]
            print("  all_reduce %s: tdist busbw %.2f GB/s" % (show_size(row["bytes"]),
                                                             row["bytes"] * 2 * (world - 1) / world / t / 1e9))
    if res["ddp"]:
        d = res["ddp"]
        print("DDP step (MLP 0.4 M params, batch 64): tdist %.2f ms, gloo %.2f ms, gloo/tdist %.2f" % (
            d["tdist"] * 1e3, d["gloo"] * 1e3, d["gloo"] / d["tdist"]))


def add_options(p):
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--sizes", default="8,64K,1M,16M")
    p.add_argument("--ops", default="all_reduce", help="comma-separated, of " + ",".join(OPS))
    p.add_argument("--modes", default="blocking", help="blocking,async (async: async_op=True, then wait())")
    p.add_argument("--repeat", type=int, default=5)


def parse_options(args):
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    args.ops = args.ops.split(",")
    args.modes = args.modes.split(",")
    for op in args.ops:
        if op not in OPS:
            sys.exit("unknown op %r (known: %s)" % (op, ", ".join(OPS)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_options(p)
    p.add_argument("--ddp-steps", type=int, default=20)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    parse_options(args)
    torch.set_num_threads(1)
    copy_bw = memcpy_bandwidth()
    print("torch %s, %d cores; memcpy (one core, 16 MiB): %.1f GB/s" % (torch.__version__, os.cpu_count(), copy_bw / 1e9))
    report = {"torch": torch.__version__, "cores": os.cpu_count(), "memcpy_GBps": copy_bw / 1e9, "worlds": []}
    for world in [int(w) for w in args.worlds.split(",")]:
        res = run_world(world, args)
        report["worlds"].append(res)
        print_world(res, args.repeat)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
