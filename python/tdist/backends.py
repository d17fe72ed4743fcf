"""Backend names, as torch.distributed has them: the Backend class (with register_backend for
backends written in Python), the availability checks, the default backend of a device,
BackendConfig and get_backend_config."""
import warnings

from . import _tdist

# The backends this build of tdist carries and the devices each serves ("gloo" is "tdist").
_BUILTIN_DEVICES = {"tdist": ["cpu", "cuda"], "gloo": ["cpu", "cuda"], "mpi": ["cpu"], "nccl": ["cuda"]}
# Names torch reserves: register_backend refuses them, as it cannot replace torch's own.
_RESERVED = {"undefined", "tdist", "gloo", "nccl", "mpi", "ucc", "xccl", "fake"}


class Backend(str):
    """A backend name, as torch.distributed.Backend: lower case; get_backend() answers the name
    init_process_group was given, so get_backend() == Backend.GLOO after init_process_group("gloo")
    (which runs tdist)."""

    TDIST = "tdist"
    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"
    UCC = "ucc"
    XCCL = "xccl"
    UNDEFINED = "undefined"

    backend_list = [UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI, TDIST]
    # torch's table: the backend a device gets when init_process_group names none. tdist has no
    # xccl: is_xccl_available() says so, and init_process_group("xccl") names the backends it has.
    default_device_backend_map = {"cpu": GLOO, "cuda": NCCL, "xpu": XCCL, "mps": GLOO}
    backend_capability = {TDIST: ["cpu", "cuda"], GLOO: ["cpu", "cuda"], NCCL: ["cuda"], XCCL: ["xpu"],
                          UCC: ["cpu", "cuda"], MPI: ["cpu"]}

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, got {type(name).__name__}")
        return super().__new__(cls, name.lower())

    @classmethod
    def register_backend(cls, name, func, extended_api=False, devices=None):
        """torch's Backend.register_backend for a backend written in Python.

        ``func(store, rank, world_size, timeout)`` (with ``extended_api``: ``func(opts, None)``, opts
        having store, group_rank, group_size, timeout, group_id, global_ranks_in_group) is called by
        every member of each group made with this backend and returns the object that carries its
        operations: methods of torch's ProcessGroup names and forms, ``allreduce(tensors, opts)``
        (opts.reduceOp, opts.timeout), ``broadcast(tensors, opts)`` (opts.rootRank), ``barrier(opts)``,
        ``allgather(output_lists, inputs, opts)``, ``reduce``, ``gather``, ``scatter``,
        ``reduce_scatter``, ``alltoall``, ``alltoall_base``, ``_allgather_base``,
        ``_reduce_scatter_base``, ``send(tensors, dst, tag)``, ``recv(tensors, src, tag)``. Tensors
        arrive as NumPy views of the caller's arrays, valid during the call; ranks are group
        ranks. A method may return an object with ``wait()`` (waited for before the operation
        returns) or None. Only cpu tensors (devices: "cpu", the default).
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"register_backend: the name must be a non-empty string, got {name!r}")
        lower = name.lower()
        if lower in _RESERVED:
            raise ValueError(f"register_backend: '{name}' is a built-in backend name of torch.distributed; "
                             f"register the Python backend under another name")
        if not callable(func):
            raise TypeError(f"register_backend('{name}'): func must be callable, got {type(func).__name__}")
        if devices is None:
            warnings.warn(f"Device capability of {name} unspecified, assuming `cpu`. Please specify it via the "
                          f"`devices` argument of `register_backend`.", stacklevel=2)
            devices = ["cpu"]
        elif isinstance(devices, str):
            devices = [devices]
        devices = list(devices)
        creator = func
        if extended_api:
            import types

            def creator(store, rank, world_size, timeout):
                opts = types.SimpleNamespace(store=store, group_rank=rank, group_size=world_size, timeout=timeout,
                                             group_id="", global_ranks_in_group=[])
                return func(opts, None)
        _tdist._register_python_backend(lower, creator, devices)
        if not hasattr(Backend, lower.upper()):
            setattr(Backend, lower.upper(), lower)
        if lower not in Backend.backend_list:
            Backend.backend_list.append(lower)
        Backend.backend_capability[lower] = devices
        for device in devices:
            Backend.default_device_backend_map.setdefault(device, lower)


def is_ucc_available():
    """False: tdist has no UCC backend."""
    return False


def is_xccl_available():
    """False: tdist has no XCCL backend (Intel GPUs)."""
    return False


def _single_available(name):
    check = {"gloo": _tdist.is_gloo_available, "mpi": _tdist.is_mpi_available, "nccl": _tdist.is_nccl_available,
             "ucc": is_ucc_available, "xccl": is_xccl_available}.get(name.lower())
    return check() if check is not None else _tdist._is_backend_registered(name)


def is_backend_available(backend: str) -> bool:
    """Whether init_process_group can use ``backend``: a name ("gloo", "tdist", "nccl", a registered
    one) or a per-device spec ("cpu:gloo,cuda:nccl": every backend of it), as torch's."""
    if ":" in backend:
        pairs = [p.split(":", 1) for p in backend.lower().split(",")]
        if any(len(p) != 2 or not p[1] for p in pairs):
            raise ValueError(f"Invalid device:backend pairing in {backend!r}; expected "
                             f"'<device>:<backend>,...', e.g. 'cpu:gloo,cuda:nccl'")
        return all(_single_available(b) for _, b in pairs)
    return _single_available(backend)


def get_default_backend_for_device(device) -> str:
    """The backend torch gives ``device`` ("cpu", "cuda:0", a torch.device) when none is named."""
    device_type = getattr(device, "type", None) or str(device).split(":", 1)[0]
    backend = Backend.default_device_backend_map.get(device_type)
    if backend is None:
        raise ValueError(f"Default backend not registered for device : {device}")
    return backend


class BackendConfig:
    """torch's BackendConfig: the backend of each device that a backend name or a per-device spec
    gives ("gloo": {"cpu": "gloo", "cuda": "gloo"}; "cpu:gloo,cuda:nccl" as written; "undefined":
    cpu's default, as torch on a machine without an accelerator). str() is "cpu:gloo,cuda:gloo"."""

    def __init__(self, backend):
        backend = str(backend)
        name = backend.lower()
        self.device_backend_map = {}
        if name == Backend.UNDEFINED:
            self.device_backend_map["cpu"] = Backend(Backend.default_device_backend_map["cpu"])
        elif ":" not in name:
            devices = Backend.backend_capability.get(name, _BUILTIN_DEVICES.get(name, ["cpu"]))
            self.device_backend_map = dict.fromkeys(devices, Backend(name))
        else:
            for pair in name.split(","):
                parts = pair.split(":")
                if len(parts) != 2 or not parts[0] or not parts[1]:
                    raise ValueError(f"Invalid device:backend pairing: {pair}. The backend string must be "
                                     f"'<device_type1>:<backend1>,<device_type2>:<backend2>...', e.g. "
                                     f"'cpu:gloo,cuda:nccl' (got {backend!r})")
                device, device_backend = parts
                if device in self.device_backend_map:
                    raise ValueError(f"Duplicate device type {device} in backend string: {backend!r}")
                self.device_backend_map[device] = Backend(device_backend)

    def get_device_backend_map(self):
        """{device: backend}."""
        return self.device_backend_map

    def __repr__(self):
        return ",".join(f"{device}:{backend}" for device, backend in self.device_backend_map.items())


def get_backend_config(group=None) -> str:
    """torch's get_backend_config: the group's devices and the backend of each, "cpu:gloo,cuda:gloo"
    after init_process_group("gloo"); a per-device spec as it was given."""
    return str(BackendConfig(_tdist.get_backend(group)))


def supports_complex(reduceOp) -> bool:  # noqa: N803 (torch's name)
    """Whether the reduction means something on complex tensors (not MAX, MIN, PRODUCT, BAND, BOR, BXOR)."""
    op = _tdist.ReduceOp
    return reduceOp not in (op.MAX, op.MIN, op.PRODUCT, op.BAND, op.BOR, op.BXOR)
