#!/usr/bin/python3
"""How often a rank killed with SIGKILL leaves its shared-memory segment in /dev/shm.

    python3 bench/shm_leftovers.py --build build [--trials 20] [--ranks 4] [--pause-ms 0]

Each trial starts a job through the build's tdistrun (--standalone, --nproc-per-node RANKS,
the test program elastic_worker: init_process_group, then all_reduce steps), kills one of its
workers with SIGKILL and, once tdistrun has exited, counts the tdist segments still in
/dev/shm that this job's workers created. Two series:

  inside   the creator of the group's segment (/dev/shm/tdist-arena-<pid>...) is killed as soon
           as the name appears (inotify on /dev/shm): inside the set-up window, before the
           other ranks have mapped it and the name is unlinked. --pause-ms sets
           TDIST_TEST_SHM_CREATE_PAUSE_MS (builds that have it): the creator waits that long
           before announcing the name, so that every kill lands inside the window.
  outside  rank 0 is killed after the job's first completed step (set-up done).

It prints, per series, "left behind: N of TRIALS" and how many kills landed while the name
was still in /dev/shm. Names of other processes on the host are not counted; what a trial
left is removed before the next one (whose tdistrun and first segment would sweep it).
"""
import argparse
import ctypes
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

NAME = re.compile(r"^tdist-([a-z0-9]+)-(\d+)[.-]")
IN_CREATE = 0x100
IN_NONBLOCK = 0o4000


class ShmWatch:
    """New names in /dev/shm, as inotify reports them (polling where inotify is missing)."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK)
        if self.fd >= 0 and self.libc.inotify_add_watch(self.fd, b"/dev/shm", IN_CREATE) < 0:
            os.close(self.fd)
            self.fd = -1
        self.seen = set(os.listdir("/dev/shm"))

    def new_names(self, timeout):
        if self.fd < 0:
            time.sleep(min(timeout, 0.0002))
            now = set(os.listdir("/dev/shm"))
            fresh, self.seen = now - self.seen, now
            return list(fresh)
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        names = []
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        at = 0
        while at + 16 <= len(data):
            _, _, _, length = struct.unpack_from("iIII", data, at)
            names.append(data[at + 16:at + 16 + length].rstrip(b"\0").decode(errors="replace"))
            at += 16 + length
        return names

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
        return int(text[text.rindex(")") + 2:].split()[1])
    except (OSError, ValueError):
        return -1


def names_of(pids):
    out = []
    for n in os.listdir("/dev/shm"):
        m = NAME.match(n)
        if m and int(m.group(2)) in pids:
            out.append(n)
    return out


def trial(args, series, out_dir):
    env = dict(os.environ)
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TDIST_SHM"):
        env.pop(k, None)
    if args.pause_ms and series == "inside":
        env["TDIST_TEST_SHM_CREATE_PAUSE_MS"] = str(args.pause_ms)
    watch = ShmWatch()
    job = subprocess.Popen(
        [os.path.join(args.build, "bin", "tdistrun"), "--standalone", f"--nproc-per-node={args.ranks}",
         "--no-python", os.path.join(args.build, "bin", "elastic_worker"), out_dir, "20", "20"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = set()  # pids of this job's workers that created a segment
    killed_in_window = None
    deadline = time.monotonic() + args.timeout
    try:
        while job.poll() is None and killed_in_window is None and time.monotonic() < deadline:
            for name in watch.new_names(0.05):
                m = NAME.match(name)
                if not m or parent_of(int(m.group(2))) != job.pid:
                    continue
                pid = int(m.group(2))
                workers.add(pid)
                if series == "inside" and m.group(1) == "arena" and killed_in_window is None:
                    present = os.path.exists("/dev/shm/" + name)
                    os.kill(pid, signal.SIGKILL)
                    killed_in_window = present
            if series == "outside" and killed_in_window is None and os.path.exists(os.path.join(out_dir, "progress.0")):
                for pid_file in os.listdir(out_dir):
                    if pid_file.startswith("pid.0."):
                        with open(os.path.join(out_dir, pid_file)) as f:
                            os.kill(int(f.read().split()[0]), signal.SIGKILL)
                        killed_in_window = False
                        break
        # Segments created after the kill (other ranks' rings) count too.
        while job.poll() is None and time.monotonic() < deadline:
            for name in watch.new_names(0.05):
                m = NAME.match(name)
                if m and parent_of(int(m.group(2))) == job.pid:
                    workers.add(int(m.group(2)))
        if job.poll() is None:
            job.kill()
            job.wait()
            print(f"  {series}: tdistrun did not end within {args.timeout}s", file=sys.stderr)
    finally:
        watch.close()
    left = names_of(workers)
    for n in left:
        try:
            os.unlink("/dev/shm/" + n)
        except OSError:
            pass
    return killed_in_window, len(left)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build", help="a build directory with bin/tdistrun and bin/elastic_worker")
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--pause-ms", type=int, default=0, help="TDIST_TEST_SHM_CREATE_PAUSE_MS for the inside series")
    p.add_argument("--timeout", type=float, default=60, help="seconds a trial may take")
    p.add_argument("--series", default="inside,outside")
    args = p.parse_args()
    for prog in ("tdistrun", "elastic_worker"):
        if not os.access(os.path.join(args.build, "bin", prog), os.X_OK):
            sys.exit(f"shm_leftovers.py: no {args.build}/bin/{prog}: build the targets tdistrun and elastic_worker")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {os.uname().nodename}, build {os.path.abspath(args.build)}, "
          f"{args.ranks} ranks, {args.trials} trials" + (f", pause {args.pause_ms} ms" if args.pause_ms else ""))
    for series in args.series.split(","):
        left_total = 0
        in_window = 0
        for _ in range(args.trials):
            out_dir = tempfile.mkdtemp(prefix="tdist-shm-leftovers-")
            try:
                hit, left = trial(args, series, out_dir)
            finally:
                shutil.rmtree(out_dir, ignore_errors=True)
            left_total += 1 if left else 0
            in_window += 1 if hit else 0
        where = "inside the set-up window" if series == "inside" else "outside the set-up window"
        extra = f" (the name was still there at {in_window} of the kills)" if series == "inside" else ""
        print(f"{where}: left behind: {left_total} of {args.trials}{extra}")


if __name__ == "__main__":
    main()
