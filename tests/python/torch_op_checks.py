"""Every torch.distributed operation on backend "tdist", checked against Gloo.

Run on each rank (see torch_harness.run_ranks): the default group is "tdist";
a Gloo group over the same ranks gets identical inputs and its result is the
reference. Where Gloo lacks an operation or a dtype (torch 1.13's lacked
several; the stand-ins keep the reference independent of the torch version), the
reference is built from Gloo operations it has (all_to_all from
all_to_all_single, reduce_scatter from all_reduce) or run on a stand-in dtype
that holds the same values exactly (bfloat16 as float32, bool as uint8, int16
as int32, complex as its real view). Inputs are small integers, so every
summation order gives the same bits.
"""

import torch
import torch.distributed as dist

import torch_harness

R = dist.ReduceOp
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int32, torch.int64, torch.int8, torch.uint8, torch.int16]
DTYPES = FLOATS + INTS + [torch.bool, torch.complex64, torch.complex128]
GLOO_DTYPES = {torch.float32, torch.float64, torch.float16, torch.int32, torch.int64, torch.int8, torch.uint8}
STAND_IN = {torch.bfloat16: torch.float32, torch.bool: torch.uint8, torch.int16: torch.int32}


def reduce_ops(dtype):
    if dtype == torch.bool:
        return [R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
    if dtype.is_complex:
        return [R.SUM]
    if dtype.is_floating_point:
        return [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]


def op_name(op):
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
        if op == getattr(R, name):
            return name
    return str(op)


def make(shape, dtype, rank, salt, op=None):
    """Deterministic small-integer data of `dtype`, different per rank and salt."""
    g = torch.Generator().manual_seed(1000003 * rank + 7919 * salt + 17)
    x = torch.randint(-2, 4, shape, generator=g)
    if op is not None and op == R.PRODUCT:
        x = x.remainder(2) + 1  # {1, 2}: products of up to 8 ranks stay exact
    if dtype == torch.bool:
        return x.remainder(2).bool()
    if dtype == torch.uint8:
        x = x.remainder(4)
    if dtype.is_complex:
        y = torch.randint(-2, 4, shape, generator=g)
        return torch.complex(x.float(), y.float()).to(dtype)
    return x.to(dtype)


def to_gloo(t):
    """A tensor Gloo can carry that holds t's values exactly."""
    if t.is_complex():
        return torch.view_as_real(t).clone()
    return t.to(STAND_IN.get(t.dtype, t.dtype)).clone()


def from_gloo(t, dtype):
    if dtype.is_complex:
        return torch.view_as_complex(t.contiguous())
    return t.to(dtype)


class Checker:
    def __init__(self, rank, world):
        self.rank = rank
        self.world = world
        self.gloo = dist.new_group(backend="gloo")
        self.count = 0

    def same(self, got, want, what):
        self.count += 1
        if isinstance(got, (list, tuple)):
            assert len(got) == len(want), "%s: %d results, want %d" % (what, len(got), len(want))
            for i, (g, w) in enumerate(zip(got, want)):
                self.same(g, w, "%s[%d]" % (what, i))
            return
        assert got.dtype == want.dtype and got.shape == want.shape, \
            "%s: got %s%s, want %s%s" % (what, got.dtype, tuple(got.shape), want.dtype, tuple(want.shape))
        assert torch.equal(got, want), "rank %d: %s differs from Gloo:\n got %s\nwant %s" % (
            self.rank, what, got, want)

    def close(self, got, want, what, rtol):
        self.count += 1
        assert torch.allclose(got.double(), want.double(), rtol=rtol, atol=rtol), \
            "rank %d: %s differs from Gloo:\n got %s\nwant %s" % (self.rank, what, got, want)

    # ---- reference helpers (Gloo) ------------------------------------------------
    def gloo_all_reduce(self, t, op):
        g = to_gloo(t)
        dist.all_reduce(g, op=op, group=self.gloo)
        return from_gloo(g, t.dtype)

    def gloo_all_gather(self, t):
        out = [torch.empty_like(to_gloo(t)) for _ in range(self.world)]
        dist.all_gather(out, to_gloo(t), group=self.gloo)
        return [from_gloo(o, t.dtype) for o in out]


def check_reductions(c, dtype):
    rank, world = c.rank, c.world
    for salt, shape in enumerate([(5, 3), (0,), (1,), ()]):
        for op in reduce_ops(dtype):
            x = make(shape, dtype, rank, salt, op)
            want = c.gloo_all_reduce(x, op)
            got = x.clone()
            dist.all_reduce(got, op=op)
            c.same(got, want, "all_reduce %s %s %s" % (op_name(op), dtype, shape))
    if dtype.is_floating_point:
        x = make((7,), dtype, rank, 5)
        want = c.gloo_all_reduce(x, R.SUM) / world
        got = x.clone()
        dist.all_reduce(got, op=R.AVG)
        c.close(got, want, "all_reduce AVG %s" % dtype, 1e-2 if x.element_size() == 2 else 1e-6)
        # PREMUL_SUM (torch 1.13 names its maker after NCCL): sum of factor * x.
        want = c.gloo_all_reduce(x * 2, R.SUM)
        got = x.clone()
        dist.all_reduce(got, op=dist._make_nccl_premul_sum(2.0))
        c.same(got, want, "all_reduce PREMUL_SUM(2) %s" % dtype)
    for root in range(world):
        for op in reduce_ops(dtype)[:2]:
            x = make((4, 2), dtype, rank, 10 + root, op)
            g = to_gloo(x)
            dist.reduce(g, root, op=op, group=c.gloo)
            got = x.clone()
            dist.reduce(got, root, op=op)
            if rank == root:  # elsewhere the contents are unspecified
                c.same(got, from_gloo(g, dtype), "reduce root %d %s %s" % (root, op_name(op), dtype))
    # all_reduce_coalesced (SUM, as Gloo has it)
    if dtype in GLOO_DTYPES:
        xs = [make((3,), dtype, rank, 20), make((2, 2), dtype, rank, 21)]
        gs = [x.clone() for x in xs]
        dist.all_reduce_coalesced(gs, group=c.gloo)
        ts = [x.clone() for x in xs]
        dist.all_reduce_coalesced(ts)
        c.same(ts, gs, "all_reduce_coalesced %s" % dtype)


def check_reduce_scatter(c, dtype):
    rank, world = c.rank, c.world
    op = reduce_ops(dtype)[0]
    inputs = [make((3, 2), dtype, rank, 30 + i, op) for i in range(world)]
    # Rank r's output reduces everyone's inputs[r].
    want = [c.gloo_all_reduce(x, op) for x in inputs][rank]
    got = torch.zeros_like(inputs[0])
    dist.reduce_scatter(got, inputs, op=op)
    c.same(got, want, "reduce_scatter %s %s" % (op_name(op), dtype))

    big = torch.cat([make((2, 3), dtype, rank, 40 + i, op) for i in range(world)])
    want = c.gloo_all_reduce(big, op).chunk(world)[rank]
    got = torch.zeros((2, 3), dtype=dtype)
    dist.reduce_scatter_tensor(got, big, op=op)
    c.same(got, want, "reduce_scatter_tensor %s %s" % (op_name(op), dtype))


def check_movement(c, dtype):
    rank, world = c.rank, c.world
    for root in range(world):
        x = make((6,), dtype, rank, 50 + root)
        g = to_gloo(x)
        dist.broadcast(g, root, group=c.gloo)
        got = x.clone()
        dist.broadcast(got, root)
        c.same(got, from_gloo(g, dtype), "broadcast root %d %s" % (root, dtype))

    x = make((2, 3), dtype, rank, 60)
    got = [torch.zeros_like(x) for _ in range(world)]
    dist.all_gather(got, x)
    c.same(got, c.gloo_all_gather(x), "all_gather %s" % dtype)

    # all_gather_into_tensor, concatenated and stacked (Gloo in 1.13 has no _allgather_base).
    want = torch.cat(c.gloo_all_gather(x))
    got = torch.zeros((2 * world, 3), dtype=dtype)
    dist.all_gather_into_tensor(got, x)
    c.same(got, want, "all_gather_into_tensor %s" % dtype)
    got = torch.zeros((world, 2, 3), dtype=dtype)
    dist.all_gather_into_tensor(got, x)
    c.same(got, want.view(world, 2, 3), "all_gather_into_tensor stacked %s" % dtype)

    if dtype in GLOO_DTYPES:
        xs = [make((2,), dtype, rank, 61), make((3, 1), dtype, rank, 62)]
        want = [[torch.zeros_like(t) for t in xs] for _ in range(world)]
        dist.all_gather_coalesced(want, xs, group=c.gloo)
        got = [[torch.zeros_like(t) for t in xs] for _ in range(world)]
        dist.all_gather_coalesced(got, xs)
        for r in range(world):
            c.same(got[r], want[r], "all_gather_coalesced from rank %d %s" % (r, dtype))

    for root in range(world):
        x = make((4,), dtype, rank, 70 + root)
        g_out = [torch.zeros_like(to_gloo(x)) for _ in range(world)] if rank == root else None
        dist.gather(to_gloo(x), g_out, dst=root, group=c.gloo)
        t_out = [torch.zeros_like(x) for _ in range(world)] if rank == root else None
        dist.gather(x, t_out, dst=root)
        if rank == root:
            c.same(t_out, [from_gloo(g, dtype) for g in g_out], "gather root %d %s" % (root, dtype))

        ins = [make((3,), dtype, rank, 80 + root * 10 + i) for i in range(world)] if rank == root else None
        g = torch.zeros_like(to_gloo(make((3,), dtype, 0, 0)))
        dist.scatter(g, [to_gloo(t) for t in ins] if ins else None, src=root, group=c.gloo)
        got = torch.zeros((3,), dtype=dtype)
        dist.scatter(got, ins, src=root)
        c.same(got, from_gloo(g, dtype), "scatter root %d %s" % (root, dtype))


def check_all_to_all(c, dtype):
    rank, world = c.rank, c.world
    # Equal and uneven splits (rank r sends r + d + 1 rows to d; some are 0 when shifted).
    x = make((2 * world, 3), dtype, rank, 90)
    g = torch.zeros_like(to_gloo(x))
    dist.all_to_all_single(g, to_gloo(x), group=c.gloo)
    got = torch.zeros_like(x)
    dist.all_to_all_single(got, x)
    c.same(got, from_gloo(g, dtype), "all_to_all_single equal %s" % dtype)

    in_splits = [(rank + d) % 3 for d in range(world)]
    out_splits = [(s + rank) % 3 for s in range(world)]
    x = make((sum(in_splits), 2), dtype, rank, 91)
    g = torch.zeros((sum(out_splits),) + tuple(to_gloo(x).shape[1:]), dtype=to_gloo(x).dtype)
    dist.all_to_all_single(g, to_gloo(x), out_splits, in_splits, group=c.gloo)
    got = torch.zeros((sum(out_splits), 2), dtype=dtype)
    dist.all_to_all_single(got, x, out_splits, in_splits)
    c.same(got, from_gloo(g, dtype), "all_to_all_single splits %s %s" % (in_splits, dtype))

    # all_to_all (lists): Gloo 1.13 has none; its reference is all_to_all_single over the concatenation.
    ins = [make((in_splits[d], 2), dtype, rank, 100 + d) for d in range(world)]
    outs = [torch.zeros((out_splits[s], 2), dtype=dtype) for s in range(world)]
    dist.all_to_all(outs, ins)
    g = torch.zeros((sum(out_splits),) + tuple(to_gloo(ins[0]).shape[1:]), dtype=to_gloo(ins[0]).dtype)
    dist.all_to_all_single(g, to_gloo(torch.cat(ins)), out_splits, in_splits, group=c.gloo)
    c.same(torch.cat(outs), from_gloo(g, dtype), "all_to_all %s" % dtype)


def check_point_to_point(c, dtype):
    rank, world = c.rank, c.world
    if world == 1:
        return
    right, left = (rank + 1) % world, (rank - 1) % world
    x = make((5,), dtype, rank, 110)
    # Blocking send/recv around the ring (even ranks send first), against Gloo doing the same.
    results = []
    for group in (c.gloo, None):
        send_t = to_gloo(x) if group is not None else x.clone()
        recv_t = torch.zeros_like(send_t)
        if rank % 2 == 0:
            dist.send(send_t, right, group=group)
            dist.recv(recv_t, left, group=group)
        else:
            dist.recv(recv_t, left, group=group)
            dist.send(send_t, right, group=group)
        results.append(from_gloo(recv_t, dtype) if group is not None else recv_t)
    c.same(results[1], results[0], "send/recv %s" % dtype)

    # isend/irecv and batch_isend_irecv both ways.
    got_l, got_r = torch.zeros_like(x), torch.zeros_like(x)
    reqs = [dist.isend(x, right), dist.irecv(got_l, left)]
    for r in reqs:
        r.wait()
    c.same(got_l, results[0], "isend/irecv %s" % dtype)
    ops = [dist.P2POp(dist.irecv, got_r, right), dist.P2POp(dist.isend, x, left),
           dist.P2POp(dist.irecv, got_l, left), dist.P2POp(dist.isend, x, right)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    c.same(got_l, results[0], "batch_isend_irecv from left %s" % dtype)
    c.same(got_r, make((5,), dtype, right, 110), "batch_isend_irecv from right %s" % dtype)


def check_any_source_and_tags(c):
    rank, world = c.rank, c.world
    if world == 1:
        return
    # Every rank but 0 sends its rank to 0, which receives from any source.
    if rank == 0:
        seen = set()
        for _ in range(world - 1):
            t = torch.zeros(1, dtype=torch.int64)
            src = dist.recv(t)
            assert src == int(t.item()), "recv from any source returned %d for data of rank %d" % (src, t.item())
            seen.add(src)
        c.same(torch.tensor(sorted(seen)), torch.arange(1, world), "recv any source senders")
    else:
        dist.send(torch.tensor([rank]), 0)
    # Tags pick the message: rank 1 sends tag 7 then tag 3; rank 0 receives tag 3 first.
    if world >= 2 and rank in (0, 1):
        if rank == 1:
            a, b = dist.isend(torch.tensor([7.0]), 0, tag=7), dist.isend(torch.tensor([3.0]), 0, tag=3)
            a.wait()
            b.wait()
        else:
            t3, t7 = torch.zeros(1), torch.zeros(1)
            dist.recv(t3, 1, tag=3)
            dist.recv(t7, 1, tag=7)
            c.same(torch.cat([t3, t7]), torch.tensor([3.0, 7.0]), "recv by tag")


def check_async(c):
    rank, world = c.rank, c.world
    x = make((8,), torch.float32, rank, 120)
    want = c.gloo_all_reduce(x, R.SUM)
    a, b = x.clone(), x.clone()
    w1 = dist.all_reduce(a, async_op=True)
    w2 = dist.all_reduce(b, async_op=True)
    w2.wait()
    w1.wait()
    assert w1.is_completed() and w1.is_success()
    c.same(a, want, "async all_reduce 1")
    c.same(b, want, "async all_reduce 2")
    fut = dist.all_reduce(x.clone(), async_op=True).get_future()
    c.same(fut.wait()[0], want, "all_reduce future value")
    chained = dist.all_reduce(x.clone(), async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    c.same(chained.wait(), want * 2, "future.then")
    # all_gather_coalesced with async_op returns the future.
    out = [[torch.zeros(2)] for _ in range(world)]
    f = dist.all_gather_coalesced(out, [torch.full((2,), float(rank))], async_op=True)
    f.wait()
    c.same(torch.stack([o[0] for o in out]), torch.arange(world).float().repeat_interleave(2).view(world, 2),
           "all_gather_coalesced async")
    dist.barrier()
    dist.barrier(async_op=True).wait()
    # A large message takes the algorithms' other paths (pipelined, chunked).
    big = make((1 << 18,), torch.float32, rank, 121)
    want = c.gloo_all_reduce(big, R.SUM)
    got = big.clone()
    dist.all_reduce(got)
    c.same(got, want, "all_reduce 1 MiB")
    g = to_gloo(big)
    dist.broadcast(g, world - 1, group=c.gloo)
    got = big.clone()
    dist.broadcast(got, world - 1)
    c.same(got, g, "broadcast 1 MiB")
    got = torch.zeros((world << 18,))
    dist.all_gather_into_tensor(got, big)
    c.same(got, torch.cat(c.gloo_all_gather(big)), "all_gather_into_tensor 1 MiB")


def check_subgroup(c):
    """A tdist subgroup without rank 0 (group ranks differ from global ones), against a Gloo one."""
    rank, world = c.rank, c.world
    ranks = list(range(1, world)) if world > 1 else [0]
    sub = dist.new_group(ranks, backend="tdist")
    gsub = dist.new_group(ranks, backend="gloo")
    if rank not in ranks:
        assert sub == dist.GroupMember.NON_GROUP_MEMBER
        return
    assert dist.get_backend(sub) == "tdist"
    assert dist.get_world_size(sub) == len(ranks) and dist.get_rank(sub) == ranks.index(rank)
    x = make((4, 4), torch.float32, rank, 130)
    g, t = x.clone(), x.clone()
    dist.all_reduce(g, group=gsub)
    dist.all_reduce(t, group=sub)
    c.same(t, g, "subgroup all_reduce")
    src = ranks[-1]  # a global rank
    g, t = x.clone(), x.clone()
    dist.broadcast(g, src, group=gsub)
    dist.broadcast(t, src, group=sub)
    c.same(t, g, "subgroup broadcast from global rank %d" % src)
    outs_g = [torch.zeros_like(x) for _ in ranks]
    outs_t = [torch.zeros_like(x) for _ in ranks]
    dist.all_gather(outs_g, x, group=gsub)
    dist.all_gather(outs_t, x, group=sub)
    c.same(outs_t, outs_g, "subgroup all_gather")
    if len(ranks) > 1:
        if rank == ranks[0]:
            dist.send(x, ranks[1], group=sub)
        elif rank == ranks[1]:
            got = torch.zeros_like(x)
            dist.recv(got, ranks[0], group=sub)
            c.same(got, make((4, 4), torch.float32, ranks[0], 130), "subgroup send/recv (global ranks)")
    dist.destroy_process_group(sub)


def check_objects(c):
    rank, world = c.rank, c.world
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
    assert objs == [{"rank": r, "s": "x" * r} for r in range(world)], objs
    lst = ["hello", rank, [1, 2]] if rank == 0 else [None, None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == ["hello", 0, [1, 2]], lst
    out = [None] * world if rank == world - 1 else None
    dist.gather_object(("r", rank), out, dst=world - 1)
    if rank == world - 1:
        assert out == [("r", r) for r in range(world)], out
    got = [None]
    dist.scatter_object_list(got, [{"to": r} for r in range(world)] if rank == 0 else None, src=0)
    assert got == [{"to": rank}], got
    c.count += 4


def check_torch2_forms(c):
    """What torch 2.x sends a backend beyond the classic calls: the coalescing manager's
    coalesced all_reduce / all_gather / reduce_scatter, gather into one tensor, torch's canonical
    *_single names, split_group, get_future_result and monitored_barrier through torch."""
    rank, world = c.rank, c.world
    c10d = dist.distributed_c10d
    xs = [make((n,), torch.float32, rank, 200 + n) for n in (3, 0, 8)]
    wants = [c.gloo_all_reduce(x, R.SUM) for x in xs]
    gathered = [torch.cat(c.gloo_all_gather(x)) for x in xs]
    # reduce_scatter of world x n: rank r gets row r of the sum.
    ins = [make((world * n,), torch.float32, rank, 210 + n) for n in (2, 5)]
    rs_wants = [c.gloo_all_reduce(x, R.SUM).view(world, -1)[rank] for x in ins]
    for async_ops in (False, True):
        def coalesced(issue, pairs):
            """Issues issue(out, in) for each pair inside the coalescing manager; the outputs."""
            with c10d._coalescing_manager(async_ops=async_ops) as cm:
                for o, x in pairs:
                    issue(o, x)
            if async_ops:
                cm.wait()
            return [o for o, _ in pairs]

        got = coalesced(lambda t, _: dist.all_reduce(t), [(x.clone(), None) for x in xs])
        c.same(got, wants, "coalesced all_reduce (async %s)" % async_ops)
        got = coalesced(dist.all_gather_into_tensor, [(torch.empty(world * x.numel()), x) for x in xs])
        c.same(got, gathered, "coalesced all_gather_into_tensor (async %s)" % async_ops)
        got = coalesced(dist.reduce_scatter_tensor, [(torch.empty(x.numel() // world), x) for x in ins])
        c.same(got, rs_wants, "coalesced reduce_scatter_tensor (async %s)" % async_ops)
    # The canonical *_single names and gather_into_tensor, where this torch has them (not 2.11).
    if hasattr(dist, "all_gather_single"):
        out = torch.empty(world * 8)
        dist.all_gather_single(out, xs[2])
        c.same(out, gathered[2], "all_gather_single")
    if hasattr(dist, "reduce_scatter_single"):
        out = torch.empty(5)
        dist.reduce_scatter_single(out, ins[1])
        c.same(out, rs_wants[1], "reduce_scatter_single")
    for root in sorted({0, world - 1}) if hasattr(dist, "gather_into_tensor") else []:
        out = torch.full((world * 8,), -1.0) if rank == root else None
        dist.gather_into_tensor(xs[2], out, dst=root)  # input first, as gather()
        if rank == root:
            c.same(out, gathered[2], "gather_into_tensor to %d" % root)
    # get_future_result: SUCCESS, a number (torch.distributed.WorkResult's values).
    work = dist.all_reduce(xs[2].clone(), async_op=True)
    assert work.get_future_result().wait() == 0, "get_future_result"
    # split_group: two halves (odd worlds: the larger first), each a working group.
    half = (world + 1) // 2
    halves = [list(range(half)), list(range(half, world))] if world > 1 else [[0]]
    try:
        sub = dist.split_group(split_ranks=halves)
    except RuntimeError as e:
        # torch 2.11 splits only a default group bound to a device (device_id=): its own refusal.
        if "No device associated with the default pg" not in str(e):
            raise
        sub = None
    if sub is not None:
        mine = halves[0] if rank < half else halves[1]
        t = torch.full((3,), float(rank))
        dist.all_reduce(t, group=sub)
        c.same(t, torch.full((3,), float(sum(mine))), "all_reduce in split_group %s" % mine)
    torch_harness.monitored_barrier(timeout=__import__("datetime").timedelta(seconds=60), wait_all_ranks=True)


def check_all(rank, world, dtypes=None):
    import tdist.torch

    # The default group's CPU backend is the plugin's, not Gloo's.
    assert dist.get_backend() == "tdist"
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    assert isinstance(backend, tdist.torch.ProcessGroupTdist), backend
    c = Checker(rank, world)
    for dtype in dtypes or DTYPES:
        check_reductions(c, dtype)
        check_reduce_scatter(c, dtype)
        check_movement(c, dtype)
        check_all_to_all(c, dtype)
        check_point_to_point(c, dtype)
    check_any_source_and_tags(c)
    check_async(c)
    check_subgroup(c)
    check_objects(c)
    check_torch2_forms(c)
    dist.barrier()
    assert c.count > 400, c.count  # a guard against a check loop that silently ran nothing
    print("rank %d of %d: %d checks against Gloo passed" % (rank, world, c.count))
