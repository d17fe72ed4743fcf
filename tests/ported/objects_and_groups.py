"""A torch.distributed program, ported by changing one import: objects, point-to-point, new_group
and subgroups. Run: tdistrun --standalone --nproc-per-node 3 objects_and_groups.py"""
import torch

import tdist as dist  # was: import torch.distributed as dist


def main():
    dist.init_process_group(backend="gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()

    objs = [{"lr": 0.1, "step": 7}, "config"] if rank == 0 else [None, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"lr": 0.1, "step": 7}, "config"], objs

    everyone = [None] * world
    dist.all_gather_object(everyone, {"rank": rank})
    assert everyone == [{"rank": r} for r in range(world)], everyone

    at_root = [None] * world if rank == 0 else None
    dist.gather_object(("hello", rank), at_root, dst=0)
    if rank == 0:
        assert at_root == [("hello", r) for r in range(world)], at_root

    received = [None]
    dist.scatter_object_list(received, [f"part {r}" for r in range(world)] if rank == 0 else None, src=0)
    assert received == [f"part {rank}"], received

    if rank == 0:
        dist.send_object_list([[1, 2, 3]], dst=1)
    elif rank == 1:
        box = [None]
        dist.recv_object_list(box, src=0)
        assert box == [[1, 2, 3]], box

    # Point-to-point around a ring, blocking and batched.
    right, left = (rank + 1) % world, (rank - 1) % world
    buf = torch.zeros(2)
    if rank % 2 == 0:
        dist.send(torch.full((2,), float(rank)), dst=right)
        dist.recv(buf, src=left)
    else:
        dist.recv(buf, src=left)
        dist.send(torch.full((2,), float(rank)), dst=right)
    assert buf[0].item() == left, buf
    got = torch.zeros(1)
    ops = [dist.P2POp(dist.isend, torch.tensor([float(rank)]), right),
           dist.P2POp(dist.irecv, got, left)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    assert got.item() == left, got
    req = dist.isend(torch.tensor([rank]), dst=right) if rank == 0 else None
    if rank == 1:
        x = torch.zeros(1, dtype=torch.int64)
        dist.irecv(x, src=0).wait()
        assert x.item() == 0, x
    if req is not None:
        req.wait()

    # Groups: a group of two, ranks outside it get NON_GROUP_MEMBER, subgroups of one.
    pair = dist.new_group(ranks=[0, 1])
    t = torch.ones(1)
    if rank in (0, 1):
        dist.all_reduce(t, group=pair)
        assert t.item() == 2 and dist.get_world_size(pair) == 2, t
    else:
        assert pair == dist.GroupMember.NON_GROUP_MEMBER
    solo, _ = dist.new_subgroups(group_size=1)
    s = torch.tensor([rank])
    dist.all_reduce(s, group=solo)
    assert s.item() == rank and dist.get_process_group_ranks(solo) == [rank]
    dist.barrier()
    print(f"rank {rank}: objects and groups ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
