#!/usr/bin/env python3
"""Draws a merged tdist-trace timeline (Chrome trace JSON) as one static HTML page (inline SVG):
one band per rank, one row per thread in it (a group's operations, then its steps), a box per
operation or step. For a look without Perfetto's UI (which needs the network), e.g. a screenshot
in headless Chromium:

    python3 tools/tdist-trace/timeline_html.py merged.json merged.html [--from-ms A --to-ms B]
    chromium --headless --no-sandbox --screenshot=merged.png --window-size=1400,700 merged.html

Not part of the build; Python 3 standard library only.
"""
import argparse
import hashlib
import html
import json
import math
import sys

ROW_H, GAP, LABEL_W, WIDTH, TOP = 22, 10, 230, 1400, 40


def color(name, cname):
    if cname == "terrible":
        return "#d62728"
    if cname == "bad":
        return "#ff7f0e"
    op = name.split(" #")[0]
    hue = int(hashlib.md5(op.encode()).hexdigest()[:4], 16) % 360
    return f"hsl({hue},55%,55%)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("html")
    ap.add_argument("--from-ms", type=float, default=None)
    ap.add_argument("--to-ms", type=float, default=None)
    a = ap.parse_args()
    with open(a.trace, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    procs, threads, order, slices = {}, {}, {}, []
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_sort_index":
            order[(e["pid"], e["tid"])] = e["args"]["sort_index"]
        elif e.get("ph") == "X":
            slices.append(e)
            threads.setdefault((e["pid"], e["tid"]), str(e["tid"]))
    if not slices:
        sys.exit("no complete events ('X') in " + a.trace)
    t0 = a.from_ms * 1000 if a.from_ms is not None else min(e["ts"] for e in slices)
    t1 = a.to_ms * 1000 if a.to_ms is not None else max(e["ts"] + e.get("dur", 0) for e in slices)
    scale = (WIDTH - LABEL_W - 40) / max(t1 - t0, 1)

    rows, y = {}, TOP
    out = []
    for pid in sorted({p for p, _ in threads}):
        band_top = y
        for key in sorted((k for k in threads if k[0] == pid), key=lambda k: (order.get(k, k[1]), k[1])):
            rows[key] = y
            out.append(f'<text x="{LABEL_W - 8}" y="{y + 15}" text-anchor="end" class="t">{html.escape(threads[key])}</text>')
            y += ROW_H
        out.insert(0, f'<rect x="0" y="{band_top - 3}" width="{WIDTH}" height="{y - band_top + 6}" fill="#f4f4f4"/>')
        out.append(f'<text x="6" y="{band_top + 15}" class="p">{html.escape(procs.get(pid, f"pid {pid}"))}</text>')
        y += GAP
    for e in slices:
        start, end = e["ts"], e["ts"] + e.get("dur", 0)
        if end < t0 or start > t1:
            continue
        x = LABEL_W + (max(start, t0) - t0) * scale
        w = max((min(end, t1) - max(start, t0)) * scale, 1.5)
        tip = html.escape(f'{e["name"]}  {e.get("dur", 0)} us  {json.dumps(e.get("args", {}))}')
        out.append(f'<rect x="{x:.1f}" y="{rows[(e["pid"], e["tid"])] + 2}" width="{w:.1f}" height="{ROW_H - 4}" '
                   f'fill="{color(e["name"], e.get("cname"))}"><title>{tip}</title></rect>')
    # Time axis, ms from the trace's start, with enough digits to tell ticks apart when zoomed in
    # to steps of a few microseconds.
    digits = max(1, min(3, -math.floor(math.log10(max(t1 - t0, 1) / 10000))))
    for i in range(11):
        t = t0 + (t1 - t0) * i / 10
        x = LABEL_W + (t - t0) * scale
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 8}" x2="{x:.1f}" y2="{y}" stroke="#ccc"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP - 12}" text-anchor="middle" class="t">{t / 1000:.{digits}f} ms</text>')
    svg = "\n".join(out)
    with open(a.html, "w", encoding="utf-8") as f:
        f.write(f"""<!doctype html><meta charset="utf-8"><title>{html.escape(a.trace)}</title>
<style>body{{margin:0;font-family:sans-serif}} .t{{font-size:12px}} .p{{font-size:13px;font-weight:bold}}</style>
<svg width="{WIDTH}" height="{y + 10}" xmlns="http://www.w3.org/2000/svg">{svg}</svg>
""")
    steps = sum(1 for e in slices if e.get("cat") == "step")
    print(f"{a.html}: {len(slices) - steps} operations, {steps} steps, {len({p for p, _ in threads})} ranks, "
          f"{len(threads)} rows")


if __name__ == "__main__":
    main()
