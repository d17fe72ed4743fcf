"""A rank killed with SIGKILL in the middle of training: the survivors of examples/python/sgd_survives.py
agree on who died (tdist.failed_ranks), shrink the default group (tdist.shrink_group), rebalance
their rows and finish with identical weights. The ranks are started by hand (env://, rank 0's
process serves the store, so rank 0 is never the one killed); tdistrun --on-failure shrink is tested
with the launcher."""
import os
import random
import re
import signal
import socket
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "python", "sgd_survives.py")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(world, extra, shm="1"):
    port = _free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(world), TDIST_SHM=shm, TDIST_TIMEOUT="60")
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        procs.append(subprocess.Popen([sys.executable, EXAMPLE, "--steps", "40", *extra], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append((p.returncode, out))
    return outs


@pytest.mark.parametrize("world,victim,inside,shm", [(4, 2, False, "1"), (4, 3, True, "0"), (5, 1, True, "1")])
def test_training_survives_a_killed_rank(world, victim, inside, shm):
    step = random.Random(world * 10 + victim).randrange(3, 35)
    extra = ["--kill-rank", str(victim), "--kill-step", str(step)] + (["--kill-inside"] if inside else [])
    outs = _run(world, extra, shm)
    digests = set()
    for rank, (code, out) in enumerate(outs):
        if rank == victim:
            assert code == -signal.SIGKILL, out
            continue
        assert code == 0, f"launch rank {rank} exited {code}:\n{out}"
        m = re.search(r"done: rank (\d+) of (\d+), (\d+) recoveries, weights identical: yes, digest (\w+)", out)
        assert m, out
        assert int(m.group(2)) == world - 1 and int(m.group(3)) == 1, out
        assert f"ranks [{victim}] failed" in out, out
        digests.add(m.group(4))
    assert len(digests) == 1, outs


def test_healthy_training_needs_no_recovery():
    outs = _run(3, [])
    for code, out in outs:
        assert code == 0, out
        assert "0 recoveries, weights identical: yes" in out, out


def test_a_replacement_joins_the_survivors():
    """Rank 2 dies; once it is gone a replacement starts with TDIST_JOIN_RUNNING_JOB=1 and the same RANK;
    the survivors admit it (every 5 steps), send it their state, and the four finish alike."""
    world, victim = 4, 2
    port = _free_port()
    procs = []

    def start(rank, join=False):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(world), TDIST_TIMEOUT="60")
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        if join:
            env["TDIST_JOIN_RUNNING_JOB"] = "1"
        return subprocess.Popen([sys.executable, EXAMPLE, "--steps", "60", "--kill-rank", str(victim),
                                 "--kill-step", "12", "--expect-joiners", "1"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    procs = [start(r) for r in range(world)]
    try:
        procs[victim].wait(timeout=120)
        procs.append(start(victim, join=True))
        outs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert procs[victim].returncode == -signal.SIGKILL, outs[victim]
    digests = set()
    for i, out in enumerate(outs):
        if i == victim:
            continue
        assert procs[i].returncode == 0, out
        m = re.search(r"done: rank (\d+) of (\d+), (\d+) recoveries, weights identical: yes, digest (\w+)", out)
        assert m and int(m.group(2)) == world, out
        digests.add(m.group(4))
    assert "joined the running job" in outs[-1], outs[-1]
    assert len(digests) == 1, outs
