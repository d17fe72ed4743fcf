"""Group helpers written in Python: group.WORLD / GroupMember.WORLD and the subgroup makers."""
from . import _tdist


class _WorldMeta(type):
    """Makes ``WORLD`` a class attribute that reads the current default group."""

    @property
    def WORLD(cls):  # noqa: N802 (torch's name)
        """The default group, or None before init_process_group."""
        return _tdist._get_default_group() if _tdist.is_initialized() else None


class group(metaclass=_WorldMeta):  # noqa: N801 (torch's name)
    """``group.WORLD`` is the default group, as in torch.distributed."""


class GroupMember(metaclass=_WorldMeta):
    """``GroupMember.WORLD`` is the default group; NON_GROUP_MEMBER marks ranks outside a group."""

    NON_GROUP_MEMBER = -100


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    """Splits the ranks of ``group`` (default: the world) into consecutive groups of ``group_size``.

    Every rank of the world calls it; it creates every subgroup (in order) and returns
    ``(this rank's subgroup, all subgroups)``. ``group_size`` defaults to LOCAL_WORLD_SIZE (one
    subgroup per node; torch takes the accelerator count there, and refuses on a machine without
    one); the group's size must be a multiple of it. ``group_desc`` labels every subgroup.
    """
    if group_size is None:
        import os

        group_size = int(os.environ.get("LOCAL_WORLD_SIZE", _tdist.get_world_size(group)))
    if group_size <= 0:
        raise ValueError(f"The arg 'group_size' ({group_size}) must be positive")
    size = _tdist.get_world_size(group)
    if size < group_size:
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world size ({size})")
    if size % group_size != 0:
        raise ValueError(f"The world size ({size}) must be divisible by 'group_size={group_size}'")
    members = _tdist.get_process_group_ranks(group) if group is not None else list(range(size))
    ranks = [members[start:start + group_size] for start in range(0, size, group_size)]
    return new_subgroups_by_enumeration(ranks, timeout=timeout, backend=backend, pg_options=pg_options,
                                        group_desc=group_desc)


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None,
                                 group_desc=None):
    """Creates one group per list of global ranks (lists must not overlap), each labelled ``group_desc``.

    Every rank calls it with the same lists; returns ``(this rank's subgroup or None, all subgroups)``.
    """
    if not ranks_per_subgroup_list:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    me = _tdist.get_rank()
    seen = {}
    for index, ranks in enumerate(ranks_per_subgroup_list):
        for r in ranks:
            if r in seen:
                raise ValueError(f"Rank {r} has appeared in both subgroup {list(ranks_per_subgroup_list[seen[r]])} "
                                 f"and {list(ranks)}")
            seen[r] = index
    cur = None
    subgroups = []
    for ranks in ranks_per_subgroup_list:
        g = _tdist.new_group(list(ranks), timeout=timeout, backend=backend, pg_options=pg_options,
                             group_desc=group_desc)
        subgroups.append(g)
        if me in ranks:
            cur = g
    return cur, subgroups


def set_timeout(timeout, group=None):
    """torch's set_timeout: operations of ``group`` (default: the world) issued afterwards without
    a timeout of their own use ``timeout`` (a timedelta). ValueError on a rank outside the group."""
    if group is None:
        group = _tdist._get_default_group()
    if isinstance(group, int) or not group.is_member():
        raise ValueError("Invalid process group specified")
    group.set_timeout(timeout)


def _abort_process_group(group=None):
    """torch's _abort_process_group: aborts ``group`` (None: the default group). What it has under way
    ends with a DistBackendError saying it was aborted, later operations fail at once, and the other
    members' operations fail naming this rank. The group stays registered: destroy it, or shrink_group
    the survivors, afterwards."""
    target = _tdist._get_default_group() if group is None else group
    if target is GroupMember.NON_GROUP_MEMBER:
        return
    target.abort()
