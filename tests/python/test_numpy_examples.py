"""The seeds' Python programs (examples/python) on the NumPy module: run through
`python3 -m tdist.run` as a user would, and spawning themselves; plus tdist.spawn's failure report
and the launcher's argument handling."""
import os
import subprocess
import sys

import pytest

import tdist
from tdist import run as tdist_run

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples", "python")
PYTHON = sys.executable


def launch(args, timeout=120):
    env = dict(os.environ)
    env.pop("MASTER_PORT", None)
    r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{args} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout.splitlines()


def via_run(n, script, *args):
    return launch([PYTHON, "-m", "tdist.run", "--standalone", "--nproc-per-node", str(n),
                   os.path.join(EXAMPLES, script), *args])


def test_setup_template():
    # The ranks share one pipe, so their lines may interleave (a rank's newline can come after
    # another's text): look for each greeting in the whole output, not for whole lines.
    text = "\n".join(launch([PYTHON, os.path.join(EXAMPLES, "setup_template.py"), "3"]))
    for r in range(3):
        assert f"Hello from rank {r} of 3 (backend gloo)" in text  # the example asks for "gloo"


def test_p2p_blocking():
    out = via_run(2, "p2p_blocking.py")
    assert "[rank0]: Rank 0 has data 1" in out and "[rank1]: Rank 1 has data 1" in out
    text = "\n".join(launch([PYTHON, os.path.join(EXAMPLES, "p2p_blocking.py"), "3"]))  # spawns itself
    assert "Rank 1 has data 1" in text and "Rank 2 has data 0" in text


def test_p2p_nonblocking():
    out = via_run(2, "p2p_nonblocking.py")
    for line in ("[rank0]: Rank 0 started sending", "[rank1]: Rank 1 started receiving",
                 "[rank0]: Rank 0 has data 1", "[rank1]: Rank 1 has data 1"):
        assert line in out


def test_group_all_reduce():
    out = via_run(4, "all_reduce.py")
    for r, want in ((0, 2), (1, 2), (2, 1), (3, 1)):
        assert f"[rank{r}]: Rank {r} has data {want} (expected {want})" in out


@pytest.mark.parametrize("n", [3, 4])
def test_ring_all_reduce(n):
    out = via_run(n, "ring_all_reduce.py")
    assert sum("matches all_reduce" in line for line in out) == n


def test_distributed_sgd():
    out = via_run(4, "sgd.py", "--epochs", "3")
    assert sum("weights identical on all ranks: yes" in line for line in out) == 4
    losses = [float(line.split("loss ")[1]) for line in out if line.startswith("[rank0]") and "loss" in line]
    assert len(losses) == 3 and losses[-1] < losses[0]


def failing(rank, fail_rank):
    if rank == fail_rank:
        raise KeyError("deliberate failure")


def test_spawn_reports_the_failing_rank():
    with pytest.raises(tdist.ProcessRaisedException, match="Process 1 terminated") as err:
        tdist.spawn(failing, args=(1,), nprocs=3, start_method="fork")
    assert "deliberate failure" in str(err.value) and err.value.error_index == 1


def exits(rank):
    if rank == 0:
        os._exit(3)


def test_spawn_exit_code_and_join_false():
    with pytest.raises(tdist.ProcessExitedException, match="exit code 3"):
        tdist.spawn(exits, nprocs=2, start_method="fork")
    ctx = tdist.spawn(failing, args=(-1,), nprocs=2, join=False, start_method="fork")
    while not ctx.join(timeout=60):
        pass


# The README's spawn example, run by a launched worker: its children meet among themselves.
SPAWN_IN_WORKER = """
import datetime
import numpy as np
import tdist as dist

def run(rank, size):
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))  # bounded: a hang fails
    t = np.ones(4, dtype=np.float32)
    dist.all_reduce(t)
    print(f"child {rank} of {size}: {t[0]:g}", flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    dist.spawn(run, args=(2,), nprocs=2)
"""


def test_spawn_inside_a_launched_worker(tmp_path):
    script = tmp_path / "spawn_in_worker.py"
    script.write_text(SPAWN_IN_WORKER)
    text = "\n".join(launch([PYTHON, "-m", "tdist.run", "--standalone", "--nproc-per-node", "2", str(script)]))
    for child in range(2):
        assert text.count(f"child {child} of 2: 2") == 2, text  # in each of the two workers


def test_run_environment():
    # tdist.run passes its arguments to tdistrun unchanged; tdistrun runs the script with PYTHON_EXEC.
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(tdist_run.__file__)))
    env = tdist_run.launch_environment({"PYTHONPATH": "/elsewhere"}, "/py")
    assert env["PYTHON_EXEC"] == "/py"
    assert env["PYTHONPATH"] == package_parent + os.pathsep + "/elsewhere"
    env = tdist_run.launch_environment({"PYTHON_EXEC": "/mine", "PYTHONPATH": package_parent}, "/py")
    assert env["PYTHON_EXEC"] == "/mine"  # the user's choice, as torchrun keeps it
    assert env["PYTHONPATH"] == package_parent
