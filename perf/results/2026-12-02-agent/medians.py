#!/usr/bin/env python3
"""Medians over the quick runs of this directory (quickN-results.csv): src (embedded), src-agent
and UCX tcp (ucx-tcp for MPI) per test, size and placement, with agent/src and agent/tcp.

    python3 medians.py > medians.txt
"""
import collections
import csv
import glob
import statistics

vals = collections.defaultdict(list)
unit = {}
runs = sorted(glob.glob('results-*.csv'))
for path in runs:
    for row in csv.DictReader(open(path)):
        unit[(row['suite'], row['test'])] = row['unit']
        if row['value']:
            vals[(row['suite'], row['test'], row['size'], row['placement'], row['peer'])].append(
                float(row['value']))
print("%-6s %-22s %-8s %-9s %10s %10s %10s %7s %7s  (medians of %d quick runs; n)"
      % ('suite', 'test', 'size', 'place', 'src', 'agent', 'tcp', 'ag/src', 'ag/tcp', len(runs)))
for k in sorted({k[:4] for k in vals}):
    s = vals.get(k + ('src',), [])
    a = vals.get(k + ('src-agent',), [])
    t = vals.get(k + ('tcp',), []) or vals.get(k + ('ucx-tcp',), [])
    if not a:
        continue
    ms = statistics.median(s) if s else None
    ma = statistics.median(a)
    mt = statistics.median(t) if t else None
    fmt = lambda x: ('%10.4g' % x) if x is not None else '%10s' % '-'
    r1 = ('%7.2f' % (ma / ms)) if ms else '%7s' % '-'
    r2 = ('%7.2f' % (ma / mt)) if mt else '%7s' % '-'
    print("%-6s %-22s %-8s %-9s %s %s %s %s %s  %s %s"
          % (k[0], k[1], k[2], k[3], fmt(ms), fmt(ma), fmt(mt), r1, r2, unit.get(k[:2], ''), len(a)))
