"""Object collectives: Python objects pickled to bytes, moved by the C++ byte-string collectives
(each rank's sizes travel first, then the bytes)."""
import io
import pickle
import warnings

from . import _tdist

# The seeds' warning (translated from torch's documentation), appended to each docstring.
_WARNING = """

    Warning:
        {name}() uses the pickle module implicitly, which is known to be insecure. It is
        possible to construct malicious pickle data which will execute arbitrary code during
        unpickling. Only call this function with data you trust.
"""


def _warn(fn):
    fn.__doc__ = (fn.__doc__ or "") + _WARNING.format(name=fn.__name__)
    return fn


def _dumps(obj):
    buf = io.BytesIO()
    pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def _loads(data):
    return pickle.loads(data)


class _PlainDataUnpickler(pickle.Unpickler):
    """weights_only=True: builds only plain data (numbers, strings, bytes, lists, tuples, dicts and
    the few builtin containers below); any other class or function in the data is refused."""

    _ALLOWED = {("builtins", n) for n in ("set", "frozenset", "complex", "slice", "range", "bytearray")} | {
        ("collections", "OrderedDict")}

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"weights_only: the received data names {module}.{name}, which is not plain "
                                     f"data; pass weights_only=False to unpickle it (only from a sender you trust)")


def _loads_plain(data):
    return _PlainDataUnpickler(io.BytesIO(data)).load()


def _not_member(group, op):
    """torch's _rank_not_in_group (NON_GROUP_MEMBER, or a group this rank is not in), with its warning."""
    if group is None or _tdist.get_rank(group) >= 0:
        return False
    warnings.warn(f"Running {op} on global rank {_tdist.get_rank()} which does not belong to the given group.",
                  stacklevel=3)
    return True


def _is_root(rank, group_rank, group):
    if group_rank is not None:
        return _tdist.get_rank(group) == group_rank
    return _tdist.get_rank() == (0 if rank is None else rank)


@_warn
def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Broadcasts the picklable objects of ``object_list`` on rank ``src`` (default global rank 0)
    into ``object_list`` on every rank of ``group``; every rank passes a list of the same length."""
    if _not_member(group, "broadcast_object_list"):
        return
    if src is None and group_src is None:
        src = 0
    if _is_root(src, group_src, group):
        data = [_dumps(o) for o in object_list]
    else:
        data = [b""] * len(object_list)
    out = _tdist._broadcast_bytes(data, src, group_src, group)
    if not _is_root(src, group_src, group):
        for i, d in enumerate(out):
            object_list[i] = _loads(d)


@_warn
def all_gather_object(object_list, obj, group=None):
    """Gathers the picklable ``obj`` of every rank of ``group``: ``object_list`` (of the group's
    size) receives rank i's object at index i."""
    if _not_member(group, "all_gather_object"):
        return
    size = _tdist.get_world_size(group)
    if len(object_list) != size:
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries, the group has {size} ranks")
    out = _tdist._all_gather_bytes(_dumps(obj), group)
    for i, d in enumerate(out):
        object_list[i] = _loads(d)


@_warn
def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """Gathers the picklable ``obj`` of every rank into ``object_gather_list`` on ``dst`` (default
    global rank 0), which must have the group's size there; it is ignored elsewhere."""
    if _not_member(group, "gather_object"):
        return
    if dst is None and group_dst is None:
        dst = 0
    is_dst = _is_root(dst, group_dst, group)
    if is_dst:
        size = _tdist.get_world_size(group)
        if object_gather_list is None or len(object_gather_list) != size:
            raise ValueError(f"gather_object: on the destination, object_gather_list must have {size} entries")
    out = _tdist._gather_bytes(_dumps(obj), is_dst, dst, group_dst, group)
    if is_dst:
        for i, d in enumerate(out):
            object_gather_list[i] = _loads(d)


@_warn
def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None):
    """Rank i receives entry i of ``scatter_object_input_list`` of ``src`` (default global rank 0)
    in ``scatter_object_output_list[0]``."""
    if _not_member(group, "scatter_object_list"):
        return
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("scatter_object_list: scatter_object_output_list must be a non-empty list")
    if src is None and group_src is None:
        src = 0
    inputs = None
    if _is_root(src, group_src, group):
        size = _tdist.get_world_size(group)
        if scatter_object_input_list is None or len(scatter_object_input_list) != size:
            raise ValueError(f"scatter_object_list: on the source, scatter_object_input_list must have {size} entries")
        inputs = [_dumps(o) for o in scatter_object_input_list]
    scatter_object_output_list[0] = _loads(_tdist._scatter_bytes(inputs, src, group_src, group))


@_warn
def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None, use_batch=False,
                     weights_only=False):
    """Sends the picklable objects of ``object_list`` to ``dst``; blocks until they are sent.
    use_batch and weights_only are torch's and change nothing here (the sizes and the bytes go as
    two messages either way; weights_only concerns the receiver)."""
    if _not_member(group, "send_object_list"):
        return
    _tdist._send_bytes([_dumps(o) for o in object_list], dst, group_dst, group)


@_warn
def recv_object_list(object_list, src=None, group=None, device=None, group_src=None, use_batch=False,
                     weights_only=False):
    """Receives as many objects as ``object_list`` has entries from ``src`` (None: any rank) into it;
    returns the sender's global rank. weights_only=True unpickles plain data only (numbers, strings,
    bytes, containers): any other class in the data raises pickle.UnpicklingError. use_batch
    (torch's) changes nothing here."""
    if _not_member(group, "recv_object_list"):
        return -1
    data, sender = _tdist._recv_bytes(len(object_list), src, group_src, group)
    loads = _loads_plain if weights_only else _loads
    for i, d in enumerate(data):
        object_list[i] = loads(d)
    return sender
