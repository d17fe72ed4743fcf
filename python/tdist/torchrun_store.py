"""env:// under torchrun, whose agent hosts the store (TORCHELASTIC_USE_AGENT_STORE=True).

That store is torch's TCPStore, with torch's wire protocol; tdist's C++ client cannot speak it, so
from Python tdist reaches it through torch's own client (whichever torch version launched the job)
wrapped as a tdist Store, under torch's prefix ``/worker/attempt_<TORCHELASTIC_RESTART_COUNT>``.
tdistrun's store needs none of this: it speaks tdist's protocol (TDIST_AGENT_STORE_PREFIX is set).
"""
import os
from datetime import timedelta

from . import _tdist
from .forwarding_store import ForwardingStore


def torchrun_hosts_the_store():
    return (os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
            and not os.environ.get("TDIST_AGENT_STORE_PREFIX"))


class TorchStore(ForwardingStore, _tdist.Store):
    """A tdist Store over a torch.distributed Store."""

    def check(self, keys):
        # torch 1.13's Python Store has no check(): a wait that gives up at once answers it.
        try:
            self._store.wait(list(keys), timedelta(milliseconds=1))
            return True
        except RuntimeError:
            return False

    def wait(self, keys, timeout=None):
        if timeout is not None and not isinstance(timeout, timedelta):
            timeout = timedelta(seconds=timeout)
        super().wait(list(keys), timeout)


def torchrun_store(timeout):
    """(store, rank, world_size) for env:// under torchrun's agent store."""
    try:
        import torch.distributed as torch_dist
    except ImportError as e:
        raise _tdist.DistValueError(
            "init_process_group(env://): TORCHELASTIC_USE_AGENT_STORE=True: torchrun hosts the store at "
            f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} in torch's protocol, and torch "
            f"cannot be imported here to reach it ({e}); launch with tdistrun instead") from e
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    timeout = timeout if timeout is not None else timedelta(minutes=30)
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=timeout)
    tcp = torch_dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size, False, timeout)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return TorchStore(torch_dist.PrefixStore(f"/worker/attempt_{attempt}", tcp)), rank, world_size
