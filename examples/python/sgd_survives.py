#!/usr/bin/env python3
"""Synchronous SGD (sgd.py's network and data) that keeps training when a rank dies.

Each step all-reduces the gradients. When that fails because a rank died, the survivors ask
tdist.failed_ranks() (the same answer everywhere), shrink the default group without those ranks
(tdist.shrink_group: no restart, no launcher), re-cut the training rows over the new world, take
the weights and momentum of the new rank 0 (a broadcast: a step that some survivors finished and
others did not is undone), and redo the step. At the end every survivor checks that its weights
equal rank 0's and prints their digest.

    tdistrun --on-failure shrink --nproc-per-node 4 examples/python/sgd_survives.py \\
        --steps 60 --kill-rank 2 --kill-step 25

A process started with TDIST_JOIN_RUNNING_JOB=1 (tdistrun --on-failure shrink-and-replace starts
one in place of a dead rank) joins the running job: every --admit-every steps the members call
tdist.admit_new_ranks(), and the newcomer takes their state (a broadcast) and trains on.

--kill-rank/--kill-step make that rank kill itself with SIGKILL at that step (before its
all-reduce, or in the middle of it with --kill-inside; --fault stop freezes it instead, --fault
exit exits). Without tdistrun the store lives in
rank 0's process: rank 0 must then survive.
"""
import argparse
import hashlib
import os
import signal
import sys
import time
from datetime import timedelta

import numpy as np

import tdist as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgd import Net, load_data  # noqa: E402  (the same network and data as sgd.py)


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--kill-rank", type=int, default=-1, help="launch rank that kills itself")
    p.add_argument("--kill-step", type=int, default=-1)
    p.add_argument("--kill-inside", action="store_true", help="die between two of the step's all-reduces")
    p.add_argument("--admit-every", type=int, default=5,
                   help="every this many steps the members admit replacements that wait to join (0: never)")
    p.add_argument("--expect-joiners", type=int, default=0,
                   help="for tests: after a recovery, wait at the next admission point until this many "
                        "replacements have joined (a real job admits whoever waits and goes on)")
    p.add_argument("--stop-file", default=None,
                   help="for the fault campaign: train until this file exists (checked every 10 steps, "
                        "agreed through an all-reduce so that every rank stops at the same step)")
    p.add_argument("--op-timeout", type=float, default=None,
                   help="seconds an operation may wait for a peer (set_timeout), while start-up keeps "
                        "TDIST_TIMEOUT: a short one finds a silent rank (a pulled cable) sooner")
    p.add_argument("--fault", choices=("kill", "stop", "exit"), default="kill",
                   help="how the rank dies: SIGKILL, SIGSTOP (silent until someone kills it), or exit(3)")
    return p.parse_args()


def my_rows(train_rows, rank, size, step):
    """This rank's share of the step's batch of 128 rows, re-cut whenever the world changes."""
    rng = np.random.default_rng(step)  # the same batch on every rank
    batch = rng.choice(train_rows, 128, replace=False)
    return batch[rank::size]


def sync_state(model, velocity, step):
    """Everyone takes the new rank 0's weights, momentum and step; returns the step."""
    for k in model.params:
        dist.broadcast(model.params[k], src=0)
        dist.broadcast(velocity[k], src=0)
    at = np.array([step], dtype=np.int64)
    dist.broadcast(at, src=0)
    return int(at[0])


def set_op_timeout(seconds):
    if seconds:
        dist.set_timeout(timedelta(seconds=seconds))


def stop_requested(path):
    """Whether any rank sees `path`: the same answer on every rank, so that all stop at one step."""
    seen = np.array([1 if os.path.exists(path) else 0], dtype=np.int32)
    dist.all_reduce(seen, op=dist.ReduceOp.MAX)
    return bool(seen[0])


def die(launch_rank, step, fault):
    """End (or freeze) this process, saying when: the fault campaign measures the recovery from it."""
    print(f"[launch rank {launch_rank}] killed at step {step} at {time.time():.6f} ({fault})", flush=True)
    if fault == "exit":
        os._exit(3)
    os.kill(os.getpid(), signal.SIGSTOP if fault == "stop" else signal.SIGKILL)


def main():
    args = parse()
    # Under a launcher that restarts the job (torchrun's model), only the first attempt dies.
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        args.kill_rank = -1
    dist.init_process_group("gloo")
    set_op_timeout(args.op_timeout)
    # The rank the launcher started this process as (a replacement's is the rank it replaces).
    launch_rank = int(os.environ.get("RANK", dist.get_rank()))
    x, y = load_data()
    held_out = len(x) // 5
    train_rows = np.arange(len(x) - held_out)
    model = Net(np.random.default_rng(1234))
    velocity = {k: np.zeros_like(v) for k, v in model.params.items()}
    lr, momentum = 0.1, 0.5
    step = 0
    recoveries = 0
    recovering = False
    admitted = 0
    admitted_at = 0  # the step of the last admission point (each step has at most one)
    if dist.joined_running_job():
        # A replacement: the members send the state of the job as it is now.
        args.kill_rank = -1
        step = admitted_at = sync_state(model, velocity, 0)
        print(f"[launch rank {launch_rank}] joined the running job at step {step} as rank {dist.get_rank()} "
              f"of {dist.get_world_size()}", flush=True)
        recovering = True
    while step < args.steps:
        try:
            if args.admit_every and step % args.admit_every == 0 and step != admitted_at:
                admitted_at = step
                joined = dist.admit_new_ranks()
                # A count, not a clock, bounds the wait: every member must call admit_new_ranks as often.
                tries = 1200 if recoveries and admitted < args.expect_joiners else 0
                while not joined and tries:
                    time.sleep(0.05)
                    joined = dist.admit_new_ranks()
                    tries -= 1
                admitted += joined
                if joined:
                    set_op_timeout(args.op_timeout)
                    step = sync_state(model, velocity, step)
                    print(f"[launch rank {launch_rank}] step {step}: admitted {joined} new rank(s); "
                          f"now {dist.get_world_size()} ranks", flush=True)
            if args.stop_file and step % 10 == 0 and stop_requested(args.stop_file):
                break
            rank, size = dist.get_rank(), dist.get_world_size()
            rows = my_rows(train_rows, rank, size, step)
            loss = model.forward_backward(x[rows], y[rows])
            if launch_rank == args.kill_rank and step == args.kill_step and not args.kill_inside:
                die(launch_rank, step, args.fault)
            for i, grad in enumerate(model.grads.values()):
                # Weighted by rows, so that uneven shares after a shrink still give the batch mean.
                grad *= len(rows)
                dist.all_reduce(grad, op=dist.ReduceOp.SUM)
                grad /= 128.0
                if launch_rank == args.kill_rank and step == args.kill_step and args.kill_inside and i == 1:
                    die(launch_rank, step, args.fault)
        except dist.DistError as e:
            dead = dist.failed_ranks()
            print(f"[launch rank {launch_rank}] step {step}: {e}; ranks {dead} failed; shrinking", flush=True)
            dist.shrink_group(dead)
            set_op_timeout(args.op_timeout)  # the new default group starts with TDIST_TIMEOUT
            step = sync_state(model, velocity, step)
            recoveries += 1
            recovering = True
            continue  # the step again, over the survivors
        for k, v in model.params.items():
            velocity[k] = momentum * velocity[k] + model.grads[k]
            v -= lr * velocity[k]
        if recovering or step == 0:
            # The first completed step of this process, and the first after a recovery.
            print(f"[launch rank {launch_rank}] step {step} completed at {time.time():.6f}", flush=True)
            recovering = False
        if dist.get_rank() == 0 and step % 20 == 0:
            print(f"step {step}: loss {loss:.4f} on {dist.get_world_size()} ranks", flush=True)
        step += 1

    flat = np.concatenate([v.ravel() for v in model.params.values()])
    reference = flat.copy()
    dist.broadcast(reference, src=0)
    same = np.array([1 if np.array_equal(flat, reference) else 0], dtype=np.int32)
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    test_x, test_y = x[len(x) - held_out:], y[len(x) - held_out:]
    accuracy = float((model.predict(test_x) == test_y).mean())
    print(f"[launch rank {launch_rank}] done: rank {dist.get_rank()} of {dist.get_world_size()}, "
          f"{recoveries} recoveries, weights identical: {'yes' if same[0] else 'no'}, "
          f"digest {hashlib.sha256(flat.tobytes()).hexdigest()[:16]}, held-out accuracy {accuracy:.3f}", flush=True)
    dist.destroy_process_group()
    if not same[0]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
