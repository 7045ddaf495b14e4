#!/usr/bin/env python3
"""Medians of osu_ab.sh's rows (variant rROUND size value ...) per size: base, new, tcp, and
new/base, new/tcp. usage: med.py FILE [lat|bw]  (lat: lower is better; only labels the columns)"""
import statistics, sys, collections
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 4 and f[1].startswith("r"):
        runs[int(f[2])][f[0]].append(float(f[3]))
print("%-9s %10s %10s %10s %9s %8s  %s" % ("size", "base", "new", "tcp", "new/base", "new/tcp",
                                           "runs new | base"))
for size in sorted(runs):
    m = {v: statistics.median(x) for v, x in runs[size].items()}
    ratio = lambda a, b: ("%.2f" % (m[a] / m[b])) if a in m and b in m and m[b] else "-"
    print("%-9d %10s %10s %10s %9s %8s  %s | %s" % (
        size, *["%.2f" % m[v] if v in m else "-" for v in ("base", "new", "tcp")],
        ratio("new", "base"), ratio("new", "tcp"),
        ",".join("%g" % x for x in runs[size].get("new", [])),
        ",".join("%g" % x for x in runs[size].get("base", []))))
