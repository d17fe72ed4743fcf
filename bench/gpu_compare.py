"""CUDA tensors on one GPU shared by N ranks: tdist (backend "tdist" through the PyTorch plugin)
against torch's Gloo on the same CUDA tensors (Gloo stages them through host memory) and against a
device-to-device copy of the same bytes (the physical limit).

    PYTHONPATH=build/python python bench/gpu_compare.py --ranks 4 --json out.json

Needs a torch with CUDA, a GPU, and the plugin built with CUDA (tdist.torch.DEVICES lists "cuda").
On a machine without a GPU it says so and exits 0, having measured nothing.

Each rank is a spawned process on cuda:0. Its default group is "tdist"; it also has a Gloo group
over the same ranks (the compared backend) and another Gloo group of CPU tensors that coordinates
the timing, so the measured groups carry nothing else. For each collective (all_reduce SUM in
place; all_gather of size/N per rank into a list of N views of one buffer), each size and each
backend: warm-up, a barrier, then timed iterations that each end with torch.cuda.synchronize()
(end to end: the call, the device work, the host seeing it done); a cell is the slowest rank's
mean. Iterations adapt to the size (about --seconds per cell, at least 3). The copy row is
rank 0 alone (the others wait) copying `size` bytes with Tensor.copy_ between two device buffers.

Columns: time in us; busbw as nccl-tests defines it (algbw = size / time; x 2(n-1)/n for
all_reduce, x (n-1)/n for all_gather, size being all_gather's output); the copy's rate is
size / time; "gloo/tdist" above 1 means tdist is faster; "busbw/copy" compares tdist's busbw with
the copy's rate.
"""

import argparse
import datetime
import json
import multiprocessing
import os
import sys
import tempfile
import time
import traceback


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def show_size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


# 8 B, then 64 B .. 256 MiB in x4 steps: 1 MiB and 256 MiB (the targets) are among them.
DEFAULT_SIZES = [8] + [64 << (2 * k) for k in range(13) if (64 << (2 * k)) <= 256 << 20]


def busbw_factor(coll, n):
    return 2.0 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n


def _time_cell(fn, ctl, seconds, max_iters):
    """Slowest rank's mean seconds per call of fn (each call ends with a device synchronize)."""
    import torch
    import torch.distributed as dist

    fn()
    torch.cuda.synchronize()
    dist.barrier(group=ctl)
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(once, op=dist.ReduceOp.MAX, group=ctl)  # every rank runs the same count
    iters = int(max(3, min(max_iters, seconds / max(once.item(), 1e-7))))
    for _ in range(min(3, iters)):
        fn()
    torch.cuda.synchronize()
    dist.barrier(group=ctl)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
        torch.cuda.synchronize()
    mean = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(mean, op=dist.ReduceOp.MAX, group=ctl)
    return mean.item(), iters


def _rank_main(rank, world, store_path, args, result_path):
    code = 0
    try:
        os.environ.setdefault("TDIST_JOB_TOKEN", "gpu_compare")
        import torch
        import torch.distributed as dist

        import tdist.torch  # noqa: F401  registers "tdist"

        torch.set_num_threads(1)
        torch.cuda.set_device(0)
        dev = torch.device("cuda", 0)
        dist.init_process_group("tdist", init_method="file://" + store_path, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=args.timeout))
        groups = {"tdist": dist.distributed_c10d._get_default_group(), "gloo": dist.new_group(backend="gloo")}
        ctl = dist.new_group(backend="gloo")
        rows = []
        failed = {}  # (backend, coll) -> the error that stopped it
        for coll in args.colls:
            for nbytes in args.sizes:
                count = max(nbytes // 4, 1)
                if coll == "all_gather":
                    count = max(count // world, 1)
                row = {"coll": coll, "bytes": nbytes}
                for name in args.backends:
                    if (name, coll) in failed:
                        continue
                    if coll == "all_reduce":
                        t = torch.ones(count, device=dev)

                        def fn(t=t, g=groups[name]):
                            dist.all_reduce(t, group=g)
                    else:
                        inp = torch.full((count,), float(rank), device=dev)
                        out = torch.empty(count * world, device=dev)
                        views = list(out.chunk(world))

                        def fn(inp=inp, views=views, g=groups[name]):
                            dist.all_gather(views, inp, group=g)
                    error = None
                    try:
                        row[name], row[name + "_iters"] = _time_cell(fn, ctl, args.seconds, args.max_iters)
                    except Exception as e:  # noqa: BLE001  the others go on; the table says why
                        error = "rank %d: %s: %s" % (rank, type(e).__name__, (str(e).splitlines() or [""])[0][:300])
                    # Every rank drops the pair if one failed, so that all run the same calls after.
                    ok = torch.tensor([0 if error else 1])
                    dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=ctl)
                    if ok.item() == 0:
                        failed[(name, coll)] = error or "failed on another rank (its error is in the log)"
                        if error:
                            print("gpu_compare: %s %s: %s" % (name, coll, error), file=sys.stderr, flush=True)
                        row.pop(name, None)
                if coll == args.colls[0]:
                    # The copy of the same bytes: rank 0 alone on the GPU.
                    a = torch.ones(max(nbytes // 4, 1), device=dev)
                    b = torch.empty_like(a)
                    copy = torch.zeros(1, dtype=torch.float64)
                    dist.barrier(group=ctl)
                    if rank == 0:
                        b.copy_(a)
                        torch.cuda.synchronize()
                        start = time.perf_counter()
                        b.copy_(a)
                        torch.cuda.synchronize()
                        iters = int(max(3, min(args.max_iters, args.seconds / max(time.perf_counter() - start, 1e-7))))
                        start = time.perf_counter()
                        for _ in range(iters):
                            b.copy_(a)
                            torch.cuda.synchronize()
                        copy[0] = (time.perf_counter() - start) / iters
                    dist.broadcast(copy, src=0, group=ctl)
                    row["copy"] = copy.item()
                rows.append(row)
        if rank == 0:
            info = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
                    "world": world, "rows": rows, "failed": {"%s %s" % k: v for k, v in failed.items()}}
            with open(result_path, "w") as f:
                json.dump(info, f)
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def print_tables(res, out=sys.stdout):
    world = res["world"]
    copies = {r["bytes"]: r["copy"] for r in res["rows"] if "copy" in r}
    print("GPU %s, torch %s (CUDA %s), %d ranks on cuda:0" % (res["gpu"], res["torch"], res["cuda"], world), file=out)
    for coll in dict.fromkeys(r["coll"] for r in res["rows"]):
        print("\n%s, %d ranks on one GPU (float32; slowest rank's mean, end to end)" % (coll, world), file=out)
        print("%10s %11s %11s %10s %12s %11s %11s %10s" % ("size", "tdist us", "gloo us", "gloo/tdist", "tdist busbw",
                                                          "copy us", "copy GB/s", "busbw/copy"), file=out)
        for r in (r for r in res["rows"] if r["coll"] == coll):
            n, f = r["bytes"], busbw_factor(coll, world)
            td, gl, cp = r.get("tdist"), r.get("gloo"), copies.get(n)

            def us(v):
                return "%11.1f" % (v * 1e6) if v else "%11s" % "-"
            busbw = n * f / td / 1e9 if td else None
            rate = n / cp / 1e9 if cp else None
            print("%10s %s %s %10s %12s %s %11s %10s" % (
                show_size(n), us(td), us(gl), "%.2f" % (gl / td) if td and gl else "-",
                "%.2f GB/s" % busbw if busbw else "-", us(cp), "%.1f" % rate if rate else "-",
                "%.2f" % (busbw / rate) if busbw and rate else "-"), file=out)
    for what, why in res.get("failed", {}).items():
        print("\n%s failed (not measured further): %s" % (what, why), file=out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--sizes", default=None, help="comma-separated sizes (8,1M,256M); default 8 B, 64 B..256 MiB x4")
    p.add_argument("--colls", default="all_reduce,all_gather")
    p.add_argument("--backends", default="tdist,gloo")
    p.add_argument("--seconds", type=float, default=0.2, help="about how long each cell is timed")
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument("--timeout", type=float, default=120, help="the groups' timeout, seconds")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else DEFAULT_SIZES
    args.colls = [c for c in args.colls.split(",") if c]
    args.backends = [b for b in args.backends.split(",") if b]
    for c in args.colls:
        if c not in ("all_reduce", "all_gather"):
            p.error("--colls: all_reduce and all_gather only, not %r" % c)

    import torch

    if not torch.cuda.is_available():
        print("gpu_compare: no GPU here (torch %s: torch.cuda.is_available() is False); nothing measured"
              % torch.__version__)
        return 0
    import tdist.torch

    if "tdist" in args.backends and "cuda" not in tdist.torch.DEVICES:
        print("gpu_compare: the tdist plugin serves %s only (built without CUDA: see CMake's 'PyTorch plugin' "
              "line); measuring gloo and the copy" % tdist.torch.DEVICES)
        args.backends.remove("tdist")

    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="tdist_gpu_compare_") as tmp:
        result_path = os.path.join(tmp, "result.json")
        procs = [ctx.Process(target=_rank_main, args=(r, args.ranks, os.path.join(tmp, "store"), args, result_path))
                 for r in range(args.ranks)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        if any(proc.exitcode != 0 for proc in procs) or not os.path.exists(result_path):
            print("gpu_compare: a rank failed: exit codes %s" % [proc.exitcode for proc in procs])
            return 1
        with open(result_path) as f:
            res = json.load(f)
    res["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    res["command"] = " ".join([os.path.basename(sys.executable)] + sys.argv)
    print_tables(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
