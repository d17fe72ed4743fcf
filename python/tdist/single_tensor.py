"""torch 2.15's single-tensor names: all_gather_single and reduce_scatter_single (torch's new names
of all_gather_into_tensor and reduce_scatter_tensor), and gather_single (alias gather_into_tensor),
gather into one tensor on the destination."""
from . import _tdist


def all_gather_single(output_tensor, input_tensor, group=None, async_op=False):
    """torch's all_gather_single: all_gather_into_tensor under torch 2.15's name."""
    return _tdist.all_gather_into_tensor(output_tensor, input_tensor, group=group, async_op=async_op)


def reduce_scatter_single(output, input, op=_tdist.ReduceOp.SUM, group=None, async_op=False):  # noqa: A002
    """torch's reduce_scatter_single: reduce_scatter_tensor under torch 2.15's name."""
    return _tdist.reduce_scatter_tensor(output, input, op=op, group=group, async_op=async_op)


def gather_single(tensor, gather_tensor=None, dst=None, group=None, async_op=False, group_dst=None):
    """torch's gather_single: every rank's tensor into gather_tensor on dst (default global rank 0),
    which holds the group's tensors concatenated along the first dimension or stacked (shape
    (group size, *tensor.shape)); gather_tensor is None elsewhere. A gather into views of it."""
    parts = None
    n = _tdist.get_world_size(group)  # -1 outside the group, where gather does nothing
    if gather_tensor is not None and n > 0:
        shape, whole = tuple(tensor.shape), tuple(gather_tensor.shape)
        if whole == (n, *shape):
            parts = [gather_tensor[i] for i in range(n)]
        elif whole and shape and whole[0] == n * shape[0] and whole[1:] == shape[1:]:
            parts = [gather_tensor[i * shape[0]:(i + 1) * shape[0]] for i in range(n)]
        else:
            raise ValueError(f"gather_single: gather_tensor of shape {whole} holds neither {n} tensors of shape "
                             f"{shape} stacked nor concatenated along the first dimension")
    return _tdist.gather(tensor, parts, dst=dst, group=group, async_op=async_op, group_dst=group_dst)


gather_into_tensor = gather_single
