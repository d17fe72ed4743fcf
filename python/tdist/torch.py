"""tdist as a torch.distributed backend.

    import tdist.torch                      # registers backend "tdist" (once)
    torch.distributed.init_process_group("tdist", ...)

Every operation of a "tdist" group (point-to-point, collectives, barrier, and
through them DistributedDataParallel and the object collectives) runs on the
tdist C++ library over the store torch made for the group, whatever the init
method (env://, tcp://, file://, store=). Tensors must be dense, contiguous
CPU tensors. Errors of tdist reach Python as RuntimeError with tdist's message
(rank, group, operation, peer).
"""

import torch
import torch.distributed as _dist

try:
    from tdist import _tdist_torch
except ImportError as e:  # built only where libtorch-dev was found
    raise ImportError("tdist.torch: the extension tdist._tdist_torch is missing or does not load (%s); "
                      "it is built when Debian's libtorch-dev, python3-torch and pybind11-dev are installed"
                      % (e,)) from e

ProcessGroupTdist = _tdist_torch.ProcessGroupTdist

BACKEND_NAME = "tdist"


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
        str(options.group_id),
        [int(r) for r in options.global_ranks_in_group],
    )


def _register():
    # Registering twice is an error in torch; a reload of this module (or a
    # second import under another name) must not try again.
    if BACKEND_NAME.upper() in getattr(_dist.Backend, "_plugins", {}):
        return
    _dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True)


_register()

__all__ = ["ProcessGroupTdist", "BACKEND_NAME"]
