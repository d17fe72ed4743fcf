"""torch.distributed.distributed_c10d at its path: ``from tdist.distributed_c10d import new_group``
works for every name of torch's module (its ``__all__``, torch 2.15) that tdist has, and for the
private ``_get_default_group`` that ported programs import from there.

The names tdist lacks (``get_backend_impl``: tdist has no per-device backend objects for Python;
``record_comm``: no profiling names; see docs/torch_names.md) raise ImportError as any missing name
does; ``missing_torch_names`` lists them.
"""
import tdist as _tdist_package  # complete: this module is imported last by tdist/__init__.py

# torch.distributed.distributed_c10d.__all__ (torch 2.15).
_TORCH_NAMES = (
    "AllToAllOptions", "AllreduceCoalescedOptions", "AllreduceOptions", "Backend", "BackendConfig",
    "BarrierOptions", "BroadcastOptions", "DebugLevel", "GatherOptions", "GroupMember", "GroupName", "P2POp",
    "PrefixStore", "ProcessGroup", "ReduceOp", "ReduceOptions", "ReduceScatterOptions", "ScatterOptions", "Store",
    "Work", "all_gather", "all_gather_coalesced", "all_gather_into_tensor", "all_gather_object", "all_gather_single",
    "all_reduce", "all_reduce_coalesced", "all_to_all", "all_to_all_single", "barrier", "batch_isend_irecv",
    "broadcast", "broadcast_object_list", "default_pg_timeout", "destroy_process_group", "gather",
    "gather_into_tensor", "gather_object", "gather_single", "get_backend", "get_backend_config", "get_backend_impl",
    "get_debug_level", "get_default_backend_for_device", "get_global_rank", "get_group_rank", "get_node_local_rank",
    "get_pg_count", "get_process_group_ranks", "get_rank", "get_world_size", "group", "init_process_group", "irecv",
    "is_backend_available", "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available",
    "is_torchelastic_launched", "is_ucc_available", "is_xccl_available", "isend", "monitored_barrier", "new_group",
    "new_subgroups", "new_subgroups_by_enumeration", "record_comm", "recv", "recv_object_list", "reduce",
    "reduce_op", "reduce_scatter", "reduce_scatter_single", "reduce_scatter_tensor", "scatter",
    "scatter_object_list", "send", "send_object_list", "set_timeout", "shrink_group", "split_group",
    "supports_complex",
)

__all__ = [name for name in _TORCH_NAMES if hasattr(_tdist_package, name)]
missing_torch_names = [name for name in _TORCH_NAMES if not hasattr(_tdist_package, name)]
globals().update({name: getattr(_tdist_package, name) for name in __all__})
_get_default_group = _tdist_package._get_default_group
_abort_process_group = _tdist_package._abort_process_group
SHRINK_DEFAULT = _tdist_package.SHRINK_DEFAULT
SHRINK_ABORT = _tdist_package.SHRINK_ABORT
