"""Run by pip_test.sh under the tdistrun of a venv that sees torch and has tdist installed with
`pip install --no-build-isolation`: a 2-rank torch all_reduce on backend "tdist" (the plugin the
wheel carries), checked against the sum computed here."""
import os
import sys

import torch
import torch.distributed as dist

import tdist.torch  # noqa: F401  registers backend "tdist"; env:// then uses tdistrun's store

dist.init_process_group("tdist")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.arange(1000, dtype=torch.float32) + rank
dist.all_reduce(t, op=dist.ReduceOp.SUM)
expected = sum(torch.arange(1000, dtype=torch.float32) + r for r in range(world))
ok = torch.equal(t, expected)
print("pip torch all_reduce rank %d of %d on %s: %s (t[:3] = %s), plugin from %s"
      % (rank, world, dist.get_backend(), "OK" if ok else "WRONG", t[:3].tolist(),
         os.path.dirname(tdist.torch._tdist_torch.__file__)), flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
