"""tdist programs under the real torchrun (torch 2.x's, the venv's `torchrun` script): a C++ program
(--no-python) and a Python program (`import tdist`) join torchrun's agent store in torch's protocol
and run a collective on 3 ranks; and under Debian's torch 1.13 torchrun, whose store predates torch
2.x's protocol, a tdist program either runs or says what to do."""
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import tdist  # noqa: E402
from tdist import _build_info  # noqa: E402

TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
BIN = os.path.dirname(_build_info.TDISTRUN_BUILD) if _build_info.TDISTRUN_BUILD else ""
TORCH_1_PYTHON = "/usr/bin/python3"

# The variables a launcher sets: none of an outer launcher's (a ctest run under tdistrun) may leak in.
LAUNCHER_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                      "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
                      "TDIST_AGENT_STORE_PREFIX", "TDIST_JOB_TOKEN", "TDIST_JOB_TOKEN_FILE", "TDIST_LAUNCHED")

TDIST_PROGRAM = textwrap.dedent("""
    import datetime
    import numpy as np
    import tdist as dist
    dist.init_process_group("tdist", timeout=datetime.timedelta(seconds=60))
    t = np.ones(3, dtype=np.float32) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    print(f"tdist rank {dist.get_rank()} of {dist.get_world_size()}: {t.tolist()}", flush=True)
    dist.destroy_process_group()
""")


def launch(cmd, **env):
    environment = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    environment.update(env)
    return subprocess.run(cmd, env=environment, capture_output=True, text=True, timeout=180)


def require_torchrun():
    if not os.access(TORCHRUN, os.X_OK):
        pytest.skip(f"no torchrun next to {sys.executable} (the torch 2.x venv's)")


def test_cpp_program_under_torchrun():
    require_torchrun()
    program = os.path.join(BIN, "tdist-example-all_reduce")
    if not os.access(program, os.X_OK):
        pytest.skip(f"{program} is not built (the examples)")
    r = launch([TORCHRUN, "--standalone", "--nproc-per-node", "3", "--no-python", program])
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(3):
        assert f"Rank {rank} has data 3 (expected 3)" in r.stdout, r.stdout + r.stderr


def test_python_program_under_torchrun(tmp_path):
    require_torchrun()
    pytest.importorskip("numpy")
    script = tmp_path / "tdist_program.py"
    script.write_text(TDIST_PROGRAM)
    r = launch([TORCHRUN, "--standalone", "--nproc-per-node", "3", str(script)])
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(3):
        assert f"tdist rank {rank} of 3: [6.0, 6.0, 6.0]" in r.stdout, r.stdout + r.stderr


def torch_1_version():
    """The version of the torch Debian's Python has (torch 1.13 here), or None."""
    try:
        r = subprocess.run([TORCH_1_PYTHON, "-c", "import torch, numpy; print(torch.__version__)"],
                           capture_output=True, text=True, timeout=120)
    except OSError:
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_python_program_under_torch_1_torchrun(tmp_path):
    version = torch_1_version()
    if not version or not version.startswith("1."):
        pytest.skip(f"{TORCH_1_PYTHON} has no torch 1.x with numpy (found: {version})")
    script = tmp_path / "tdist_program.py"
    script.write_text(TDIST_PROGRAM)
    # torch 1.13's torchrun on Python 3.11 fails on its own default --redirects 0 (its Std flag of
    # value 0 is no longer among the members Python lists): each stream goes to a file, one of them
    # teed to the console too.
    run = [TORCH_1_PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--log_dir", str(tmp_path)]
    # The c10d rendezvous (the error's advice): no agent store for the workers, rank 0 hosts tdist's.
    r = launch(run + ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}", "--redirects", "2",
                      "--tee", "1", str(script)])
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(2):
        assert f"tdist rank {rank} of 2: [3.0, 3.0, 3.0]" in r.stdout, r.stdout + r.stderr
    # The static rendezvous (torch 1.x's default) hands the workers its agent's store, which speaks
    # torch 1.x's protocol: each worker stops at once, saying what to do.
    r = launch(run + ["--nnodes", "1", "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
                      "--redirects", "1", "--tee", "2", str(script)])
    assert r.returncode != 0, r.stdout + r.stderr
    assert "a torch 1.x TCPStore server does that" in r.stderr and "--rdzv_backend=c10d" in r.stderr, r.stderr
