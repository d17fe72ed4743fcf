"""Ctrl-C in a blocking call: two ranks as separate processes (interrupt_rank.py), SIGINT sent to
rank 0 while it waits for rank 1 (in all_reduce, in an async all_reduce's wait(), or in recv).
Shared by the NumPy module's and the plugin's tests."""
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Bounds on waits, generous for a loaded 2-core machine. The interrupt itself takes a fraction of
# a second (its delay is printed, not asserted: speed is not a test's to judge); any bound well
# under the group's 60 s timeout tells an interrupted wait from one that ran out.
START_S = 60
INTERRUPT_S = 20
EXIT_S = 30


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Rank:
    def __init__(self, flavor, role, rank, port, extra_env, call="all_reduce"):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                   LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", PYTHONUNBUFFERED="1", **extra_env)
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "interrupt_rank.py"), flavor, role, call],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, text=True)
        self.lines = {}
        self._queue = queue.Queue()
        self._err = []
        # Readers on threads: a wait on the pipes is then bounded, and a full pipe never stalls the rank.
        threading.Thread(target=self._pump, args=(self.proc.stdout, self._queue.put), daemon=True).start()
        self._err_reader = threading.Thread(target=self._pump, args=(self.proc.stderr, self._err.append),
                                            daemon=True)
        self._err_reader.start()

    @staticmethod
    def _pump(stream, put):
        for line in stream:
            put(line)
        put(None)

    def read_until(self, key, seconds):
        """Reads "key: value" lines until `key` arrives (its value) or the time is up (None)."""
        deadline = time.monotonic() + seconds
        while key not in self.lines:
            try:
                line = self._queue.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                return None
            if line is None:
                return None
            k, _, v = line.rstrip("\n").partition(": ")
            self.lines[k] = v
        return self.lines[key]

    def finish(self, seconds=EXIT_S):
        """Waits for the exit; returns (exit code, stderr)."""
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"rank did not exit within {seconds} s; stdout {self.lines}\n"
                                 f"stderr {''.join(self._err)}")
        self.read_until(None, 5)  # the rest of stdout
        self._err_reader.join(5)
        return self.proc.returncode, "".join(line for line in self._err if line)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _sleeping(pid):
    """Whether the process's main thread is asleep (state S), i.e. blocked in its wait."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "S"
    except OSError:
        return False


def interrupt_rank0(flavor, role, extra_env=None, call="all_reduce"):
    """Runs the scenario; returns (rank 0's lines, exit code, stderr, seconds from SIGINT to
    KeyboardInterrupt, rank 1's lines)."""
    port = _free_port()
    extra_env = dict(extra_env or {}, TDIST_JOB_TOKEN=secrets.token_hex(16))  # a closed job, as tdistrun's
    r0 = Rank(flavor, role, 0, port, extra_env, call)
    r1 = Rank(flavor, "peer", 1, port, extra_env, call)
    try:
        assert r1.read_until("ready", START_S) is not None, "rank 1 did not start"
        assert r0.read_until("calling", START_S) is not None, "rank 0 did not start"
        # Rank 0 is in all_reduce once its main thread sleeps (its wait wakes every 50 ms; a
        # runnable thread shows R): then the signal cannot land before the call.
        deadline = time.monotonic() + START_S
        while not _sleeping(r0.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        sent = time.monotonic()
        r0.proc.send_signal(signal.SIGINT)
        at = r0.read_until("interrupted_at", INTERRUPT_S)
        assert at is not None, (f"rank 0 saw no KeyboardInterrupt within {INTERRUPT_S} s of SIGINT; "
                                f"lines {r0.lines}")
        delay = float(at) - sent
        print(f"{flavor}: KeyboardInterrupt {delay:.3f} s after SIGINT")
        code, err = r0.finish()
        r1.proc.stdin.write("go\n")
        r1.proc.stdin.flush()
        r1.finish()
        return r0.lines, code, err, delay, r1.lines
    finally:
        r0.kill()
        r1.kill()


# What the later call's error names: the later call, and the interrupted one (the module's blocking
# point-to-point calls are not numbered; the plugin's, an isend/irecv and a wait, are).
LATER_WORDS = {"all_reduce": ("all_reduce #2", "all_reduce #1 was interrupted"),
               "wait": ("all_reduce #2", "all_reduce #1 was interrupted"),
               "recv": ("all_reduce #1", "recv", "was interrupted"),
               "after_calls": ("all_reduce #4", "all_reduce #3 was interrupted")}


def check_interrupted(flavor, call="all_reduce"):
    """Rank 0 catches the KeyboardInterrupt and calls again: checks the delay, the later error,
    the clean exit and that the peer was told."""
    lines, code, err, delay, peer = interrupt_rank0(flavor, "caught", call=call)
    later = lines.get("later_error", "")
    print("later call:", later)
    for words in ("rank 0", "default_pg", "interrupted") + LATER_WORDS[call]:
        assert words in later, (words, lines)
    assert float(lines["later_seconds"]) < 10, lines  # fails at once; bounded far above that
    assert code == 0 and "exiting" in lines, (code, lines, err)
    assert "Traceback" not in err, err
    print("peer:", peer.get("peer_error"))
    assert "peer_error" in peer, peer  # the peer is told, and does not hang
    return later
