#!/usr/bin/env python3
"""Medians of dc_bench runs (run*.txt here): latency, p99, rate, and DC latency over connection
latency per (mode, peers); state columns are the same in every run."""
import glob, statistics, sys

rows = {}
order = []
for path in sorted(glob.glob(sys.argv[1] + '/run[0-9]*.txt' if len(sys.argv) > 1 else 'run[0-9]*.txt')):
    for line in open(path):
        f = line.split()
        if len(f) != 13 or f[0] == 'mode':
            continue
        key = (f[0], int(f[1]))
        if key not in rows:
            rows[key] = []
            order.append(key)
        rows[key].append(f)
print(f"{'mode':9} {'peers':>6} {'lat_us':>7} {'p99_us':>7} {'rate':>9} {'dc/conn':>7} {'nic_B/peer':>10} {'addr_B':>7} runs")
for key in order:
    rs = rows[key]
    med = lambda i: statistics.median(float(r[i]) for r in rs)
    print(f"{key[0]:9} {key[1]:6} {med(4):7.2f} {med(5):7.2f} {med(6):9.0f} {med(7):7.2f} {rs[0][9]:>10} {rs[0][10]:>7} {len(rs)}")
