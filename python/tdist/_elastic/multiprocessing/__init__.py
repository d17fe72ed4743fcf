"""tdist.elastic.multiprocessing, at torch.distributed.elastic.multiprocessing's path: its errors
submodule (record, ChildFailedError, ProcessFailure). Processes are started by tdistrun and
tdist.spawn, not by a start_processes here."""
from . import errors  # noqa: F401
