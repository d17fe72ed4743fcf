"""torch.distributed.breakpoint: stop one rank in pdb while the others wait at a barrier."""
import pdb
import sys

from . import _tdist


def breakpoint(rank: int = 0, skip: int = 0):  # noqa: A001  (torch's name)
    """Rank `rank` enters pdb (reading the terminal, not the launcher's pipe, where it can); every
    rank of the default group then waits at a barrier until it continues. skip: as torch's, the
    first `skip` calls do nothing."""
    global _skipped
    if _skipped < skip:
        _skipped += 1
        return
    if _tdist.get_rank() == rank:
        stdin = sys.stdin
        try:
            sys.stdin = open("/dev/tty")  # noqa: SIM115  (a launcher's workers have no terminal on stdin)
        except OSError:
            pass
        try:
            pdb.Pdb().set_trace(sys._getframe(1))
        finally:
            if sys.stdin is not stdin:
                sys.stdin.close()
                sys.stdin = stdin
    _tdist.barrier()


_skipped = 0
