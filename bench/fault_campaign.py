#!/usr/bin/env python3
"""The fault campaign: examples/python/sgd_survives.py with one rank killed at a random moment,
many times per case, and what happened: how many trials the survivors continued in, the time from
the kill to the first step the survivors completed after it, hangs and wrong results (both must be
0). Optionally the same kill under a launcher that restarts the whole job (torchrun's model), for
the ratio.

    /usr/bin/python3 bench/fault_campaign.py --build-dir build [--trials 50] [--ranks 4,8]
        [--transports shm,tcp] [--faults kill,stop,exit] [--launcher hand|tdistrun] [--restart]

A case is (ranks, transport, fault). Each trial picks the victim, the step and whether it dies
before or inside its step's all-reduces at random (seeded: --seed). kill = SIGKILL; exit =
exit(3); stop = SIGSTOP (the rank stays silent: the survivors find it by the group timeout and
the failure detection timeout, here TDIST_TIMEOUT=2 s and TDIST_FAILURE_DETECTION_TIMEOUT=0.5 s;
the campaign kills it once the survivors are done). --launcher hand starts the ranks itself over
env:// (rank 0's process serves the store, so rank 0 is never the victim); tdistrun runs them
under `tdistrun --on-failure shrink` (the agent serves the store: any rank may die).
--restart also measures the same kill under `tdistrun --max-restarts 1` (every worker restarts
from step 0): the time from the kill to the first completed step of the new attempt.
"""
import argparse
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "python", "sgd_survives.py")
STEPS = 40
TRIAL_LIMIT_S = 120

KILLED = re.compile(r"\[launch rank (\d+)\] killed at step (\d+) at ([\d.]+)")
COMPLETED = re.compile(r"\[launch rank (\d+)\] step (\d+) completed at ([\d.]+)")
DONE = re.compile(r"\[launch rank (\d+)\] done: rank (\d+) of (\d+), (\d+) recoveries, weights identical: (\w+), "
                  r"digest (\w+)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(build_dir, transport, fault):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(build_dir, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["TDIST_SHM"] = "1" if transport == "shm" else "0"
    env["TDIST_TIMEOUT"] = "2" if fault == "stop" else "30"
    env["TDIST_FAILURE_DETECTION_TIMEOUT"] = "0.5"
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "TORCHELASTIC_USE_AGENT_STORE"):
        env.pop(k, None)
    return env


def example_args(victim, step, inside, fault):
    args = ["--steps", str(STEPS), "--kill-rank", str(victim), "--kill-step", str(step), "--fault", fault]
    return args + (["--kill-inside"] if inside else [])


def run_by_hand(build_dir, ranks, transport, fault, args):
    """Starts the ranks over env://; returns (combined output, timed out)."""
    port = free_port()
    procs = []
    for r in range(ranks):
        env = base_env(build_dir, transport, fault)
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE=str(ranks))
        procs.append(subprocess.Popen([sys.executable, EXAMPLE, *args], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return collect(procs, fault)


def run_tdistrun(build_dir, ranks, transport, fault, args, policy):
    cmd = [os.path.join(build_dir, "bin", "tdistrun"), "--standalone", "--nproc-per-node", str(ranks)]
    cmd += ["--on-failure", "shrink"] if policy == "shrink" else ["--max-restarts", "1"]
    cmd += [sys.executable, EXAMPLE, *args]
    proc = subprocess.Popen(cmd, env=base_env(build_dir, transport, fault), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return collect([proc], fault)


def collect(procs, fault):
    """Waits for every process but a stopped victim; kills what is left. Returns (output, hung)."""
    deadline = time.monotonic() + TRIAL_LIMIT_S
    outs = [""] * len(procs)
    hung = False
    pending = set(range(len(procs)))
    while pending:
        for i in sorted(pending):
            p = procs[i]
            if p.poll() is not None:
                outs[i] = p.stdout.read()
                pending.discard(i)
        if not pending:
            break
        # A stopped victim never exits: once everyone else is done, kill it (under tdistrun it is
        # one of the launcher's workers, in the launcher's session).
        if fault == "stop":
            stopped = [i for i in pending if _is_stopped(procs[i].pid)]
            if stopped and len(stopped) == len(pending):
                for i in stopped:
                    procs[i].send_signal(signal.SIGKILL)
                continue
            if len(procs) == 1:
                workers = _workers_in_session(procs[0].pid)
                if workers and all(_is_stopped(pid) for pid in workers):
                    for pid in workers:
                        os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            hung = True
            for i in pending:
                try:
                    os.killpg(procs[i].pid, signal.SIGKILL) if len(procs) == 1 else procs[i].kill()
                except OSError:
                    pass
            for i in pending:
                outs[i] = procs[i].communicate()[0] or ""
            break
        time.sleep(0.05)
    return "".join(outs), hung


def _workers_in_session(sid):
    """The example's processes in session `sid` (tdistrun's workers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if int(entry) != sid and int(fields[3]) == sid and b"sgd_survives.py" in cmd and fields[0] != "Z":
            pids.append(int(entry))
    return pids


def _is_stopped(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def judge(out, ranks, victim, restart=False):
    """(continued, recovery seconds or None, wrong)."""
    kill = KILLED.search(out)
    if not kill:
        return False, None, True
    t_kill = float(kill.group(3))
    after = [float(m.group(3)) for m in COMPLETED.finditer(out) if float(m.group(3)) > t_kill]
    done = [m for m in DONE.finditer(out) if int(m.group(1)) != victim or restart]
    want = ranks if restart else ranks - 1
    wrong = (len(done) != want or any(m.group(5) != "yes" for m in done)
             or len({m.group(6) for m in done}) != 1
             or any(int(m.group(3)) != want for m in done))
    continued = len(done) == want and not wrong
    # The survivors' first completed step after the kill: the latest of them (every survivor is past it).
    firsts = {}
    for m in COMPLETED.finditer(out):
        t = float(m.group(3))
        if t > t_kill:
            firsts.setdefault(m.group(1), t)
    recovery = max(firsts.values()) - t_kill if firsts and after else None
    return continued, recovery, wrong


def summarize(values):
    if not values:
        return "-"
    v = sorted(values)
    return f"{statistics.median(v) * 1000:.0f} / {v[int(0.9 * (len(v) - 1))] * 1000:.0f} / {v[-1] * 1000:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--ranks", default="4,8")
    ap.add_argument("--transports", default="shm,tcp")
    ap.add_argument("--faults", default="kill,stop,exit")
    ap.add_argument("--launcher", choices=("hand", "tdistrun"), default="hand")
    ap.add_argument("--restart", action="store_true", help="also measure tdistrun's restart of the whole job")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    print(f"fault campaign: {a.trials} trials per case, {STEPS} steps, launcher {a.launcher}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} cores", flush=True)
    print("| ranks | transport | fault | trials | survivors continued | recovery ms (median / p90 / max) | "
          "hangs | wrong |" + (" restart ms (median) | restart / shrink |" if a.restart else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if a.restart else ""))
    for ranks in [int(r) for r in a.ranks.split(",")]:
        for transport in a.transports.split(","):
            for fault in a.faults.split(","):
                continued = hangs = wrong = 0
                times, restart_times = [], []
                for _ in range(a.trials):
                    victim = rng.randrange(0 if a.launcher == "tdistrun" else 1, ranks)
                    step = rng.randrange(3, STEPS - 5)
                    args = example_args(victim, step, rng.random() < 0.5, fault)
                    if a.launcher == "hand":
                        out, hung = run_by_hand(a.build_dir, ranks, transport, fault, args)
                    else:
                        out, hung = run_tdistrun(a.build_dir, ranks, transport, fault, args, "shrink")
                    ok, recovery, bad = judge(out, ranks, victim)
                    hangs += hung
                    wrong += bad and not hung
                    continued += ok
                    if recovery is not None and ok:
                        times.append(recovery)
                    if os.environ.get("FAULT_CAMPAIGN_VERBOSE") or (bad and not hung):
                        print(out, file=sys.stderr)
                    if a.restart and fault != "stop":
                        out, _ = run_tdistrun(a.build_dir, ranks, transport, fault, args, "restart")
                        _, r, _ = judge(out, ranks, victim, restart=True)
                        if r is not None:
                            restart_times.append(r)
                row = (f"| {ranks} | {transport} | {fault} | {a.trials} | {continued} | {summarize(times)} | "
                       f"{hangs} | {wrong} |")
                if a.restart:
                    ratio = (statistics.median(restart_times) / statistics.median(times)
                             if restart_times and times else float("nan"))
                    row += f" {summarize(restart_times).split(' / ')[0]} | {ratio:.1f} |"
                print(row, flush=True)


if __name__ == "__main__":
    main()
