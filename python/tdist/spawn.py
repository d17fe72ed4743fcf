"""tdist.spawn: start ranks from one program, like torch.multiprocessing.spawn."""
import multiprocessing
import multiprocessing.connection
import os
import secrets
import signal
import socket
import sys
import traceback

from . import _tdist


class ProcessException(Exception):
    """A spawned rank failed; ``error_index`` is its rank, ``pid`` its process id."""

    def __init__(self, msg, error_index, pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A spawned rank raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A spawned rank exited with a non-zero code or was killed by a signal."""

    def __init__(self, msg, error_index, pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _free_port(addr):
    # A port the kernel just handed out; rank 0's TCPStore binds it again right away.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _run_rank(fn, rank, args, error_queue, env, unset=()):
    # Spawned from a launched worker, the children meet among themselves: the
    # launcher's variables (its store, its job) would send rank 0 to the
    # launcher's store instead of serving its own, and every rank would wait there.
    for name in unset:
        os.environ.pop(name, None)
    os.environ.update(env)
    try:
        fn(rank, *args)
    except KeyboardInterrupt:
        pass  # the parent is stopping every rank
    except BaseException:  # noqa: B902 (report SystemExit with a code too)
        error_queue.put(traceback.format_exc())
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # skip atexit handlers that could block on a broken group


class ProcessContext:
    """The spawned ranks; ``join()`` waits for them (spawn(..., join=False) returns one)."""

    def __init__(self, processes, error_queues):
        self.processes = processes
        self.error_queues = error_queues
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def _stop_all(self):
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        for p in self.processes:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()

    def join(self, timeout=None):
        """Waits up to ``timeout`` seconds (None: until something happens). Returns True when every
        rank has exited successfully, False while some still run. When a rank fails, stops the
        others and raises ProcessRaisedException (with its traceback) or ProcessExitedException,
        naming the rank."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            p = self.processes[index]
            p.join()
            if p.exitcode != 0 and failed is None:
                failed = index
        if failed is None:
            return not self.sentinels
        self._stop_all()
        p = self.processes[failed]
        if not self.error_queues[failed].empty():
            tb = self.error_queues[failed].get()
            raise ProcessRaisedException(
                f"\n\n-- Process {failed} terminated with the following error:\n{tb}", failed, p.pid)
        if p.exitcode < 0:
            name = signal.Signals(-p.exitcode).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}", failed, p.pid,
                                         p.exitcode, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {p.exitcode}", failed, p.pid,
                                     p.exitcode)


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn", set_env=True,
          master_addr="127.0.0.1"):
    """Starts ``nprocs`` processes that run ``fn(rank, *args)``, like torch.multiprocessing.spawn.

    With ``set_env`` (tdist's addition, default on) each process gets MASTER_ADDR, MASTER_PORT (a
    free port), RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE, so that
    ``init_process_group()`` with the default ``env://`` just works; a launcher's variables
    (``tdist._tdist._launcher_variables()``) are removed there, so that spawn works inside a worker of
    tdistrun or torchrun too: the children meet among themselves. ``start_method`` is
    multiprocessing's ("spawn" as torch; "fork" starts faster when the parent has no threads).

    With ``join`` (default) returns once every process has exited 0; when one fails, the others are
    stopped and ProcessRaisedException (its traceback) or ProcessExitedException names its rank.
    Without ``join`` returns the ProcessContext.
    """
    if nprocs < 1:
        raise ValueError(f"spawn: nprocs must be >= 1, got {nprocs}")
    ctx = multiprocessing.get_context(start_method)
    port = _free_port(master_addr) if set_env else None
    # One secret for this job unless the caller chose one, so that nobody else can join it.
    token = None
    if set_env and not os.environ.get("TDIST_JOB_TOKEN") and not os.environ.get("TDIST_JOB_TOKEN_FILE"):
        token = secrets.token_hex(32)
    unset = tuple(_tdist._launcher_variables()) if set_env else ()
    processes, error_queues = [], []
    for rank in range(nprocs):
        env = {}
        if set_env:
            env = {"MASTER_ADDR": master_addr, "MASTER_PORT": str(port), "RANK": str(rank),
                   "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nprocs), "LOCAL_WORLD_SIZE": str(nprocs)}
            if token:
                env["TDIST_JOB_TOKEN"] = token
        q = ctx.SimpleQueue()
        p = ctx.Process(target=_run_rank, args=(fn, rank, tuple(args), q, env, unset), daemon=daemon)
        p.start()
        processes.append(p)
        error_queues.append(q)
    context = ProcessContext(processes, error_queues)
    if not join:
        return context
    try:
        while not context.join():
            pass
    except BaseException:
        context._stop_all()
        raise
    return None
