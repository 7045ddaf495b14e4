#!/usr/bin/env python3
"""Medians of dc_bench runs (run*.txt here, the format with settled_B): latency, p99, rate, and
DC latency over connection latency per (mode, peers); the state columns are the first run's
(they differ between runs only by what was in flight at the end)."""
import glob, statistics, sys

rows, order = {}, []
where = sys.argv[1] if len(sys.argv) > 1 else '.'
for path in sorted(glob.glob(where + '/run[0-9]*.txt')):
    for line in open(path):
        f = line.split()
        if len(f) != 14 or f[0] == 'mode':
            continue
        key = (f[0], int(f[1]))
        if key not in rows:
            rows[key] = []
            order.append(key)
        rows[key].append(f)
print(f"{'mode':9} {'peers':>6} {'lat_us':>7} {'p99_us':>7} {'rate':>9} {'dc/conn':>7} "
      f"{'nic_B':>8} {'B/peer':>7} {'settled_B':>9} runs")
for key in order:
    rs = rows[key]
    med = lambda i: statistics.median(float(r[i]) for r in rs)
    print(f"{key[0]:9} {key[1]:6} {med(4):7.2f} {med(5):7.2f} {med(6):9.0f} {med(7):7.2f} "
          f"{rs[0][8]:>8} {rs[0][9]:>7} {rs[0][10]:>9} {len(rs)}")
