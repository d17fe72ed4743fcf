"""CUDA tensors through backend "tdist": the plugin serves "cuda" where it and libtdist were built
with CUDA (tdist.torch.DEVICES). Several ranks share one GPU, which tdist allows (NCCL does not).

Without a GPU only the registration check runs; the others skip, saying why. scripts/gpu_check.sh
runs them on a lent GPU machine (ctest label gpu). Ranks are spawned, not forked: a process that
initialized CUDA cannot fork children that use it.
"""

import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import tdist.torch
from torch_harness import run_ranks


def _gpu_skip_reason():
    if "cuda" not in tdist.torch.DEVICES:
        return "the plugin serves cpu only (tdist or torch built without CUDA: see CMake's 'PyTorch plugin' line)"
    if not torch.cuda.is_available():
        return "no CUDA device: torch.cuda.is_available() is False"
    return None


needs_gpu = pytest.mark.skipif(_gpu_skip_reason() is not None, reason=str(_gpu_skip_reason()))


def test_registration_lists_the_devices_the_plugin_serves():
    assert dist.Backend.backend_capability["tdist"] == tdist.torch.DEVICES
    # CMake says whether it built the plugin with CUDA (torch with CUDA and libtdist with CUDA).
    expected = os.environ.get("TDIST_EXPECT_TORCH_CUDA")
    if expected is not None:
        assert ("cuda" in tdist.torch.DEVICES) == (expected == "1"), (expected, tdist.torch.DEVICES)
    assert tdist.torch.DEVICES[0] == "cpu"


def test_a_cuda_tensor_is_refused_clearly_where_the_plugin_serves_cpu_only():
    if "cuda" in tdist.torch.DEVICES:
        pytest.skip("the plugin serves cuda")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: no CUDA tensor can be made to be refused")
    run_ranks(_refused, 1, start_method="spawn")


def _refused(rank, world):
    with pytest.raises(RuntimeError, match="serves CPU tensors only"):
        dist.all_reduce(torch.ones(4, device="cuda"))


def _collectives(rank, world):
    dev = torch.device("cuda", 0)  # every rank on the one GPU
    torch.cuda.set_device(dev)
    n = 1000
    base = torch.arange(n, dtype=torch.float32, device=dev)

    t = base + rank
    dist.all_reduce(t)
    torch.testing.assert_close(t.cpu(), (base * world + sum(range(world))).cpu())

    t = base.to(torch.bfloat16) + rank
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    torch.testing.assert_close(t.cpu(), (base.to(torch.bfloat16) + world - 1).cpu())

    t = base.clone() if rank == 1 % world else torch.zeros(n, device=dev)
    dist.broadcast(t, src=1 % world)
    torch.testing.assert_close(t.cpu(), base.cpu())

    out = torch.empty(world * n, device=dev)
    dist.all_gather_into_tensor(out, base + rank)
    torch.testing.assert_close(out.cpu(), torch.cat([base + r for r in range(world)]).cpu())

    outs = [torch.empty(n, device=dev) for _ in range(world)]
    dist.all_gather(outs, base * (rank + 1))
    for r in range(world):
        torch.testing.assert_close(outs[r].cpu(), (base * (r + 1)).cpu())

    inp = torch.arange(world * 4, dtype=torch.float32, device=dev) + rank
    mine = torch.empty(4, device=dev)
    dist.reduce_scatter_tensor(mine, inp)
    want = sum(torch.arange(world * 4, dtype=torch.float32) + r for r in range(world))[rank * 4:(rank + 1) * 4]
    torch.testing.assert_close(mine.cpu(), want)

    a2a_in = torch.full((world * 2,), float(rank), device=dev)
    a2a_out = torch.empty(world * 2, device=dev)
    dist.all_to_all_single(a2a_out, a2a_in)
    torch.testing.assert_close(a2a_out.cpu(), torch.arange(world, dtype=torch.float32).repeat_interleave(2))

    if world > 1:
        if rank == 0:
            dist.send(base * 3, dst=1)
        elif rank == 1:
            got = torch.empty(n, device=dev)
            dist.recv(got, src=0)
            torch.testing.assert_close(got.cpu(), (base * 3).cpu())

    # A CPU tensor in the same group: the group serves both devices.
    c = torch.ones(3) * (rank + 1)
    dist.all_reduce(c)
    assert c.tolist() == [float(sum(range(1, world + 1)))] * 3
    return True


@needs_gpu
@pytest.mark.parametrize("world", [2, 4])
def test_collectives_on_cuda_tensors(world):
    assert run_ranks(_collectives, world, start_method="spawn") == [True] * world


def _stream_order(rank, world):
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    side = torch.cuda.Stream(dev)
    n = 1 << 20
    t = torch.zeros(n, device=dev)
    with torch.cuda.stream(side):
        # The input is written on the side stream after a delay: the all_reduce, issued on
        # that stream, must be ordered after the write, without the host waiting for it.
        torch.cuda._sleep(50_000_000)
        t.fill_(rank + 1)
        work = dist.all_reduce(t, async_op=True)
        work.wait()  # the side stream waits for the all_reduce (the host does not)
        doubled = t * 2  # queued on the side stream after the wait
    side.synchronize()
    total = sum(range(1, world + 1))
    assert torch.equal(t.cpu(), torch.full((n,), float(total))), t[:4]
    assert torch.equal(doubled.cpu(), torch.full((n,), float(2 * total)))

    # The current stream of another thread's view: an async op on the default stream whose
    # result is consumed through the work's future (DDP's comm hooks).
    u = torch.full((16,), float(rank + 1), device=dev)
    fut = dist.all_reduce(u, async_op=True).get_future()
    halved = fut.then(lambda f: f.value()[0] / 2)
    torch.testing.assert_close(halved.wait().cpu(), torch.full((16,), total / 2))
    return True


@needs_gpu
def test_operations_follow_torch_current_stream():
    assert run_ranks(_stream_order, 2, start_method="spawn") == [True, True]


@needs_gpu
def test_init_process_group_nccl_under_tdistrun(tmp_path):
    # tdistrun's store speaks tdist's protocol; with tdist.torch imported, env:// reaches it through
    # the plugin's adapter, and torch's own ProcessGroupNCCL rendezvous over it (one rank: NCCL
    # refuses two ranks on one GPU). Without the import, torch's TCPStore client cannot talk to
    # tdistrun's store (issue 34).
    if not dist.is_nccl_available():
        pytest.skip("this torch has no NCCL")
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    script = tmp_path / "nccl_train.py"
    script.write_text(
        "import torch, torch.distributed as dist\n"
        "import tdist.torch\n"
        "dist.init_process_group('nccl')\n"
        "t = torch.ones(4, device='cuda') * 3\n"
        "dist.all_reduce(t)\n"
        "torch.cuda.synchronize()\n"
        "assert t.cpu().tolist() == [3.0] * 4, t\n"
        "print('ok', dist.get_backend(), flush=True)\n"
        "dist.destroy_process_group()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")}
    r = subprocess.run([sys.executable, "-m", "tdist.run", "--standalone", "--nproc-per-node", "1", str(script)],
                       cwd=root, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok nccl" in r.stdout, r.stdout
