"""Ctrl-C in a blocking call: SIGINT to a rank that waits in all_reduce (or in an async all_reduce's
wait(), or in recv) raises KeyboardInterrupt there within a fraction of a second (bounded here at
2 s, for a loaded machine), the group is then failed (a later call fails at once saying it was
interrupted: rank, group, operation and number), the peer learns of it, and the process exits
cleanly, without a traceback from tdist's hook."""
import os
import secrets
import subprocess
import sys

import interrupt_harness as harness


def test_ctrl_c_interrupts_a_blocking_all_reduce_and_fails_the_group():
    harness.check_interrupted("numpy")


def test_ctrl_c_interrupts_the_wait_of_an_async_all_reduce():
    harness.check_interrupted("numpy", "wait")


def test_ctrl_c_interrupts_a_blocking_recv():
    harness.check_interrupted("numpy", "recv")


def test_ctrl_c_interrupts_a_blocking_all_reduce_after_earlier_blocking_calls():
    harness.check_interrupted("numpy", "after_calls")


FORK_SCRIPT = """
import os, signal, numpy as np, tdist as dist
dist.init_process_group("gloo")
dist.all_reduce(np.ones(4, dtype=np.float32))
ours = signal.set_wakeup_fd(-1)
print("between_calls", ours, flush=True)
signal.set_wakeup_fd(ours)
pid = os.fork()
if pid == 0:
    os._exit(10 + signal.set_wakeup_fd(-1))  # 9: unset in the child
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status) - 10, flush=True)
v = np.ones(4, dtype=np.float32)
dist.all_reduce(v)
print("after", v[0], flush=True)
dist.destroy_process_group()
"""


def test_the_wakeup_fd_stays_set_between_calls_and_a_forked_child_unsets_it():
    # The watch's pipe stays Python's wakeup fd between blocking calls (setting it costs two system
    # calls); a child of os.fork() must not keep it: the fd is closed there and may be reused.
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(harness._free_port()), RANK="0",
               WORLD_SIZE="1", TDIST_JOB_TOKEN=secrets.token_hex(16))
    out = subprocess.run([sys.executable, "-c", FORK_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, (out.stdout, out.stderr)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert int(lines["between_calls"]) >= 0, lines
    assert lines["child"] == "-1", lines
    assert lines["after"] == "1.0", lines


def test_uncaught_ctrl_c_under_a_launcher_exits_without_a_traceback(tmp_path):
    error_file = tmp_path / "error.json"
    # TORCHELASTIC_ERROR_FILE, as tdistrun gives its workers, installs tdist's excepthook.
    lines, code, err, delay, _ = harness.interrupt_rank0("numpy", "uncaught",
                                                         {"TORCHELASTIC_ERROR_FILE": str(error_file)})
    assert code != 0 and "later_error" not in lines, (code, lines)
    assert "Traceback" not in err, err
    assert "KeyboardInterrupt" in error_file.read_text()  # the launcher's summary still learns why
