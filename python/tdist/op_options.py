"""torch.distributed's per-operation options classes (AllreduceOptions, BroadcastOptions, ...), the
objects a program builds to call a ProcessGroup's methods (pg.allreduce([t], opts)): the fields and
defaults of torch's, which those methods read. timeout None: the group's (torch: -1 ms, unset)."""
from . import _tdist


class _Options:
    """Fields set from the class's _fields (name: default, or a callable making it), assignable."""

    _fields: dict = {}

    def __init__(self):
        for name, default in self._fields.items():
            setattr(self, name, default() if callable(default) else default)

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"


def _sum():
    return _tdist.ReduceOp.SUM


class AllreduceOptions(_Options):
    _fields = {"reduceOp": _sum, "timeout": None, "asyncOp": True}


class AllreduceCoalescedOptions(AllreduceOptions):
    pass


class BroadcastOptions(_Options):
    _fields = {"rootRank": 0, "rootTensor": 0, "timeout": None, "asyncOp": True}


class ReduceOptions(_Options):
    _fields = {"reduceOp": _sum, "rootRank": 0, "rootTensor": 0, "timeout": None, "asyncOp": True}


class GatherOptions(_Options):
    _fields = {"rootRank": 0, "timeout": None, "asyncOp": True}


class ScatterOptions(_Options):
    _fields = {"rootRank": 0, "timeout": None, "asyncOp": True}


class ReduceScatterOptions(_Options):
    _fields = {"reduceOp": _sum, "timeout": None, "asyncOp": True}


class AllToAllOptions(_Options):
    _fields = {"timeout": None, "asyncOp": True}


class BarrierOptions(_Options):
    _fields = {"device_ids": list, "timeout": None, "device": None, "asyncOp": True}
