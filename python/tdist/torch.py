"""tdist as a torch.distributed backend.

    import tdist.torch                      # registers backend "tdist" (once)
    torch.distributed.init_process_group("tdist", ...)

Every operation of a "tdist" group (point-to-point, collectives, barrier, and
through them DistributedDataParallel and the object collectives) runs on the
tdist C++ library over the store torch made for the group, whatever the init
method (env://, tcp://, file://, store=). Tensors must be dense, contiguous
CPU tensors, and CUDA tensors where the plugin and libtdist were built with CUDA
(DEVICES lists what the backend is registered for): an operation on CUDA tensors is
ordered after the work queued on torch's current stream, and Work.wait() makes that
stream wait for it without blocking the host, as with NCCL. Errors of tdist
reach Python as RuntimeError with tdist's message (rank, group, operation,
peer). Needs torch 2.x.
"""

import os as _os

import torch
import torch.distributed as _dist

if int(torch.__version__.split(".")[0]) < 2:
    raise ImportError(
        "tdist.torch needs torch 2.x; this interpreter (%s) has torch %s from %s: run the program with "
        "the python of the venv the plugin was built for (scripts/torch_venv.sh prints it)"
        % (__import__("sys").executable, torch.__version__, _os.path.dirname(torch.__file__)))

try:
    from tdist import _tdist_torch
except ImportError as e:  # absent (built only where CMake found torch 2.x) or not loading
    from tdist._plugin_error import explain as _explain

    raise ImportError(_explain(e)) from e

from tdist.forwarding_store import ForwardingStore  # noqa: E402  (after the extension's check)

ProcessGroupTdist = _tdist_torch.ProcessGroupTdist

BACKEND_NAME = "tdist"
# "cuda" too where the extension was built against a torch with CUDA and libtdist has CUDA
# (CUDA tensors then run on tdist's device data paths, ordered on torch's current stream).
DEVICES = ["cpu", "cuda"] if _tdist_torch.serves_cuda() else ["cpu"]


def _create(options, pg_options=None):
    """torch's factory for backend "tdist" (extended API: gets the group's name and global ranks)."""
    if pg_options is not None:
        raise ValueError("tdist backend: pg_options are not supported (got %r)" % (pg_options,))
    timeout = options.timeout
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    return _tdist_torch.create_process_group(
        options.store,
        options.group_rank,
        options.group_size,
        seconds,
        [int(r) for r in options.global_ranks_in_group],
    )


def _register():
    # Registering twice is an error in torch; a reload of this module (or a
    # second import under another name) must not try again.
    if BACKEND_NAME.upper() in getattr(_dist.Backend, "_plugins", {}):
        return
    # devices: what the backend serves, which torch records
    # (Backend.backend_capability) and layers such as DeviceMesh and DTensor
    # look up; it becomes the default for a device no other backend claimed
    # first (torch's own map gives "cuda" to nccl). torch then makes one
    # ProcessGroupTdist per group for all of them.
    _dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True, devices=DEVICES)


def _install_shrink_fix():
    """torch's shrink_group (2.9+) registers the shrunk backend under BackendType.GLOO for CPU groups,
    whatever the backend is; DDP's logger then takes any "gloo" backend for a ProcessGroupGloo and
    crashes on ours. For a tdist backend, make the new group as torch makes the original: a CUSTOM
    backend, on every device tdist serves. Everything else about shrink_group stays torch's."""
    c10d = _dist.distributed_c10d
    original = getattr(c10d, "_create_shrunk_process_group", None)
    if original is None or getattr(original, "_tdist", False):
        return

    def create(new_backend, remaining_ranks, metadata, is_default_group):
        if not isinstance(new_backend, ProcessGroupTdist):
            return original(new_backend, remaining_ranks, metadata, is_default_group)
        group_name = metadata["new_group_name"]
        store = c10d.PrefixStore(f"{group_name}/", metadata["store"].clone())
        new_pg = c10d.ProcessGroup(store, new_backend.rank(), new_backend.size())
        custom = c10d.ProcessGroup.BackendType.CUSTOM
        for device in DEVICES:
            new_pg._register_backend(torch.device(device), custom, new_backend)
        new_pg._set_default_backend(custom)
        if metadata.get("bound_device_id") is not None:
            new_pg.bound_device_id = metadata["bound_device_id"]
        new_pg._set_group_name(group_name)
        new_pg._set_group_desc("default:shrunken" if is_default_group else f"{metadata['original_group_name']}:shrunk")
        return new_pg

    create._tdist = True
    c10d._create_shrunk_process_group = create


class _TdistStoreForTorch(ForwardingStore, _dist.Store):
    """A torch Store over a tdist store: torch's rendezvous and its groups use tdistrun's store."""


_stores_in_use = []


def _launched_by_tdistrun_with_agent_store():
    return (_os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
            and bool(_os.environ.get("TDIST_AGENT_STORE_PREFIX")))


def _register_env_rendezvous():
    """Under tdistrun, env:// connects to the launcher's store through tdist's client, which proves
    the job token (torch's own client, which cannot, is admitted only as TDIST_STORE_TORCH_CLIENTS
    says: docs/store.md), and serves it to torch (for every backend, gloo too). Elsewhere torch's
    handler runs unchanged."""
    import importlib
    _rdzv = importlib.import_module("torch.distributed.rendezvous")  # the module, not torch.distributed.rendezvous()
    torch_env = _rdzv._rendezvous_handlers.get("env")
    if torch_env is None or getattr(torch_env, "_tdist", False):
        return

    def env_handler(url, timeout=_dist.default_pg_timeout, **kwargs):
        if not _launched_by_tdistrun_with_agent_store():
            yield from torch_env(url, timeout=timeout, **kwargs)
            return
        import tdist
        rank = int(_os.environ["RANK"])
        world_size = int(_os.environ["WORLD_SIZE"])
        store = tdist.TCPStore(_os.environ["MASTER_ADDR"], int(_os.environ["MASTER_PORT"]), is_master=False,
                               timeout=timeout, wait_for_workers=False)
        prefixed = tdist.PrefixStore(_os.environ["TDIST_AGENT_STORE_PREFIX"] + "torch", store)
        adapter = _TdistStoreForTorch(prefixed)
        # torch keeps only the C++ half; the Python half (whose methods it calls) must live on.
        _stores_in_use.append(adapter)
        yield (adapter, rank, world_size)
        raise RuntimeError("tdist: env:// under tdistrun does not re-rendezvous (tdistrun restarts the workers)")

    env_handler._tdist = True
    _rdzv._rendezvous_handlers["env"] = env_handler


_register()
_install_shrink_fix()
_register_env_rendezvous()

__all__ = ["ProcessGroupTdist", "BACKEND_NAME", "DEVICES"]


def failed_ranks(group=None, silence=None):
    """tdist.failed_ranks for a torch.distributed group whose backend is tdist: the group ranks that
    failed, the same list on every survivor; call it after an operation raised, then
    ``torch.distributed.shrink_group(that list)`` (docs/fault_tolerance.md). silence: a timedelta or
    seconds (default TDIST_FAILURE_DETECTION_TIMEOUT, 10 s)."""
    import datetime

    pg = group if group is not None else _dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cpu"))
    if not isinstance(backend, ProcessGroupTdist):
        raise ValueError(f"failed_ranks: the group's CPU backend is {type(backend).__name__}, not tdist's")
    if silence is not None and not isinstance(silence, datetime.timedelta):
        silence = datetime.timedelta(seconds=silence)
    return backend.failed_ranks(silence)
