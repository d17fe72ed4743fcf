"""P2POp and batch_isend_irecv, as in torch.distributed."""
from . import _tdist


class P2POp:
    """One point-to-point operation for batch_isend_irecv.

    ``op`` is ``tdist.isend`` or ``tdist.irecv``; ``peer`` a global rank (or ``group_peer`` a rank
    in ``group``).
    """

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (_tdist.isend, _tdist.irecv):
            raise ValueError("P2POp: op must be tdist.isend or tdist.irecv, got " + repr(op))
        if (peer is None) == (group_peer is None):
            raise ValueError("P2POp: pass exactly one of peer= (a global rank) and group_peer= (a rank in group)")
        self.op = op
        self.tensor = tensor
        self.peer = peer
        self.group = group
        self.tag = tag
        self.group_peer = group_peer

    def __repr__(self):
        who = f"peer={self.peer}" if self.peer is not None else f"group_peer={self.group_peer}"
        return f"P2POp({self.op.__name__}, {who}, tag={self.tag})"


def batch_isend_irecv(p2p_op_list):
    """Posts every operation of the list (receives first, so no order can deadlock) and returns
    their Works, in list order."""
    if not isinstance(p2p_op_list, (list, tuple)) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("batch_isend_irecv: expected a list of P2POp")
    ops = []
    for p in p2p_op_list:
        relative = p.group_peer is not None
        ops.append((p.op is _tdist.isend, p.tensor, p.group_peer if relative else p.peer, relative, p.group, p.tag))
    return _tdist._batch_isend_irecv(ops)
