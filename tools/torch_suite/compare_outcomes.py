#!/usr/bin/env python3
"""Compares two outcome files of run_distributed_test.py (a reference backend and another).

    python tools/torch_suite/compare_outcomes.py gloo.tsv tdist.tsv

Prints each file's counts, then, as a Markdown table, every test that is ok in the first and
not in the second, with the second's outcome and detail (the skip reason or the ranks' error),
and the tests ok in the second only.
"""

import sys


def read(path):
    summary, outcomes = "", {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                summary = line[1:].strip()
            elif line.strip():
                name, outcome, seconds, detail = (line.rstrip("\n").split("\t") + [""])[:4]
                outcomes[name] = (outcome, detail)
    return summary, outcomes


def main(reference_path, other_path):
    ref_summary, ref = read(reference_path)
    other_summary, other = read(other_path)
    print(ref_summary)
    print(other_summary)
    lost = [n for n in sorted(ref) if ref[n][0] == "ok" and other.get(n, ("absent", ""))[0] != "ok"]
    gained = [n for n in sorted(other) if other[n][0] == "ok" and ref.get(n, ("absent", ""))[0] != "ok"]
    print("\nok on the first, not on the second: %d\n" % len(lost))
    print("| test | outcome | detail |\n| --- | --- | --- |")
    for n in lost:
        outcome, detail = other.get(n, ("absent", ""))
        print("| %s | %s | %s |" % (n, outcome, detail.replace("|", "\\|")))
    print("\nok on the second, not on the first: %d\n" % len(gained))
    for n in gained:
        print("- %s (first: %s %s)" % (n, ref[n][0] if n in ref else "absent", ref.get(n, ("", ""))[1]))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
