"""Ctrl-C in a blocking call: SIGINT to a rank that waits in all_reduce (or in an async all_reduce's
wait(), or in recv) raises KeyboardInterrupt there within a fraction of a second (bounded here at
2 s, for a loaded machine), the group is then failed (a later call fails at once saying it was
interrupted: rank, group, operation and number), the peer learns of it, and the process exits
cleanly, without a traceback from tdist's hook."""
import interrupt_harness as harness


def test_ctrl_c_interrupts_a_blocking_all_reduce_and_fails_the_group():
    harness.check_interrupted("numpy")


def test_ctrl_c_interrupts_the_wait_of_an_async_all_reduce():
    harness.check_interrupted("numpy", "wait")


def test_ctrl_c_interrupts_a_blocking_recv():
    harness.check_interrupted("numpy", "recv")


def test_uncaught_ctrl_c_under_a_launcher_exits_without_a_traceback(tmp_path):
    error_file = tmp_path / "error.json"
    # TORCHELASTIC_ERROR_FILE, as tdistrun gives its workers, installs tdist's excepthook.
    lines, code, err, delay, _ = harness.interrupt_rank0("numpy", "uncaught",
                                                         {"TORCHELASTIC_ERROR_FILE": str(error_file)})
    assert code != 0 and "later_error" not in lines, (code, lines)
    assert "Traceback" not in err, err
    assert "KeyboardInterrupt" in error_file.read_text()  # the launcher's summary still learns why
