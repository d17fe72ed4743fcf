"""What bench/python_overhead.py and bench/torch_plugin_vs_gloo.py share: sizes, iteration counts,
the timed loop, the alternation of peers and the side-by-side table. Imports neither torch nor
NumPy, so MPI ranks that need only NumPy load it cheaply."""

import statistics
import time


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def show_size(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def iterations(nbytes):
    """Timed calls for one measurement: ~0.2 s of copying at a few GB/s, 20 to 2000 calls; the
    same for every peer, so each library does the same calls."""
    return int(max(20, min(2000, 2e8 / max(nbytes, 1) / 8)))


def time_calls(step, iters, barrier, slowest, calls_per_step=1):
    """The slowest rank's mean seconds per call: warm-up, the library's own barrier, `iters` steps.
    A step may make several calls (a send/recv round trip is two half trips)."""
    for _ in range(max(3, iters // 10)):
        step()
    barrier()
    start = time.perf_counter()
    for _ in range(iters):
        step()
    return slowest((time.perf_counter() - start) / iters / calls_per_step)


def alternating_medians(names, repeat, measure):
    """measure(name) for each name, `repeat` times, reversing the order every other time (no peer
    always meets the machine first); the median per name."""
    samples = {name: [] for name in names}
    for rep in range(repeat):
        for name in (names if rep % 2 == 0 else tuple(reversed(names))):
            samples[name].append(measure(name))
    return {name: statistics.median(v) for name, v in samples.items()}


def print_table(title, rows, ours, peer):
    """rows: dicts with op, bytes and, per mode ("blocking", "async"), the seconds of `ours` and
    `peer` (None where the peer was not measured). One line per op and size; peer/ours above 1
    means ours is faster."""
    print("\n" + title)
    modes = [m for m in ("blocking", "async") if any(m in r for r in rows)]
    head = "%-22s %8s" % ("op", "size")
    for m in modes:
        head += " | %-8s %9s %9s %7s" % (m, ours + " us", peer + " us", "ratio")
    print(head)
    for r in rows:
        line = "%-22s %8s" % (r["op"], show_size(r["bytes"]))
        for m in modes:
            cell = r.get(m) or {}
            a, b = cell.get(ours), cell.get(peer)
            line += " | %-8s %9s %9s %7s" % ("", "%.1f" % (a * 1e6) if a else "-", "%.1f" % (b * 1e6) if b else "-",
                                            "%.2f" % (b / a) if a and b else "-")
        print(line)
    print("(ratio = %s time / %s time: above 1, %s is faster)" % (peer, ours, ours))
