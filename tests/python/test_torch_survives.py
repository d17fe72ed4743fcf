"""DDP on CPU over the tdist backend survives a rank killed with SIGKILL (examples/python/torch2/
ddp_survives.py): the survivors agree on who died (tdist.torch.failed_ranks), call torch's own
torch.distributed.shrink_group, re-wrap the model in DDP and finish with identical weights. Ranks are
started by hand over env:// (torch's store lives in rank 0's process: rank 0 is never the victim)."""
import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest

import torch_harness

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "torch2" / "ddp_survives.py"


@pytest.mark.parametrize("world,victim,step", [(3, 1, 4)])
def test_ddp_survives_a_killed_rank(world, victim, step):
    port = torch_harness.free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(world), TDIST_TIMEOUT="60")
        procs.append(subprocess.Popen([sys.executable, str(EXAMPLE), "--kill-rank", str(victim), "--kill-step",
                                       str(step)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    try:
        outs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert procs[victim].returncode == -signal.SIGKILL, outs[victim]
    digests = set()
    for rank, (p, out) in enumerate(zip(procs, outs)):
        if rank == victim:
            continue
        assert p.returncode == 0, out
        m = re.search(r"done: rank (\d+) of (\d+), (\d+) recoveries, weights identical: yes, digest (\w+)", out)
        assert m and int(m.group(2)) == world - 1 and int(m.group(3)) == 1, out
        assert f"ranks [{victim}] failed" in out, out
        digests.add(m.group(4))
    assert len(digests) == 1, outs
