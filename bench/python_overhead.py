"""The Python call overhead, in one run: tdist's Python module against mpi4py, and the PyTorch plugin
against torch's Gloo, side by side.

    PYTHONPATH=build/python $(scripts/torch_venv.sh | tail -n 1) bench/python_overhead.py
    ... --worlds 2,4 --sizes 8,4K,64K,1M,16M --repeat 3 --parts numpy,torch --json out.json

(a) NumPy: N ranks under `mpirun --allow-run-as-root --oversubscribe --bind-to none -n N`, each
running this file with the Python that has mpi4py (--mpi4py-python, default the venv that
bench/mpi4py_venv.sh makes). Every rank holds both libraries: tdist's module (joined through
env://, RANK and WORLD_SIZE from OMPI_COMM_WORLD_*, MASTER_ADDR/PORT from this script) and mpi4py's
COMM_WORLD, and times the same calls on the same NumPy float32 buffers: all_reduce (in place:
tdist.all_reduce / comm.Allreduce(MPI.IN_PLACE, buf)), broadcast from rank 0 (tdist.broadcast /
comm.Bcast), all_gather of `size` bytes per rank (tdist.all_gather_into_tensor / comm.Allgather),
send/recv ping-pong between ranks 2k and 2k+1, timed per half round trip (tdist.send+recv /
comm.Send+Recv). "async": tdist's async_op=True (isend/irecv) then wait(), mpi4py's Iallreduce,
Ibcast, Iallgather, Isend/Irecv then Wait(). Without that Python (or without mpi4py in it) the
mpi4py column is skipped, with a line saying so, and the ranks are started as plain processes.

(b) torch: bench/torch_plugin_vs_gloo.py with every op (all_reduce, broadcast,
all_gather_into_tensor, send_recv) in both modes, without its DDP step.

Both parts measure alike (bench/call_timing.py): per op, size and mode, each library in turn,
--repeat times, alternating which goes first; a measurement is the slowest rank's mean per call
over a number of calls that depends only on the size; a cell is the median of the repeats. The
physical reference printed first: one core's memcpy of 16 MiB.
"""

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from call_timing import alternating_medians, iterations, parse_size, print_table, time_calls  # noqa: E402

DEFAULT_MPI4PY_PYTHON = "/root/.cache/tdist/venv-mpi4py/bin/python"
NUMPY_OPS = ("all_reduce", "broadcast", "all_gather", "send_recv")


# ---- one rank of part (a) ----

def numpy_steps(np, tdist, MPI, comm, op, mode, nbytes, rank, world):
    """{library: (step, calls per step)} for one op on buffers both libraries share."""
    n = max(nbytes // 4, 1)
    # Zeros for all_reduce, whose repeated sums then stay finite (its first call writes every page);
    # ones elsewhere, as NumPy arrays usually are made: np.zeros leaves the pages untouched, all
    # mapped to the kernel's one zero page, which flatters whoever reads the input in place, and
    # outside the transparent huge pages that np.ones and np.empty get from 4 MiB on
    # (docs/tuning_log.md: One copy only below 256 KiB).
    buf = np.zeros(n, dtype=np.float32) if op == "all_reduce" else np.ones(n, dtype=np.float32)
    asy = mode == "async"
    steps = {}
    if op == "all_reduce":
        steps["tdist"] = ((lambda: tdist.all_reduce(buf, async_op=True).wait()) if asy else
                          (lambda: tdist.all_reduce(buf)))
        if comm is not None:
            steps["mpi4py"] = ((lambda: comm.Iallreduce(MPI.IN_PLACE, buf).Wait()) if asy else
                               (lambda: comm.Allreduce(MPI.IN_PLACE, buf)))
        return {k: (v, 1) for k, v in steps.items()}
    if op == "broadcast":
        steps["tdist"] = ((lambda: tdist.broadcast(buf, src=0, async_op=True).wait()) if asy else
                          (lambda: tdist.broadcast(buf, src=0)))
        if comm is not None:
            steps["mpi4py"] = (lambda: comm.Ibcast(buf, root=0).Wait()) if asy else (lambda: comm.Bcast(buf, root=0))
        return {k: (v, 1) for k, v in steps.items()}
    if op == "all_gather":
        out = np.zeros(n * world, dtype=np.float32)
        steps["tdist"] = ((lambda: tdist.all_gather_into_tensor(out, buf, async_op=True).wait()) if asy else
                          (lambda: tdist.all_gather_into_tensor(out, buf)))
        if comm is not None:
            steps["mpi4py"] = ((lambda: comm.Iallgather(buf, out).Wait()) if asy else
                               (lambda: comm.Allgather(buf, out)))
        return {k: (v, 1) for k, v in steps.items()}
    peer = rank ^ 1
    if peer >= world:
        idle = (lambda: None, 2)
        return {"tdist": idle, "mpi4py": idle} if comm is not None else {"tdist": idle}
    pairs = {"tdist": ((lambda: tdist.isend(buf, peer).wait()), (lambda: tdist.irecv(buf, peer).wait())) if asy else
             ((lambda: tdist.send(buf, peer)), (lambda: tdist.recv(buf, peer)))}
    if comm is not None:
        pairs["mpi4py"] = (((lambda: comm.Isend(buf, peer).Wait()), (lambda: comm.Irecv(buf, peer).Wait())) if asy else
                           ((lambda: comm.Send(buf, peer)), (lambda: comm.Recv(buf, peer))))
    for name, (send, recv) in pairs.items():
        steps[name] = ((lambda s=send, r=recv: (s(), r())) if rank % 2 == 0 else (lambda s=send, r=recv: (r(), s())), 2)
    return steps


def numpy_rank(args):
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    os.environ.setdefault("TDIST_JOB_TOKEN", "bench")  # one job, said once: no warning per rank
    import numpy as np

    import tdist

    MPI = comm = None
    if args.with_mpi4py:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    tdist.init_process_group("tdist", timeout=datetime.timedelta(seconds=300))
    if comm is not None:
        slowest = lambda s: comm.allreduce(s, op=MPI.MAX)  # noqa: E731
        barriers = {"tdist": tdist.barrier, "mpi4py": comm.Barrier}
    else:
        def slowest(s):
            a = np.array([s])
            tdist.all_reduce(a, op=tdist.ReduceOp.MAX)
            return float(a[0])
        barriers = {"tdist": tdist.barrier}
    for op in args.ops:
        for nbytes in args.sizes:
            row = {"world": world, "op": op, "bytes": nbytes}
            for mode in args.modes:
                steps = numpy_steps(np, tdist, MPI, comm, op, mode, nbytes, rank, world)
                row[mode] = alternating_medians(
                    tuple(steps), args.repeat,
                    lambda name: time_calls(steps[name][0], iterations(nbytes), barriers[name], slowest, steps[name][1]))
            if rank == 0:
                print("RESULT " + json.dumps(row), flush=True)
    tdist.destroy_process_group()


# ---- the driver ----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def has_mpi4py(python):
    if not python or not os.access(python, os.X_OK):
        return False
    return subprocess.run([python, "-c", "import mpi4py.MPI"], capture_output=True).returncode == 0


def run_numpy_world(world, args, mpi4py_python):
    import tdist

    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(tdist.__file__)),
                                           os.environ.get("PYTHONPATH", "")]),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    rank_args = [os.path.abspath(__file__), "--numpy-rank", "--sizes", ",".join(map(str, args.sizes)),
                 "--modes", ",".join(args.modes), "--numpy-ops", ",".join(args.numpy_ops),
                 "--repeat", str(args.repeat)]
    if mpi4py_python:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", str(world),
               mpi4py_python] + rank_args + ["--with-mpi4py"]
        procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)]
    else:
        procs = [subprocess.Popen([sys.executable] + rank_args, env=dict(env, RANK=str(r), WORLD_SIZE=str(world)),
                                  stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL, text=True)
                 for r in range(world)]
    rows = []
    for line in procs[0].stdout:
        if line.startswith("RESULT "):
            rows.append(json.loads(line[len("RESULT "):]))
        else:
            sys.stdout.write(line)
    codes = [p.wait() for p in procs]
    if any(codes):
        sys.exit("a rank failed (NumPy part, world %d): exit codes %s" % (world, codes))
    return rows


def memcpy_bandwidth():
    import numpy as np

    a, b = np.ones(4 << 20, dtype=np.float32), np.empty(4 << 20, dtype=np.float32)
    for _ in range(3):
        np.copyto(b, a)
    start = time.perf_counter()
    for _ in range(20):
        np.copyto(b, a)
    return 20 * a.nbytes / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--sizes", default="8,4K,64K,1M,16M")
    p.add_argument("--modes", default="blocking,async")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--parts", default="numpy,torch", help="numpy (tdist vs mpi4py), torch (plugin vs Gloo)")
    p.add_argument("--numpy-ops", default=",".join(NUMPY_OPS))
    p.add_argument("--torch-ops", default="all_reduce,broadcast,all_gather_into_tensor,send_recv")
    p.add_argument("--mpi4py-python", default=DEFAULT_MPI4PY_PYTHON,
                   help="a Python with mpi4py and NumPy (bench/mpi4py_venv.sh makes the default one)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--numpy-rank", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--with-mpi4py", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    args.modes = args.modes.split(",")
    args.numpy_ops = args.numpy_ops.split(",")
    if args.numpy_rank:
        args.ops = args.numpy_ops
        numpy_rank(args)
        return
    parts = args.parts.split(",")
    worlds = [int(w) for w in args.worlds.split(",")]
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "cores": os.cpu_count(), "load": os.getloadavg(), "memcpy_GBps": memcpy_bandwidth() / 1e9}
    print("%s, %d cores, load average %.1f %.1f %.1f; memcpy (one core, 16 MiB): %.1f GB/s" % (
        report["date"], report["cores"], *report["load"], report["memcpy_GBps"]))
    if "numpy" in parts:
        mpi4py_python = args.mpi4py_python if has_mpi4py(args.mpi4py_python) else None
        if mpi4py_python is None:
            print("mpi4py: not found (%s cannot import mpi4py.MPI; bash bench/mpi4py_venv.sh makes that venv): "
                  "the mpi4py column is skipped" % args.mpi4py_python)
        report["numpy"] = []
        for world in worlds:
            rows = run_numpy_world(world, args, mpi4py_python)
            report["numpy"].extend(rows)
            print_table("tdist's Python module vs mpi4py, %d ranks (NumPy float32 buffers; slowest rank's mean per "
                        "call; median of %d)" % (world, args.repeat), rows, "tdist", "mpi4py")
    if "torch" in parts:
        import torch

        import torch_plugin_vs_gloo as plugin_bench

        torch.set_num_threads(1)
        targs = argparse.Namespace(sizes=args.sizes, ops=args.torch_ops.split(","), modes=args.modes,
                                   repeat=args.repeat, ddp_steps=0)
        report["torch"] = {"version": torch.__version__, "worlds": []}
        for world in worlds:
            res = plugin_bench.run_world(world, targs)
            report["torch"]["worlds"].append(res)
            plugin_bench.print_world(res, args.repeat)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
