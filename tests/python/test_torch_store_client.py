"""torch's TCPStore protocol both ways: torch's own client against tdist's store (every query
type, and keys exchanged with a tdist client), tdist's client against torch's server (libuv and
not), an unmodified torch program under tdistrun (tdist programs under torchrun:
test_torch_under_torchrun.py)."""
import datetime
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import tdist  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
T = datetime.timedelta(seconds=30)

# A tdist store and a tdist client in their own process (torch's client may hold the GIL while it
# waits): prints the port, sets "from_tdist", waits for torch's "from_torch" and answers it.
SERVER = textwrap.dedent("""
    import sys, datetime, tdist
    t = datetime.timedelta(seconds=30)
    store = tdist.TCPStore("127.0.0.1", 0, is_master=True, timeout=t, wait_for_workers=False)
    print(store.port, flush=True)
    store.set("from_tdist", "d")
    store.set("answer", b"tdist read " + store.get("from_torch"))
    sys.stdin.read()
""")


def test_torch_client_against_tdist_store_every_query_type():
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        s = dist.TCPStore("127.0.0.1", port, 2, False, timeout=T)  # VALIDATE, PING, ADD "init/"
        assert s.get("from_tdist") == b"d"  # WAIT, then GET
        s.set("from_torch", "t")
        assert s.get("answer") == b"tdist read t"
        assert s.add("n", 5) == 5 and s.add("n", -2) == 3
        s.append("from_torch", "+")
        assert s.compare_set("from_torch", "t+", "x") == b"x"
        assert s.compare_set("from_torch", "nope", "y") == b"x"
        assert s.check(["n", "from_torch"]) and not s.check(["missing"])
        s.multi_set(["a", "b"], ["1", "2"])
        assert s.multi_get(["a", "b"]) == [b"1", b"2"]
        assert s.delete_key("a") and not s.delete_key("a")
        with pytest.raises(dist.DistStoreError):
            s.wait(["never"], datetime.timedelta(milliseconds=200))  # WAIT, then CANCEL_WAIT
        assert s.get("n") == b"3"  # in step after the cancel
        # from_tdist, answer, from_torch, n, b and torch's "init/" (tdist's own counter is not counted)
        assert s.num_keys() == 6
        if hasattr(s, "queue_push"):
            s.queue_push("q", "one")
            s.queue_push("q", "two")
            assert s.queue_len("q") == 2
            assert s.queue_pop("q") == b"one" and s.queue_pop("q", block=False) == b"two"
            with pytest.raises(getattr(dist, "QueueEmptyError", dist.DistStoreError)):
                s.queue_pop("q", block=False)
        if hasattr(s, "list_keys"):
            assert sorted(s.list_keys()) == ["answer", "b", "from_tdist", "from_torch", "n"]  # not "init/"
        if hasattr(s, "barrier"):
            s.barrier("bar", 1)  # BARRIER: counts this arrival in the key "bar"
            assert s.get("bar") == b"1"
        other = dist.TCPStore("127.0.0.1", port, None, False, timeout=T, wait_for_workers=False)
        assert other.get("from_torch") == b"x"
        server.communicate("", timeout=60)
        assert server.returncode == 0, server.stderr
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()


@pytest.mark.parametrize("use_libuv", [True, False])
def test_tdist_client_against_torch_server(use_libuv):
    try:
        server = dist.TCPStore("127.0.0.1", 0, None, True, timeout=T, wait_for_workers=False, use_libuv=use_libuv)
    except Exception as e:  # torch without the older server answers use_libuv=False with an error
        pytest.skip(f"torch {torch.__version__} has no TCPStore server with use_libuv={use_libuv}: {e}")
    c = tdist.TCPStore("127.0.0.1", server.port, timeout=T, protocol="torch")
    c.set("k", "v")
    assert server.get("k") == b"v"
    server.set("from_torch", "t")
    assert c.get("from_torch") == b"t"
    assert c.add("n", 4) == 4 and server.add("n", 1) == 5
    c.append("k", "+")
    assert server.get("k") == b"v+"
    assert c.compare_set("k", "v+", "w") == b"w"
    assert c.check(["k", "n"]) and not c.check(["missing"])
    c.multi_set(["a", "b"], ["1", "2"])
    assert c.multi_get(["a", "b"]) == [b"1", b"2"] == server.multi_get(["a", "b"])
    assert c.delete_key("a") and not server.check(["a"])
    with pytest.raises(tdist.DistStoreError, match="missing keys"):
        c.wait(["never"], datetime.timedelta(milliseconds=200))
    assert c.get("k") == b"w"
    assert c.num_keys() == server.num_keys()
    if hasattr(server, "queue_push"):
        try:
            server.queue_push("q", "from torch")
        except Exception:  # the older server has no queues
            pass
        else:
            c.queue_push("q", "from tdist")
            assert c.queue_len("q") == 2
            assert c.queue_pop("q") == b"from torch"
            assert server.queue_pop("q") == b"from tdist"
            with pytest.raises(tdist.QueueEmptyError):
                c.queue_pop("q", block=False)
    with pytest.raises(tdist.DistValueError, match="8388608 bytes torch's server takes"):
        c.set("big", b"x" * ((8 << 20) + 1))


def _tdist_run_env():
    env = dict(os.environ)
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "TORCHELASTIC_USE_AGENT_STORE",
              "TDIST_AGENT_STORE_PREFIX", "TDIST_JOB_TOKEN", "TDIST_JOB_TOKEN_FILE"):
        env.pop(k, None)
    return env


# An unmodified torch program: no tdist anywhere in it.
PLAIN_TORCH = textwrap.dedent("""
    import datetime
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    t = torch.ones(3) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()} of {dist.get_world_size()}: {t.tolist()}", flush=True)
    dist.destroy_process_group()
""")


def test_plain_torch_program_under_tdistrun(tmp_path):
    script = tmp_path / "plain_torch.py"
    script.write_text(PLAIN_TORCH)
    r = subprocess.run([sys.executable, "-m", "tdist.run", "--standalone", "--nproc-per-node", "2", str(script)],
                       cwd=ROOT, env=_tdist_run_env(), capture_output=True, text=True, timeout=180)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    assert "rank 0 of 2: [3.0, 3.0, 3.0]" in r.stdout and "rank 1 of 2: [3.0, 3.0, 3.0]" in r.stdout
