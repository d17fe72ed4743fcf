#!/usr/bin/env python3
"""Runs torch's own distributed test suite (torch.testing._internal.distributed.distributed_test)
on one backend, "gloo" or "tdist", and writes each test's outcome to a file.

    python tools/torch_suite/run_distributed_test.py --backend tdist --out /tmp/tdist.tsv
    python tools/torch_suite/run_distributed_test.py --backend gloo -k allreduce -k barrier

With the torch venv's python, and PYTHONPATH=<build>/python for "tdist". Prints
`ok N failed N errors N skipped N` and writes one line per test to --out:
`name<TAB>outcome<TAB>seconds<TAB>detail` (outcome: ok, failed, error, skipped; detail: the skip
reason or the last line of the failure, which carries the ranks' exception).
Every test starts WORLD_SIZE rank processes; tests run one at a time.
"""

import argparse
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="tdist", help='"gloo" or "tdist" (default tdist)')
    p.add_argument("--world-size", type=int, default=2,
                   help="ranks per test (default 2, what upstream's CPU CI gives Gloo)")
    p.add_argument("--start-method", choices=("spawn", "fork"), default="spawn",
                   help="how ranks start: spawn as upstream (default) or fork (faster, CPU only)")
    p.add_argument("-k", dest="patterns", action="append", default=[],
                   help="run tests whose name contains this (repeatable)")
    p.add_argument("--tests", nargs="*", default=[], help="run exactly these test names")
    p.add_argument("--tests-file", help="run the test names in this file (one a line, # comments)")
    p.add_argument("--init-method", choices=("file", "env"), default="file",
                   help="$INIT_METHOD as upstream's run_test.py sets it: file:// (default; needed by "
                        "test_barrier_timeout_global) or env://. Ranks start with file:// either way")
    p.add_argument("--test-timeout", type=int, default=300,
                   help="seconds before a test's ranks are killed (torch's default 300)")
    p.add_argument("--lift-gloo-checks", action="store_true",
                   help='let the suite\'s hard-coded `BACKEND == "gloo"` checks accept this backend too')
    p.add_argument("--out", help="per-test outcome file (TSV)")
    p.add_argument("--list", action="store_true", help="list the selected tests and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="print each test as it ends")
    return p.parse_args(argv)


def configure_environment(args):
    # distributed_test.py and common_distributed.py read these when imported.
    os.environ["BACKEND"] = args.backend
    os.environ["WORLD_SIZE"] = str(args.world_size)
    os.environ["TDIST_SUITE_START_METHOD"] = args.start_method
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.test_timeout)
    os.environ["TDIST_SUITE_LIFT_GLOO_CHECKS"] = "1" if args.lift_gloo_checks else "0"
    if args.init_method == "file":
        import atexit
        import shutil
        import tempfile
        shared_dir = tempfile.mkdtemp(prefix="torch_suite_init_")
        atexit.register(shutil.rmtree, shared_dir, True)
        os.environ["INIT_METHOD"] = "file://" + os.path.join(shared_dir, "shared_init_file")
    else:
        os.environ["INIT_METHOD"] = "env://"
    # Ranks share few CPUs: one intra-op thread each, as the plugin's own tests do.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # suite_case must be importable by name in spawned ranks (spawn passes sys.path on).
    if HERE not in sys.path:
        sys.path.insert(0, HERE)


def selected_names(args, all_names):
    wanted = list(args.tests)
    if args.tests_file:
        with open(args.tests_file) as f:
            wanted += [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]
    unknown = sorted(set(wanted) - set(all_names))
    if unknown:
        sys.exit("not in torch's suite: " + ", ".join(unknown))
    names = [n for n in all_names if (not wanted or n in wanted)]
    if args.patterns:
        names = [n for n in names if any(p in n for p in args.patterns)]
    return names


class OutcomeRecorder(unittest.TextTestResult):
    """Keeps (name, outcome, seconds, detail) for every test, in order."""

    live_file = None  # each outcome is appended here as it comes, so a killed run keeps its part

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcomes = []
        self._started = 0.0

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        name = test.id().split(".")[-1]
        detail = " ".join(detail.split())[:400]
        self.outcomes.append((name, outcome, time.monotonic() - self._started, detail))
        if self.live_file:
            with open(self.live_file, "a") as f:
                f.write(format_outcome(self.outcomes[-1]))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "ok")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", last_error_line(self.failures[-1][1]))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", last_error_line(self.errors[-1][1]))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "ok", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def format_outcome(outcome):
    name, result, seconds, detail = outcome
    return "%s\t%s\t%.1f\t%s\n" % (name, result, seconds, detail)


def last_error_line(text):
    """The ranks' exception: the last non-empty line that names an error, else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line or "exited" in line or "timed out" in line:
            return line
    return lines[-1] if lines else ""


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_environment(args)
    import suite_case  # after the environment: it imports distributed_test

    loader = unittest.TestLoader()
    all_names = loader.getTestCaseNames(suite_case.TestDistBackendWithSpawn)
    names = selected_names(args, all_names)
    if args.list:
        print("\n".join(names))
        return 0
    suite = unittest.TestSuite(suite_case.TestDistBackendWithSpawn(n) for n in names)
    if args.out:
        open(args.out, "w").close()
        OutcomeRecorder.live_file = args.out
    runner = unittest.TextTestRunner(resultclass=OutcomeRecorder, verbosity=2 if args.verbose else 1,
                                     stream=sys.stderr)
    started = time.monotonic()
    result = runner.run(suite)
    wall = time.monotonic() - started

    counts = {k: sum(1 for o in result.outcomes if o[1] == k) for k in ("ok", "failed", "error", "skipped")}
    summary = ("backend %s world_size %d start %s: ok %d failed %d errors %d skipped %d (%d tests, %.0f s)"
               % (args.backend, args.world_size, args.start_method, counts["ok"], counts["failed"],
                  counts["error"], counts["skipped"], len(result.outcomes), wall))
    if args.out:
        with open(args.out, "w") as f:
            f.write("# " + summary + "\n")
            f.writelines(format_outcome(o) for o in result.outcomes)
    print(summary)
    return 0 if counts["failed"] == counts["error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
