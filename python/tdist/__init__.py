"""tdist: torch.distributed's API over NumPy arrays (and any object with ``__dlpack__``).

    import numpy as np
    import tdist as dist

    dist.init_process_group("gloo")          # "tdist"; env:// by default
    t = np.ones(4, dtype=np.float32)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)  # in place, no copy
    dist.destroy_process_group()

Arrays are used in place: results are written into the caller's arrays. They must be
C-contiguous (and writable where the operation writes). Every blocking call releases the GIL.
"""
import enum as _enum
from datetime import timedelta as _timedelta

from . import _tdist
from ._tdist import (  # noqa: F401  (re-exported: the public API)
    DistBackendError,
    DistError,
    DistNetworkError,
    DistStoreError,
    DistValueError,
    QueueEmptyError,
    DeviceMesh,
    FileStore,
    Future,
    HashStore,
    PrefixStore,
    ProcessGroup,
    ReduceOp,
    Store,
    TCPStore,
    Work,
    _get_default_group,
    _make_nccl_premul_sum,
    all_gather,
    all_gather_coalesced,
    all_gather_into_tensor,
    all_reduce,
    all_reduce_coalesced,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    destroy_process_group,
    gather,
    get_backend,
    get_global_rank,
    get_pg_count,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    init_process_group,
    irecv,
    DebugLevel,
    get_debug_level,
    get_node_local_rank,
    set_debug_level,
    set_debug_level_from_env,
    is_available,
    is_gloo_available,
    is_mpi_available,
    is_nccl_available,
    is_initialized,
    is_torchelastic_launched,
    isend,
    monitored_barrier,
    new_group,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    send,
    split_group,
    SHRINK_ABORT,
    SHRINK_DEFAULT,
    admit_new_ranks,
    failed_ranks,
    joined_running_job,
    shrink_group,
)
from .backends import (  # noqa: F401
    Backend,
    BackendConfig,
    get_backend_config,
    get_default_backend_for_device,
    is_backend_available,
    is_ucc_available,
    is_xccl_available,
    supports_complex,
)
from .groups import (  # noqa: F401
    GroupMember,
    _abort_process_group,
    group,
    new_subgroups,
    new_subgroups_by_enumeration,
    set_timeout,
)
from .p2p import P2POp, batch_isend_irecv  # noqa: F401
from .op_options import (  # noqa: F401  (torch's options classes, for ProcessGroup's methods)
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
)
from .single_tensor import all_gather_single, gather_into_tensor, gather_single, reduce_scatter_single  # noqa: F401
from .device_mesh import init_device_mesh  # noqa: F401  (with backend_override; DeviceMesh._flatten)
from .debugging import breakpoint  # noqa: F401,A001  (torch.distributed.breakpoint)
from .elastic import record  # noqa: F401  (torch.distributed.elastic.multiprocessing.errors.record)
from .objects import (  # noqa: F401
    all_gather_object,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from .spawn import ProcessContext, ProcessExitedException, ProcessRaisedException, spawn  # noqa: F401
from .trace import OpSpan, dump_flight_recorder, flight_recorder, flight_recorder_json, op_spans  # noqa: F401



class WorkResult(_enum.IntEnum):
    """torch's WorkResult, the value of ``Work.get_future_result()``'s future: how an operation ended.
    TIMEOUT: it failed at its deadline; COMM_ERROR: any other failure."""

    SUCCESS = 0
    TIMEOUT = 1
    COMM_ERROR = 2
    UNKNOWN = 100


# torch's deprecated spelling of ReduceOp.
reduce_op = ReduceOp


# torch's default timeouts (30 minutes for CPU backends; 5 for stores).
default_pg_timeout = _timedelta(minutes=30)
default_store_timeout = _timedelta(minutes=5)

__version__ = _tdist.__dict__.get("__version__", "0.1.0")


_init_process_group = init_process_group


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Initializes the default process group (see the C++ binding's documentation: help(_tdist)).
    Under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True) env:// joins it in torch's
    protocol (tdist's client speaks it). Without a backend, as torch on a machine without an
    accelerator: "gloo" (tdist, which serves cpu and cuda tensors); name "nccl" or
    "cpu:gloo,cuda:nccl" for NCCL."""
    if backend is None:
        backend = Backend.default_device_backend_map["cpu"]
    _init_process_group(backend, init_method, timeout, world_size, rank, store, group_name, pg_options, device_id)


init_process_group.__doc__ = (_init_process_group.__doc__ or "") + "\n" + (init_process_group.__doc__ or "")

# torch.distributed's submodule of the names above, at its path (tdist.device_mesh is loaded above).
from . import distributed_c10d  # noqa: E402,F401
