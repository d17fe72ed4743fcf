"""How the torch 2.x examples start: one process per rank, as torchrun (or `python3 -m tdist.run`)
starts them, meeting through env://. The backend is the first argument, else $TDIST_BACKEND, else
"gloo".

Each example has a run() that works on the default group (already initialized) and returns
(summary line, results); main() passes it the arguments after the backend and prints the summary
on rank 0. The tests (tests/python/test_torch_layers.py) call run() directly on forked ranks,
once per backend, and compare the results.
"""
import os
import sys

import torch
import torch.distributed as dist


def backend_name():
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.environ.get("TDIST_BACKEND", "gloo")


def main(run):
    backend = backend_name()
    # tdist.torch registers backend "tdist"; under tdistrun it also serves env:// from the
    # launcher's store (which speaks tdist's protocol, not torch's), for every backend.
    if backend == "tdist" or os.environ.get("TDIST_AGENT_STORE_PREFIX"):
        import tdist.torch  # noqa: F401
    torch.set_num_threads(1)  # the ranks share this machine's cores
    dist.init_process_group(backend)
    try:
        summary, _ = run(*sys.argv[2:])
        if dist.get_rank() == 0:
            print("%s [%s, %d ranks]" % (summary, backend, dist.get_world_size()), flush=True)
    finally:
        dist.destroy_process_group()
