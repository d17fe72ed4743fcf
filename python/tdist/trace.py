"""The flight recorder and the operations as they finish (docs/profiling.md, docs/tracing.md).

    with tdist.op_spans() as spans:
        tdist.all_reduce(t)
    print(spans[0].name, spans[0].bytes, spans[0].duration_us)

Every operation of every group of this process is seen, whichever API issued it (this module, the
PyTorch plugin, C++): a profiler or a timeline can be fed from here without knowing tdist's internals.
"""
import contextlib
import dataclasses
import json
import threading
from typing import Callable, List, Optional, Tuple

from . import _tdist


@dataclasses.dataclass(frozen=True)
class OpSpan:
    """One finished operation. Times are microseconds of the system clock (``time.time() * 1e6``;
    rank 0's clock differs from the others' by ``clock_offset_us`` of a flight recorder dump);
    0 means not reached (an operation that failed while queued has no start)."""

    name: str  # torch's name of the operation: "all_reduce", "send", ...
    group: str  # the group's name ("default_pg", ...)
    seq: int  # the group's sequence number of collectives (or, p2p, of point-to-point operations), from 1
    p2p: bool
    bytes: int  # what this rank contributes
    dtype: str  # "float32", ...; "" for barrier
    shapes: Tuple[Tuple[int, ...], ...]  # input shapes, one per tensor
    out_shapes: Tuple[Tuple[int, ...], ...]  # output shapes where they differ from the inputs, else ()
    root: int  # group rank of the root, or -1
    peer: int  # send/recv: the peer's group rank, or -1
    reduce_op: str  # "sum", ...; or ""
    engine: str  # "transport", "shm", "hierarchical", "mpi"; "" where unknown
    algorithm: str  # "ring", ...; or ""
    state: str  # "completed" or "failed"
    error: str  # the failure's message where state is "failed"
    queued_us: int  # issued by the caller
    start_us: int  # started running
    end_us: int  # completed or failed
    time_resolution_us: int  # 0: to the microsecond; else how coarse the times are (small blocking ops)

    @property
    def duration_us(self) -> int:
        """From start to end (0 if either is missing)."""
        return self.end_us - self.start_us if self.start_us and self.end_us else 0

    @classmethod
    def _from_event(cls, e) -> "OpSpan":
        return cls(name=e.op, group=e.group, seq=e.seq, p2p=e.p2p, bytes=e.bytes, dtype=e.dtype,
                   shapes=tuple(tuple(s) for s in e.shapes), out_shapes=tuple(tuple(s) for s in e.out_shapes),
                   root=e.root, peer=e.peer, reduce_op=e.reduce_op, engine=e.engine, algorithm=e.algorithm,
                   state=e.state, error=e.error, queued_us=e.queued_us,
                   # Where it started is unknown (it failed in the queue), it spans from the issue.
                   start_us=e.started_us or e.queued_us, end_us=e.ended_us,
                   time_resolution_us=e.time_resolution_us)


@contextlib.contextmanager
def op_spans(callback: Optional[Callable[[OpSpan], None]] = None):
    """Sees every operation of this process that ends inside the ``with`` block.

    With ``callback``, calls ``callback(span)`` for each (and yields None); without, yields a list that
    fills with the spans (``with tdist.op_spans() as spans: ...``). The callback runs on the thread
    that ended the operation (tdist's progress thread for an async one), as soon as it ended; keep it
    quick, and do not issue tdist operations from it. Its exceptions go to ``sys.unraisablehook``.
    A collective's span is delivered before its wait returns; an async send or recv's when it is
    waited for (or tested with ``is_completed``). While any observer is registered, each operation
    also pays for building its span (a few allocations, and this call under the GIL).
    """
    collected: Optional[List[OpSpan]] = None if callback is not None else []
    sink = callback if callback is not None else collected.append
    lock = threading.Lock()
    is_open = True

    def observe(event):
        span = OpSpan._from_event(event)
        # The library may still call a removed observer that had already begun: under the lock,
        # nothing reaches the sink once the block has been left.
        with lock:
            if is_open:
                sink(span)

    handle = _tdist.add_op_observer(observe)
    try:
        yield collected
    finally:
        _tdist.remove_op_observer(handle)
        with lock:
            is_open = False


def dump_flight_recorder(path: Optional[str] = None) -> str:
    """Writes every group's flight recorder (docs/trace_format.md) to ``path``, or to this rank's
    file under ``TDIST_FLIGHT_RECORDER_DIR`` (``TORCH_FR_DUMP_TEMP_FILE`` where set); returns the path
    written. DistValueError where no path is given and neither setting is."""
    return _tdist.dump_flight_recorder(path or "")


def flight_recorder_json() -> str:
    """The flight recorder's dump as a JSON string, written nowhere."""
    return _tdist.flight_recorder_json()


def flight_recorder() -> dict:
    """The flight recorder's dump, parsed: ``{"rank": ..., "groups": [{"name": ..., "entries": [...]}]}``."""
    return json.loads(_tdist.flight_recorder_json())
