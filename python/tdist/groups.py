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


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None):
    """Splits the world into consecutive groups of ``group_size`` ranks.

    Every rank calls it; it creates every subgroup (in order) and returns
    ``(this rank's subgroup, all subgroups)``. ``group_size`` defaults to LOCAL_WORLD_SIZE
    (one subgroup per node); the world size must be a multiple of it.
    """
    if group is not None:
        raise ValueError("new_subgroups: group= is not supported; subgroups split the default group")
    world = _tdist.get_world_size()
    if group_size is None:
        import os

        group_size = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if group_size <= 0:
        raise ValueError(f"new_subgroups: group_size must be positive, got {group_size}")
    if world % group_size != 0:
        raise ValueError(f"new_subgroups: the world size {world} is not divisible by group_size {group_size}")
    ranks = [list(range(start, start + group_size)) for start in range(0, world, group_size)]
    return new_subgroups_by_enumeration(ranks, timeout=timeout, backend=backend, pg_options=pg_options)


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None):
    """Creates one group per list of global ranks (lists must not overlap).

    Every rank calls it with the same lists; returns ``(this rank's subgroup or None, all subgroups)``.
    """
    if not ranks_per_subgroup_list:
        raise ValueError("new_subgroups_by_enumeration: ranks_per_subgroup_list is empty")
    me = _tdist.get_rank()
    seen = {}
    cur = None
    subgroups = []
    for ranks in ranks_per_subgroup_list:
        for r in ranks:
            if r in seen:
                raise ValueError(f"new_subgroups_by_enumeration: rank {r} is in subgroups {seen[r]} and "
                                 f"{len(subgroups)}; subgroups must not overlap")
            seen[r] = len(subgroups)
        g = _tdist.new_group(list(ranks), timeout=timeout, backend=backend, pg_options=pg_options)
        subgroups.append(g)
        if me in ranks:
            cur = g
    return cur, subgroups
