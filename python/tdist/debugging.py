"""torch.distributed.breakpoint: stop one rank in pdb while the others wait at a barrier."""
import contextlib
import os
import pdb
import signal
import sys
import traceback

from . import _tdist


@contextlib.contextmanager
def _terminal():
    """The controlling terminal, for reading and writing, made this process's foreground for the
    while: a launcher (tdistrun, torchrun) gives its workers pipes for stdin and stdout and their
    own process groups, and a background group that reads the terminal is stopped (SIGTTIN).
    Yields (input, output) files, or None where there is no terminal."""
    tty_in = tty_out = None
    try:
        tty_in = open("/dev/tty")  # noqa: SIM115  (one read-write text file would need to seek)
        tty_out = open("/dev/tty", "w")  # noqa: SIM115
    except OSError:
        if tty_in is not None:
            tty_in.close()
        yield None
        return
    fd = tty_in.fileno()
    old_ttou = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # tcsetpgrp from the background
    try:
        foreground = os.tcgetpgrp(fd)
        os.tcsetpgrp(fd, os.getpgrp())
    except OSError:
        foreground = None
    try:
        yield tty_in, tty_out
    finally:
        if foreground is not None:
            try:
                os.tcsetpgrp(fd, foreground)
            except OSError:
                pass
        signal.signal(signal.SIGTTOU, old_ttou)
        tty_in.close()
        tty_out.close()


class _TerminalPdb(pdb.Pdb):
    """pdb that talks to the terminal while it stops (only then: between stops the program's own
    stdin and stdout are untouched)."""

    def interaction(self, *args, **kwargs):
        with _terminal() as tty:
            if tty is None:
                return super().interaction(*args, **kwargs)
            saved = self.stdin, self.stdout, self.use_rawinput
            self.stdin, self.stdout = tty
            self.use_rawinput = False
            try:
                return super().interaction(*args, **kwargs)
            finally:
                self.stdin, self.stdout, self.use_rawinput = saved


def breakpoint(rank: int = 0, skip: int = 0, timeout_s=3600):  # noqa: A001  (torch's name)
    """torch's breakpoint: rank `rank` enters pdb (reading the terminal, not the launcher's pipe,
    where it can); every rank of the default group then waits at a barrier until it continues.
    skip: the first `skip` calls do nothing (counted, as torch counts them, per exception being
    handled, or none). timeout_s (None: leave them): the timeout of every group of this process
    from now on (set_timeout), so that the waiting ranks' barrier, and whatever the program runs
    on other groups right after, outlasts the debugging session."""
    if skip > 0:
        key = hash(traceback.format_exc())
        _skipped[key] = _skipped.get(key, 0) + 1
        if _skipped[key] <= skip:
            return
    if timeout_s is not None:
        from datetime import timedelta

        for group in _tdist._all_process_groups():
            if isinstance(group, _tdist.ProcessGroup) and group.is_member():
                group.set_timeout(timedelta(seconds=timeout_s))
    if _tdist.get_rank() == rank:
        debugger = _TerminalPdb()
        debugger.message(f"\n!!! rank {rank} stopped in tdist.breakpoint(); the other ranks wait at a barrier. "
                         "Type 'up' to reach the caller's frame, 'c' to go on.\n")
        debugger.set_trace()
    _tdist.barrier()


_skipped = {}  # calls seen per exception being handled (traceback text), as torch's _breakpoint_cache
