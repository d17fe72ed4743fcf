"""Launched workers and the elastic agent from Python: a worker's traceback reaches the failure
summary through its error file (TORCHELASTIC_ERROR_FILE), restarts set TORCHELASTIC_RESTART_COUNT,
and env:// uses a launcher's store when TORCHELASTIC_USE_AGENT_STORE says so (torchrun 2.x)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tdist

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON = sys.executable


def _env():
    env = dict(os.environ)
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "TORCHELASTIC_USE_AGENT_STORE"):
        env.pop(k, None)
    return env


def _script(tmp_path, body):
    path = tmp_path / "worker.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_traceback_of_a_worker_is_in_the_summary(tmp_path):
    script = _script(tmp_path, """
        import tdist
        tdist.init_process_group("gloo")
        def train(step):
            if tdist.get_rank() == 1:
                raise ValueError(f"boom at step {step}")
        train(42)
    """)
    r = subprocess.run([PYTHON, "-m", "tdist.run", "--standalone", "--nproc-per-node", "2", script], cwd=ROOT,
                       env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "tdistrun: rank 1 (local_rank 1, pid " in r.stderr
    assert "tdistrun:     ValueError: boom at step 42" in r.stderr
    assert "tdistrun:     | Traceback (most recent call last):" in r.stderr
    assert "in train" in r.stderr


def test_restart_count_reaches_python_workers(tmp_path):
    out = tmp_path / "counts"
    script = _script(tmp_path, f"""
        import os, numpy as np, tdist
        tdist.init_process_group("gloo")
        count = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
        t = np.array([tdist.get_rank() + 1.0])
        tdist.all_reduce(t)
        with open({str(out)!r}, "a") as f:
            f.write(f"{{count}} {{tdist.get_rank()}} {{t[0]}}\\n")
        if count == 0 and tdist.get_rank() == 0:
            raise RuntimeError("first attempt fails")
        tdist.destroy_process_group()
    """)
    r = subprocess.run([PYTHON, "-m", "tdist.run", "--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                        script], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = sorted(out.read_text().split("\n")[:-1])
    assert lines[-2:] == ["1 0 3.0", "1 1 3.0"], lines
    assert "restarting the workers in a new round" in r.stderr


def _run_workers(code, extra_env, n=2):
    procs = []
    for rank in range(n):
        env = _env()
        env.update(RANK=str(rank), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", **extra_env)
        procs.append(subprocess.Popen([PYTHON, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        results.append((p.returncode, out, err))
    return results


_TRAIN = textwrap.dedent("""
    import numpy as np, tdist
    tdist.init_process_group("gloo")
    t = np.array([tdist.get_rank() + 1.0])
    tdist.all_reduce(t)
    assert t[0] == 3.0, t
    tdist.destroy_process_group()
""")


def test_env_init_uses_tdistruns_store():
    # The launcher (here: this test) hosts the store on MASTER_PORT, as tdistrun's agent does.
    # Rank 0 must not try to host one there: the port is taken.
    store = tdist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    results = _run_workers(_TRAIN, dict(MASTER_PORT=str(store.port), TORCHELASTIC_USE_AGENT_STORE="True",
                                        TDIST_AGENT_STORE_PREFIX="/round_7/"))
    for code, out, err in results:
        assert code == 0, err
    assert tdist.PrefixStore("/round_7/", store).check(["tdist/init0/joined/0", "tdist/init0/joined/1"])
    assert np.isfinite(store.num_keys())


def test_cpp_under_a_torch_protocol_agent_store():
    # TORCHELASTIC_USE_AGENT_STORE=True without TDIST_AGENT_STORE_PREFIX: the launcher is torchrun,
    # whose store speaks torch's protocol; a C++ program speaks it too, under torch's prefix. tdist's
    # store speaks both, so here it plays torchrun's.
    from tdist import _build_info
    worker = os.path.join(os.path.dirname(_build_info.TDISTRUN_BUILD), "tdist-example-all_reduce")
    store = tdist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    procs = []
    for rank in range(2):
        env = _env()
        env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(store.port), TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="1")
        env.pop("TDIST_AGENT_STORE_PREFIX", None)
        procs.append(subprocess.Popen([worker], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert tdist.PrefixStore("/worker/attempt_1", store).check(["tdist/init0/joined/0", "tdist/init0/joined/1"])


def test_env_init_under_torchruns_store():
    # torchrun (static rendezvous; torch 2.x for c10d too) hosts torch's TCPStore on MASTER_PORT and
    # sets TORCHELASTIC_USE_AGENT_STORE=True: tdist's client joins it in torch's protocol, under the
    # prefix /worker/attempt_<restart count>.
    torch = pytest.importorskip("torch")
    if int(torch.__version__.split(".")[0]) < 2:
        pytest.skip(f"torch {torch.__version__}: tdist speaks torch 2.x's TCPStore protocol, not 1.x's")
    import torch.distributed as torch_dist
    from datetime import timedelta
    server = torch_dist.TCPStore("127.0.0.1", 0, 3, True, timedelta(seconds=60), wait_for_workers=False)
    results = _run_workers(_TRAIN, dict(MASTER_PORT=str(server.port), TORCHELASTIC_USE_AGENT_STORE="True",
                                        TORCHELASTIC_RESTART_COUNT="2"))
    for code, out, err in results:
        assert code == 0, err
    attempt = torch_dist.PrefixStore("/worker/attempt_2", server)
    attempt.wait(["tdist/init0/joined/0", "tdist/init0/joined/1"], timedelta(seconds=1))


def test_breakpoint_under_tdistrun_gets_the_terminal(tmp_path):
    # The chosen rank's pdb talks to the terminal (tdistrun gives workers pipes and their own
    # process groups); the other rank waits at the barrier. A pseudo-terminal plays the user.
    import pty
    import select
    import time

    script = _script(tmp_path, """
        import tdist
        tdist.init_process_group("gloo")
        x = 40 + tdist.get_rank()
        tdist.breakpoint(rank=1)
        print("after", tdist.get_rank(), flush=True)
        tdist.destroy_process_group()
    """)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    try:
        pid, fd = pty.fork()
    except OSError as e:  # a machine without pseudo-terminals (no /dev/pts)
        pytest.skip(f"no pseudo-terminal here: {e}")
    if pid == 0:  # the child: a session whose controlling terminal is the pty
        os.execve(PYTHON, [PYTHON, "-m", "tdist.run", "--standalone", "--nproc-per-node", "2", script], env)
    out = b""

    def read_until(text, bound_s=60):
        nonlocal out
        end = time.monotonic() + bound_s
        while text not in out and time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    out += os.read(fd, 4096)
                except OSError:  # the pty closed: everyone exited
                    break
        return text in out

    try:
        assert read_until(b"(Pdb) "), out.decode(errors="replace")
        os.write(fd, b"up\n")
        assert read_until(b"tdist.breakpoint(rank=1)"), out.decode(errors="replace")
        os.write(fd, b"p x\n")
        assert read_until(b"41"), out.decode(errors="replace")
        os.write(fd, b"c\n")
        assert read_until(b"[rank0]: after 0") and read_until(b"[rank1]: after 1"), out.decode(errors="replace")
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, out.decode(errors="replace")
    finally:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
