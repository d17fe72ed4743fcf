"""torch's own TCPStore client against tdist's store (a plain torch program under tdistrun): the
store says once, in one line on its stderr, what happened and what to do, instead of a bare
"Connection reset by peer"."""
import datetime
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINE = "torch.distributed TCPStore client connected from 127.0.0.1:"

# A tdist store in its own process (torch's client holds the GIL while it waits): prints its
# port, serves until stdin closes.
SERVER = textwrap.dedent("""
    import sys, datetime, tdist
    store = tdist.TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=30),
                           wait_for_workers=False)
    print(store.port, flush=True)
    sys.stdin.read()
    store.set("still", "serving")
    print(store.get("still").decode(), flush=True)
""")


def test_torch_client_gets_one_line_saying_what_to_do():
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        for world_size in (None, 2):  # torch 1.13's first request differs: set, then add "init/"
            with pytest.raises(RuntimeError):
                s = dist.TCPStore("127.0.0.1", port, world_size, False, timeout=datetime.timedelta(seconds=10))
                s.set("k", "v")  # torch 1.13 waits for no answer to a set
                s.get("k")
        out, err = server.communicate("", timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    print(err)
    assert err.count(LINE) == 1, err
    assert "import tdist.torch" in err and "torchrun" in err, err
    assert out.split() == ["serving"], (out, err)  # the store served on


# torch 2.x's client retries a store that does not answer it until its
# timeout: a short one ends the job soon (serving torch's protocol is issue 34).
PLAIN_TORCH = textwrap.dedent("""
    import datetime
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=8))
    print("joined", flush=True)
""")


def test_plain_torch_program_under_tdistrun_is_told_what_to_do(tmp_path):
    script = tmp_path / "plain_torch.py"
    script.write_text(PLAIN_TORCH)
    env = dict(os.environ)
    env.pop("MASTER_PORT", None)
    r = subprocess.run([sys.executable, "-m", "tdist.run", "--standalone", "--nproc-per-node", "1", str(script)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr)
    assert r.returncode != 0
    assert r.stderr.count(LINE) == 1, r.stderr
    assert "import tdist.torch" in r.stderr, r.stderr
