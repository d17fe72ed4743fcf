"""Runs a function on `world` ranks (forked processes) over backend "tdist" (or another one).

Forked, not spawned: the parent has imported torch already, so a rank starts
in milliseconds instead of re-importing torch. A rank's exception comes back
with its traceback; a rank that hangs is killed at the deadline and named.
"""

import datetime
import multiprocessing
import multiprocessing.connection
import os
import socket
import tempfile
import time
import traceback

import torch
import torch.distributed as dist

DEFAULT_TIMEOUT = 120.0  # seconds for a whole run; a healthy one takes a few


def free_port():
    """A port that was free a moment ago (only for init methods that need a number)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def monitored_barrier(**kwargs):
    """dist.monitored_barrier, where this torch lets a backend other than Gloo serve it: torch
    2.11's refuses every other backend itself ("only implemented for GLOO backend"), before
    tdist sees the call. Returns whether it ran."""
    try:
        dist.monitored_barrier(**kwargs)
    except ValueError as e:
        if "only implemented for GLOO" not in str(e):
            raise
        return False
    return True


def _init_kwargs(init, rank, world, shared):
    if init == "file":
        return {"init_method": "file://" + shared, "rank": rank, "world_size": world}
    if init == "tcp":
        return {"init_method": "tcp://127.0.0.1:%d" % shared, "rank": rank, "world_size": world}
    if init == "env":
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(shared), RANK=str(rank), WORLD_SIZE=str(world))
        return {"init_method": "env://"}
    if init == "store":
        store = dist.TCPStore("127.0.0.1", shared, world, False, timeout=datetime.timedelta(seconds=60))
        return {"store": store, "rank": rank, "world_size": world}
    raise ValueError("unknown init %r" % init)


def _rank_main(rank, world, init, shared, backend, fn, args, errors, result_path):
    code = 0
    try:
        torch.set_num_threads(1)  # many ranks share two CPUs
        if backend == "tdist":
            import tdist.torch  # noqa: F401  registers backend "tdist"

        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=60),
                                **_init_kwargs(init, rank, world, shared))
        result = fn(rank, world, *args)
        dist.destroy_process_group()
        # A file, not a queue: a pipe would block a large result until the parent reads it,
        # and the parent reads only after every rank ended.
        torch.save(result, result_path + ".tmp")
        os.rename(result_path + ".tmp", result_path)
    except BaseException:  # noqa: BLE001  every failure goes back to the parent
        errors.put((rank, traceback.format_exc()))
        code = 1
    # Skip the parent's (pytest's) exit handlers, inherited through fork.
    os._exit(code)


def run_ranks(fn, world, *args, init="file", backend="tdist", timeout=DEFAULT_TIMEOUT, start_method="fork"):
    """Runs fn(rank, world, *args) on every rank after init_process_group(backend); returns the
    ranks' return values (which torch.save can write), in rank order.

    start_method "spawn" for ranks that use CUDA: a process that has initialized CUDA cannot
    fork children that use it (fn must then be importable: a module-level function).

    Raises AssertionError with every failing rank's traceback, or naming the
    ranks still running at the deadline.

    env:// and tcp:// need a port number before rank 0 binds it; another test running beside this
    one may take that port in between. Such a run (rank 0's store reports the address in use) is
    started again on a new port, up to three times in all; every other failure is raised at once.
    """
    for attempt in range(3):
        try:
            return _run_ranks_once(fn, world, args, init, backend, timeout, start_method)
        except AssertionError as e:
            lost_port = init in ("env", "tcp") and ("EADDRINUSE" in str(e) or "Address already in use" in str(e))
            if not lost_port or attempt == 2:
                raise


def _run_ranks_once(fn, world, args, init, backend, timeout, start_method):
    ctx = multiprocessing.get_context(start_method)
    errors = ctx.SimpleQueue()
    server = None
    with tempfile.TemporaryDirectory(prefix="tdist_torch_") as tmp:
        if init == "file":
            shared = os.path.join(tmp, "store")
        elif init == "store":
            server = dist.TCPStore("127.0.0.1", 0, world, True, wait_for_workers=False)
            shared = server.port
        else:
            shared = free_port()
        result_paths = [os.path.join(tmp, "result.%d" % r) for r in range(world)]
        procs = [ctx.Process(target=_rank_main,
                             args=(r, world, init, shared, backend, fn, args, errors, result_paths[r]))
                 for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        failed_at = None
        while any(p.is_alive() for p in procs):
            now = time.monotonic()
            if now > deadline:
                break
            if failed_at is None and any(p.exitcode not in (None, 0) for p in procs):
                failed_at = now
            # Once a rank failed, the others get a few seconds to fail or finish, then go.
            if failed_at is not None and now - failed_at > 10:
                break
            multiprocessing.connection.wait([p.sentinel for p in procs if p.is_alive()], timeout=0.5)
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()
        del server
        results = [torch.load(p, weights_only=False) if os.path.exists(p) else None for p in result_paths]
    reports = []
    while not errors.empty():
        reports.append(errors.get())
    reports.sort()
    msg = "".join("\n--- rank %d ---\n%s" % (r, tb) for r, tb in reports)
    if hung and failed_at is None:
        raise AssertionError("ranks %s of %d still running after %.0f s%s" % (hung, world, timeout, msg))
    bad = [r for r, p in enumerate(procs) if p.exitcode != 0 and r not in hung]
    if reports or bad:
        raise AssertionError("ranks %s failed%s" % (sorted(set(bad + [r for r, _ in reports])), msg))
    return results
