"""Run by pip_test.sh under the tdistrun a wheel installed, with the venv's python: a 2-rank
all_reduce of NumPy arrays, checked against the sum computed here; prints one line per rank
naming the package it ran (that venv's)."""
import os
import sys

import numpy as np

import tdist as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
mine = np.arange(1000, dtype=np.float32) + rank
t = mine.copy()
dist.all_reduce(t, op=dist.ReduceOp.SUM)
expected = sum(np.arange(1000, dtype=np.float32) + r for r in range(world))
ok = np.array_equal(t, expected)
print("pip all_reduce rank %d of %d: %s (t[:3] = %s), tdist from %s"
      % (rank, world, "OK" if ok else "WRONG", t[:3].tolist(), os.path.dirname(dist.__file__)), flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
