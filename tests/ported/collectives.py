"""A torch.distributed program, ported by changing one import: every collective on CPU tensors.
Run: tdistrun --standalone --nproc-per-node 3 collectives.py"""
import torch

import tdist as dist  # was: import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    assert torch.equal(t, torch.full((4,), float(sum(range(1, world + 1))))), t

    b = torch.arange(3, dtype=torch.int64) if rank == 0 else torch.zeros(3, dtype=torch.int64)
    dist.broadcast(b, src=0)
    assert b.tolist() == [0, 1, 2], b

    gathered = [torch.zeros(2) for _ in range(world)]
    dist.all_gather(gathered, torch.full((2,), float(rank)))
    assert [g[0].item() for g in gathered] == list(range(world)), gathered

    flat = torch.empty(world * 2)
    dist.all_gather_into_tensor(flat, torch.full((2,), float(rank)))
    assert flat.tolist() == [float(r) for r in range(world) for _ in range(2)], flat

    mine = torch.tensor([rank * 10])
    into = [torch.zeros(1, dtype=torch.int64) for _ in range(world)] if rank == 0 else None
    dist.gather(mine, gather_list=into, dst=0)
    if rank == 0:
        assert [x.item() for x in into] == [r * 10 for r in range(world)], into

    out = torch.zeros(1, dtype=torch.int64)
    pieces = [torch.tensor([r + 100]) for r in range(world)] if rank == 1 else None
    dist.scatter(out, scatter_list=pieces, src=1)
    assert out.item() == rank + 100, out

    red = torch.zeros(1)
    dist.reduce_scatter(red, [torch.tensor([float(rank + r)]) for r in range(world)], op=dist.ReduceOp.SUM)
    assert red.item() == sum(r + rank for r in range(world)), red

    red_t = torch.zeros(2)
    dist.reduce_scatter_tensor(red_t, torch.arange(world * 2, dtype=torch.float32))
    assert red_t.tolist() == [world * (2 * rank), world * (2 * rank + 1)], red_t

    outs = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_to_all(outs, [torch.tensor([rank * 100 + r]) for r in range(world)])
    assert [o.item() for o in outs] == [r * 100 + rank for r in range(world)], outs

    single = torch.zeros(world, dtype=torch.int64)
    dist.all_to_all_single(single, torch.arange(world, dtype=torch.int64) + rank * world)
    assert single.tolist() == [r * world + rank for r in range(world)], single

    r = torch.tensor([rank + 1.0])
    dist.reduce(r, dst=2, op=dist.ReduceOp.MAX)
    if rank == 2:
        assert r.item() == world, r

    work = dist.all_reduce(torch.ones(8), async_op=True)
    work.wait()
    dist.barrier()
    print(f"rank {rank}: collectives ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
