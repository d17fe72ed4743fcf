"""torch's higher layers (DDP comm hooks, FSDP2, DTensor, distributed checkpoint, DeviceMesh with
HSDP) give on backend "tdist" what they give on "gloo".

Each example of examples/python/torch2 runs on 4 forked ranks, once per backend; each rank's
results are compared between the two runs. Where the results go through no floating-point
arithmetic that depends on the backend (copies, gathers, broadcasts, sums of small integers)
they must be equal. Where a backend adds float gradients of 4 ranks, its order of addition is its
own choice (Gloo's ring and tdist's algorithms differ), and float addition is not associative:
there the results are compared within a tolerance, stated with each comparison.
"""

import os
import pathlib
import sys

import pytest
import torch
import torch.distributed as dist

import torch_harness

# fully_shard and DTensor are public from torch 2.6 on (Debian's torch 1.13 cannot even import
# its torch.distributed.fsdp on Python 3.11).
if tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) < (2, 6):
    pytest.skip("torch %s: the layers tested here need torch 2.6 or newer" % torch.__version__,
                allow_module_level=True)

EXAMPLES = pathlib.Path(os.environ.get("TDIST_EXAMPLES_PYTHON",
                                       pathlib.Path(__file__).resolve().parents[2] / "examples" / "python")) / "torch2"
sys.path.insert(0, str(EXAMPLES))

# Imported here, before the ranks fork, so that no rank imports them again: the layers, and
# torch._dynamo, which DTensor and FSDP2 import on first use (seconds per rank on a busy box).
import torch._dynamo  # noqa: E402,F401
import dcp_reshard  # noqa: E402
import ddp_comm_hooks  # noqa: E402
import device_mesh_hsdp  # noqa: E402
import dtensor_2x2  # noqa: E402
import fsdp2_transformer  # noqa: E402

WORLD = 4

# How far another order of addition moves the results was measured on Gloo by rotating which
# rank trains on which batch (only the order of the ranks' contributions changes): float32 runs
# moved by at most 2.4e-7 (FSDP2's weights, up to 4.1 in size), bf16_compress_hook's by 2.7e-4.
# The tolerances leave a factor of 4 or more.
#
# float32 sums of 4 ranks' values in another order differ in the last bits (about 1e-7
# relative); a few training steps carry such differences on, a little amplified.
FLOAT_SUM = dict(rtol=1e-5, atol=1e-6)
# bf16_compress_hook all-reduces bfloat16 (8 significant bits): another order of addition can
# round a gradient element to a neighbouring bfloat16, 2**-8 (0.4 %) of it, which the steps carry
# into the weights (lr 0.2, 5 steps).
BF16_SUM = dict(rtol=1e-2, atol=2e-3)


def _run_example(rank, world, example):
    summary, results = example.run()
    # Every group the layers made (device meshes' dimensions, the 2-rank checkpoint group) runs
    # on the backend under test: none fell back to another backend for CPU tensors.
    backends = {dist.get_backend(pg) for pg in dist.distributed_c10d._world.pg_names}
    assert backends == {dist.get_backend()}, "groups on %s, default group on %s" % (backends, dist.get_backend())
    return summary, results


def run_on_both(example):
    """Each rank's (summary, results) on gloo and on tdist."""
    gloo = torch_harness.run_ranks(_run_example, WORLD, example, backend="gloo")
    tdist = torch_harness.run_ranks(_run_example, WORLD, example, backend="tdist")
    return gloo, tdist


def assert_same(gloo, tdist, tolerances=None):
    """Every rank's results on tdist equal those on gloo; those named in tolerances only within them."""
    tolerances = tolerances or {}
    for rank, ((_, g), (_, t)) in enumerate(zip(gloo, tdist)):
        assert g.keys() == t.keys(), "rank %d: results %s on gloo, %s on tdist" % (rank, sorted(g), sorted(t))
        for name in g:
            where = "rank %d, %s:\ngloo  %s\ntdist %s" % (rank, name, g[name], t[name])
            if not isinstance(g[name], torch.Tensor):
                assert g[name] == t[name], where
            elif name in tolerances:
                assert torch.allclose(t[name], g[name], **tolerances[name]), where
            else:
                assert torch.equal(t[name], g[name]), where


def test_ddp_comm_hooks():
    gloo, tdist = run_on_both(ddp_comm_hooks)
    assert_same(gloo, tdist, {"allreduce_loss": FLOAT_SUM, "allreduce_params": FLOAT_SUM,
                              "bf16_loss": BF16_SUM, "bf16_params": BF16_SUM})


def test_fsdp2_transformer():
    gloo, tdist = run_on_both(fsdp2_transformer)
    # Gradients are reduce-scattered (float sums); SGD keeps their differences small.
    assert_same(gloo, tdist, {"losses": FLOAT_SUM, "params": FLOAT_SUM})
    losses = tdist[0][1]["losses"]
    assert losses[-1] < losses[0], "the loss did not go down: %s" % losses


def test_dtensor_2x2():
    # Small integers: the partial products' all_reduce is exact in any order.
    assert_same(*run_on_both(dtensor_2x2))


def test_dcp_reshard():
    gloo, tdist = run_on_both(dcp_reshard)
    assert_same(gloo, tdist)  # saving and loading copy values: no arithmetic
    for rank in (0, 1):
        assert set(tdist[rank][1]) == {"embed", "embed_local", "proj", "proj_local", "scale", "scale_local"}
    assert tdist[2][1] == {} and tdist[3][1] == {}  # ranks 2 and 3 are not in the loading mesh


def test_device_mesh_hsdp():
    gloo, tdist = run_on_both(device_mesh_hsdp)
    # The groups of each named dimension compare exactly (ranks and sums of small integers);
    # HSDP's gradients are reduce-scattered and all-reduced (float sums).
    assert_same(gloo, tdist, {"loss": FLOAT_SUM, "params": FLOAT_SUM})
    assert "'dp': (0, [0, 2], 2.0)" in tdist[0][1]["seen"], tdist[0][1]["seen"]
