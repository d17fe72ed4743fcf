"""One rank of the Ctrl-C tests (interrupt_harness.py):
python3 interrupt_rank.py numpy|torch ROLE [CALL].

Ranks meet through env:// (the harness sets MASTER_ADDR/PORT, RANK, WORLD_SIZE). Rank 0 says
"calling" and blocks in CALL, which rank 1 does not answer until told on stdin; the harness
interrupts rank 0 there. Each rank prints what it saw as "key: value" lines.

ROLE: "caught" (rank 0 catches KeyboardInterrupt, then calls all_reduce again), "uncaught" (rank 0
lets it end the process), "peer" (rank 1).
CALL: "all_reduce" (blocking, the default), "wait" (an async all_reduce's Work.wait()), "recv"
(a blocking receive from rank 1), "after_calls" (a blocking all_reduce after two blocking barriers
that both ranks complete: the watch set up by an earlier call, which stays set between calls).
"""
import datetime
import os
import sys
import time

flavor, role = sys.argv[1], sys.argv[2]
call = sys.argv[3] if len(sys.argv) > 3 else "all_reduce"
TIMEOUT = datetime.timedelta(seconds=60)  # far beyond the test: an interrupt that is not seen hangs

if flavor == "torch":
    import torch
    import torch.distributed as dist

    import tdist.torch  # noqa: F401  registers backend "tdist"

    torch.set_num_threads(1)
    dist.init_process_group("tdist", timeout=TIMEOUT)
    make = lambda: torch.ones(4)  # noqa: E731
    Error = RuntimeError
else:
    import numpy as np

    import tdist as dist

    dist.init_process_group("gloo", timeout=TIMEOUT)
    make = lambda: np.ones(4, dtype=np.float32)  # noqa: E731
    Error = dist.DistError


def say(key, value=""):
    print(f"{key}: {value}", flush=True)


if call == "after_calls":
    dist.barrier()
    dist.barrier()

if role == "peer":
    say("ready")
    sys.stdin.readline()  # the harness says when rank 0 is done
    start = time.monotonic()
    try:
        # Over shared memory the operation rank 0 had arrived at may still complete here (its
        # data is there); the next one fails.
        for _ in range(2):
            dist.all_reduce(make())
        say("peer_result", "completed")
    except Error as e:
        say("peer_error", str(e).replace("\n", " "))
    say("peer_seconds", f"{time.monotonic() - start:.3f}")
    sys.exit(0)

say("calling")
try:
    if call == "wait":
        dist.all_reduce(make(), async_op=True).wait()
    elif call == "recv":
        dist.recv(make(), src=1)
    else:
        dist.all_reduce(make())
    say("result", "completed")
except KeyboardInterrupt:
    say("interrupted_at", f"{time.monotonic():.6f}")
    if role == "uncaught":
        raise
start = time.monotonic()
try:
    dist.all_reduce(make())
    say("later", "completed")
except Error as e:
    say("later_error", str(e).replace("\n", " "))
say("later_seconds", f"{time.monotonic() - start:.3f}")
say("exiting")
