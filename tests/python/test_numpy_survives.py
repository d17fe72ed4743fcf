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


def _tdistrun(policy, extra, example_extra=()):
    env = dict(os.environ, TDIST_TIMEOUT="60")
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "TORCHELASTIC_USE_AGENT_STORE"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "tdist.run", "--standalone", "--nproc-per-node", "4", "--on-failure", policy,
           *extra, EXAMPLE, "--steps", "60", "--kill-rank", "0", "--kill-step", "12", *example_extra]
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)


def _done_lines(out):
    return re.findall(r"done: rank (\d+) of (\d+), (\d+) recoveries, weights identical: (\w+), digest (\w+)", out)


def test_tdistrun_shrink_lets_rank_0_die():
    """Under tdistrun the agent serves the store, so even rank 0 may die: the others agree at once
    (tdistrun's exited/0 record) and finish on 3 ranks; tdistrun exits 0."""
    r = _tdistrun("shrink", [])
    assert r.returncode == 0, r.stdout
    done = _done_lines(r.stdout)
    assert len(done) == 3 and {d[1] for d in done} == {"3"} and {d[3] for d in done} == {"yes"}, r.stdout
    assert len({d[4] for d in done}) == 1, r.stdout
    assert "ranks [0] failed" in r.stdout, r.stdout


def test_tdistrun_shrink_and_replace():
    """--on-failure shrink-and-replace: tdistrun starts a replacement for the killed rank 0, which joins
    the survivors at their next admission point; the four finish with identical weights."""
    r = _tdistrun("shrink-and-replace", ["--max-restarts", "1"], ["--expect-joiners", "1"])
    assert r.returncode == 0, r.stdout
    done = _done_lines(r.stdout)
    assert "starting a replacement for rank 0" in r.stdout, r.stdout
    assert "joined the running job" in r.stdout, r.stdout
    final = [d for d in done if d[1] == "4"]
    assert len(final) == 4 and {d[3] for d in final} == {"yes"} and len({d[4] for d in final}) == 1, r.stdout


_NEVER_CONNECTED = """
import os, sys
import numpy as np
import tdist as dist
dist.init_process_group("gloo")
if dist.get_rank() == 2:
    os._exit(0)  # before any connection: no survivor sees its sockets end
try:
    dist.all_reduce(np.ones(4, dtype=np.float32))
    print("the all_reduce did not fail")
except dist.DistError:
    pass
print("failed ranks:", dist.failed_ranks(), flush=True)
"""


def test_a_rank_that_never_connected_is_proven_dead_by_its_closed_port():
    """Rank 2 exits before it ever connects to anyone and no launcher reaps it: the survivors' proof is
    that its listener refuses them. The silence timeout is an hour, so without that proof the answer
    would never come within the test's limit."""
    port = _free_port()
    procs = []
    for rank in range(3):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="3",
                   TDIST_SHM="0", TDIST_TIMEOUT="5", TDIST_FAILURE_DETECTION_TIMEOUT="3600")
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        procs.append(subprocess.Popen([sys.executable, "-c", _NEVER_CONNECTED], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    try:
        outs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert procs[2].returncode == 0, outs[2]
    for rank in (0, 1):
        assert procs[rank].returncode == 0, outs[rank]
        assert "failed ranks: [2]" in outs[rank], outs[rank]
