#!/usr/bin/env python3
"""The fault campaign on the emulated cluster (scripts/cluster.sh: hosts as network namespaces on
a switch): examples/python/sgd_survives.py under one `tdistrun --on-failure shrink` agent per host,
and a whole host, or its cable, taken away at a random moment while the job trains.

    /usr/bin/python3 bench/fault_campaign_cluster.py --build-dir build [--trials 50]
        [--layouts 2x2,4x2] [--faults host-kill,host-lost,link-cut,rank-kill] [--restart]

Faults (the victim host is never host 0, whose agent serves the job's store: without it no rank
can agree on anything, under torchrun as under tdistrun):
  host-kill  every process of the host is SIGKILLed; its kernel lives on and closes their
             connections, so the survivors have proof at once.
  host-lost  the host's cable is pulled, then its processes are killed: a machine that lost power.
             No byte comes back; the survivors find the host by its silence and the failure
             detection timeout: TDIST_PEER_SILENCE_TIMEOUT=2 s (--silence socket; or the example's
             --op-timeout 2 with --silence op-timeout) and TDIST_FAILURE_DETECTION_TIMEOUT (--detection-timeout, 0.5 s).
  link-cut   the cable is pulled and the host's processes live on: the survivors go on as for
             host-lost; the cut-off ranks cannot reach the store and end when its timeout passes
             (--cut-limit S measures whether they do within S seconds of the survivors' end).
  rank-kill  one worker of the host is SIGKILLed.
--restart also measures rank-kill under `tdistrun --max-restarts 1` on every host (torchrun's
model: every worker restarts from step 0): the time from the kill to the new attempt's first step.

Per case: trials, survivors continued (every survivor finished with the same weights, in a world
of the right size), the time from the fault to the first step every survivor completed after it,
hangs (a survivor not done within the trial's limit; must be 0), wrong results (must be 0), with
--cut-limit how many cut-off hosts ended by themselves within it, and the trials in which a live
rank was declared failed because it said it lived later than the deciding survivor's
TDIST_FAILURE_DETECTION_TIMEOUT (it leaves with an error saying so; the others go on). Exit status 1 when a survivor hung
or computed a wrong result, or a trial's survivors did not continue (the CI subset relies on it).
"""
import argparse
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_campaign import COMPLETED, DONE, EXAMPLE, ROOT, summarize  # noqa: E402

CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
STEPS = 1000000  # the campaign ends a trial with the example's --stop-file
TRIAL_LIMIT_S = 120
PLACED = re.compile(r"round 0: node (\d+) of (\d+), ranks? (\d+)(?:\.\.(\d+))? of (\d+)")
# A live rank the survivors declared failed (it said it lived too late): tdistrun prefixes its lines "[rankN]:".
EXCLUDED = re.compile(r"\[rank(\d+)\]: .*the survivors declared this rank failed")


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout


class Cluster:
    """One emulated cluster, reused by every trial of a layout."""

    def __init__(self, hosts):
        self.name = f"fc{os.getpid() % 100000}"
        self.hosts = hosts
        sh("bash", CLUSTER, "up", self.name, str(hosts))

    def addr(self, h):
        return sh("bash", CLUSTER, "addr", self.name, str(h)).strip()

    def link(self, h, state):
        sh("bash", CLUSTER, "link", self.name, str(h), state)

    def pids(self, h):
        out = sh("ip", "netns", "pids", f"tdc-{self.name}-h{h}", check=False)
        return [int(p) for p in out.split()]

    def kill_host(self, h):
        for pid in self.pids(h):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def start(self, h, cmd, env, log):
        return subprocess.Popen(["bash", CLUSTER, "exec", self.name, str(h), *cmd], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def down(self):
        for h in range(self.hosts):
            self.kill_host(h)
        sh("bash", CLUSTER, "down", self.name, check=False)


def env_for(build_dir, fault, silence, detection):
    env = dict(os.environ)
    env.pop("TDIST_PEER_SILENCE_TIMEOUT", None)
    if fault in ("host-lost", "link-cut") and silence == "socket":
        env["TDIST_PEER_SILENCE_TIMEOUT"] = "2"
    env["PYTHONPATH"] = os.path.join(build_dir, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["TDIST_TIMEOUT"] = "30"  # start-up; the example's --op-timeout bounds the operations
    env["TDIST_FAILURE_DETECTION_TIMEOUT"] = str(detection)
    env["TDIST_JOB_TOKEN"] = os.urandom(16).hex()
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "TDIST_JOB_TOKEN_FILE"):
        env.pop(k, None)
    return env


class Logs:
    """The agents' logs, read as they grow; keeps the lines the judging reads (the example's "[launch rank
    N]" lines, the agents' placement, a rank declared failed)."""

    def __init__(self, paths):
        self.paths = paths
        self.offsets = [0] * len(paths)
        self.kept = [""] * len(paths)

    def text(self, host=None):
        for i, path in enumerate(self.paths):
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets[i])
                    data = f.read()
            except OSError:
                continue
            cut = data.rfind(b"\n") + 1  # whole lines only
            self.offsets[i] += cut
            for line in data[:cut].decode(errors="replace").splitlines(keepends=True):
                if ("[launch rank " in line or line.startswith("tdistrun: round ")
                        or "the survivors declared this rank failed" in line):
                    self.kept[i] += line
        return self.kept[host] if host is not None else "".join(self.kept)


def tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def worker_pids(cluster, h):
    """The example's processes on host h, by pid (the launcher starts them in local-rank order)."""
    pids = []
    for pid in cluster.pids(h):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            # The workers, not the agent (whose arguments name the example too).
            if os.path.basename(argv[0]).startswith(b"python") and b"tdistrun" not in argv[0]:
                pids.append(pid)
        except OSError:
            pass
    return sorted(pids)


def trial(cluster, per_host, fault, policy, rng, a, work):
    """One trial. Returns a dict: continued, recovery (s or None), hung, wrong, cut_side_ended, excluded."""
    hosts = cluster.hosts
    world = hosts * per_host
    port = 20000 + rng.randrange(20000)
    env = env_for(a.build_dir, fault, a.silence, a.detection_timeout)
    endpoint = f"{cluster.addr(0)}:{port}"
    agents, logs = [], []
    for h in range(hosts):
        cmd = [os.path.join(a.build_dir, "bin", "tdistrun"), "--nnodes", str(hosts), "--nproc-per-node",
               str(per_host), "--rdzv-endpoint", endpoint]
        cmd += ["--on-failure", "shrink"] if policy == "shrink" else ["--max-restarts", "1"]
        cmd += [sys.executable, EXAMPLE, "--steps", str(STEPS), "--admit-every", "0", "--stop-file",
                os.path.join(work, "stop")]
        if fault in ("host-lost", "link-cut"):
            # With the sockets' silence, operations may wait longer than a trial: only it can find the host.
            cmd += ["--op-timeout", "2" if a.silence == "op-timeout" else str(10 * TRIAL_LIMIT_S)]
        log_path = os.path.join(work, f"node{h}.log")
        logs.append(log_path)
        with open(log_path, "w") as log:
            agents.append(cluster.start(h, cmd, env, log))
    tails = Logs(logs)
    result = dict(continued=False, recovery=None, hung=False, wrong=False, cut_side_ended=None, excluded=False)
    victim_host = rng.randrange(1, hosts)
    deadline = time.monotonic() + TRIAL_LIMIT_S
    # Every rank has completed step 0: the job trains. Then the fault, at a random moment.
    while len(COMPLETED.findall(tails.text())) < world:
        if time.monotonic() > deadline or any(p.poll() is not None for p in agents):
            result["hung"] = time.monotonic() > deadline
            result["wrong"] = not result["hung"]
            return finish(cluster, agents, logs, result)
        time.sleep(0.05)
    time.sleep(rng.uniform(0.1, 1.5))
    placed = PLACED.search(tails.text(victim_host))
    first = int(placed.group(3))
    last = int(placed.group(4) or first)
    victims = set(range(first, last + 1))
    t_fault = time.time()
    if fault == "host-kill":
        cluster.kill_host(victim_host)
    elif fault == "host-lost":
        cluster.link(victim_host, "down")
        cluster.kill_host(victim_host)
    elif fault == "link-cut":
        cluster.link(victim_host, "down")
    else:  # rank-kill
        pids = worker_pids(cluster, victim_host)
        pid = rng.choice(pids)
        victims = {first + pids.index(pid)} if policy == "shrink" else set()
        os.kill(pid, signal.SIGKILL)
    # Once every survivor has completed a step after the fault, the job is asked to stop.
    # The trial ends when every survivor is done (the agents' own ending is the launcher tests' business).
    survivors = [h for h in range(hosts) if h != victim_host or fault == "rank-kill"]
    while any(agents[h].poll() is None for h in survivors):
        out = tails.text()
        # Live ranks declared failed leave the job: the others go on without them.
        gone = victims | {int(m.group(1)) for m in EXCLUDED.finditer(out)}
        want = world - len(gone)
        stop_after_recovery(out, t_fault, want, gone, work)
        if len([m for m in DONE.finditer(out) if int(m.group(1)) not in gone]) >= want:
            break
        if time.monotonic() > deadline:
            result["hung"] = True
            break
        time.sleep(0.05)
    if fault == "link-cut" and a.cut_limit > 0:
        end = time.monotonic() + a.cut_limit
        while agents[victim_host].poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        result["cut_side_ended"] = agents[victim_host].poll() is not None
    out = tails.text()
    judge(out, world, victims, t_fault, result)
    return finish(cluster, agents, logs, result)


def stop_after_recovery(out, t_fault, survivors, gone, work):
    """Creates the stop file (the example's --stop-file) once every survivor completed a step after
    the fault."""
    firsts = {m.group(1) for m in COMPLETED.finditer(out) if float(m.group(3)) > t_fault and int(m.group(1)) not in gone}
    path = os.path.join(work, "stop")
    if len(firsts) >= survivors and not os.path.exists(path):
        open(path, "w").close()


def judge(out, world, victims, t_fault, result):
    # Live ranks declared failed (they said they lived too late) leave: a wrong membership, counted
    # apart; the others must still finish alike.
    excluded = {int(m.group(1)) for m in EXCLUDED.finditer(out)} - victims
    gone = victims | excluded
    result["excluded"] = bool(excluded)
    want = world - len(gone)
    done = [m for m in DONE.finditer(out) if int(m.group(1)) not in gone]
    result["wrong"] = not result["hung"] and (
        len(done) != want or any(m.group(5) != "yes" for m in done)
        or len({m.group(6) for m in done}) != 1 or any(int(m.group(3)) != want for m in done))
    result["continued"] = not result["wrong"] and not result["hung"] and not excluded
    firsts = {}
    for m in COMPLETED.finditer(out):
        t = float(m.group(3))
        if t > t_fault and int(m.group(1)) not in gone:
            firsts.setdefault(m.group(1), t)
    if len(firsts) == want:
        result["recovery"] = max(firsts.values()) - t_fault


def finish(cluster, agents, logs, result):
    for h, p in enumerate(agents):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        cluster.kill_host(h)
        p.wait()
        cluster.link(h, "up")
    if os.environ.get("FAULT_CAMPAIGN_VERBOSE") or result["wrong"] or result["hung"]:
        for path in logs:
            print(f"--- {path}\n{tail(path)}", file=sys.stderr)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--layouts", default="2x2,4x2", help="HOSTSxRANKS_PER_HOST, comma-separated")
    ap.add_argument("--faults", default="host-kill,host-lost,link-cut,rank-kill")
    ap.add_argument("--restart", action="store_true", help="also rank-kill under tdistrun's restart")
    ap.add_argument("--cut-limit", type=float, default=0,
                    help="link-cut: seconds the cut-off host gets to end by itself after the survivors are "
                         "done (0: not asked; it ends by the store's timeout, TDIST_TIMEOUT=30 s here)")
    ap.add_argument("--silence", choices=("socket", "op-timeout"), default="socket",
                    help="host-lost and link-cut: how the survivors find the silent host: its sockets stop "
                         "answering (TDIST_PEER_SILENCE_TIMEOUT=2) or their operations time out (the "
                         "example's --op-timeout 2)")
    ap.add_argument("--detection-timeout", type=float, default=0.5,
                    help="TDIST_FAILURE_DETECTION_TIMEOUT: how long the deciding survivor waits for ranks that "
                         "neither say they live nor are proven dead (the silent host's, and survivors that "
                         "learn of the failure later than it)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    why = subprocess.run(["bash", CLUSTER, "check"], stdout=subprocess.PIPE, text=True)
    if why.returncode != 0:
        print(f"SKIPPED: {why.stdout.strip()}")
        return 77
    rng = random.Random(a.seed)
    work = f"/tmp/tdist-fault-cluster.{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    print(f"fault campaign on the emulated cluster: {a.trials} trials per case, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} cores", flush=True)
    print("| hosts x ranks | fault | trials | survivors continued | recovery ms (median / p90 / max) | hangs | wrong |"
          " cut-off hosts ended | live ranks excluded |" + (" restart ms (median) | restart / shrink |" if a.restart else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if a.restart else ""))
    failed = 0
    for layout in a.layouts.split(","):
        hosts, per_host = (int(x) for x in layout.split("x"))
        cluster = Cluster(hosts)
        try:
            for fault in a.faults.split(","):
                rows = []
                restart_times = []
                for _ in range(a.trials):
                    for name in os.listdir(work):
                        os.remove(os.path.join(work, name))
                    rows.append(trial(cluster, per_host, fault, "shrink", rng, a, work))
                    if a.restart and fault == "rank-kill":
                        for name in os.listdir(work):
                            os.remove(os.path.join(work, name))
                        r = trial(cluster, per_host, fault, "restart", rng, a, work)
                        if r["recovery"] is not None:
                            restart_times.append(r["recovery"])
                times = [r["recovery"] for r in rows if r["continued"] and r["recovery"] is not None]
                hangs = sum(r["hung"] for r in rows)
                wrong = sum(r["wrong"] for r in rows)
                ended = [r["cut_side_ended"] for r in rows if r["cut_side_ended"] is not None]
                failed += hangs + wrong + (a.trials - sum(r["continued"] for r in rows))
                row = (f"| {hosts} x {per_host} | {fault} | {a.trials} | {sum(r['continued'] for r in rows)} | "
                       f"{summarize(times)} | {hangs} | {wrong} | "
                       f"{f'{sum(ended)} of {len(ended)}' if ended else '-'} | {sum(r['excluded'] for r in rows)} |")
                if a.restart:
                    ratio = (statistics.median(restart_times) / statistics.median(times)
                             if restart_times and times and fault == "rank-kill" else float("nan"))
                    row += (f" {summarize(restart_times).split(' / ')[0]} | {ratio:.1f} |" if fault == "rank-kill"
                            else " - | - |")
                print(row, flush=True)
        finally:
            cluster.down()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
