#!/usr/bin/env python3
# Medians per size of the rows of loopback_bw.sh / bed_bw.sh output ("A v1 v2 ...", "B ...",
# "T ..."), and the ratios B/A and B/T.   usage: med.py FILE [first size, default 1]
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) > 1:
        rows.setdefault(f[0], []).append([float(x) for x in f[1:]])
first = int(sys.argv[2]) if len(sys.argv) > 2 else 1
n = min(len(r) for v in rows.values() for r in v)
med = {k: [statistics.median(r[i] for r in v) for i in range(n)] for k, v in rows.items()}
print("| size | base (A) | equal segments (B) | tcp | B/A | B/tcp |")
print("|---:|---:|---:|---:|---:|---:|")
for i in range(n):
    a, b = med["A"][i], med["B"][i]
    t = med.get("T", [None] * n)[i]
    size = first << i
    sz = f"{size // 1024} KiB" if size >= 1024 else f"{size} B"
    print(f"| {sz} | {a:.0f} | {b:.0f} | {'-' if t is None else f'{t:.0f}'} | {b / a:.2f} | "
          f"{'-' if t is None else f'{b / t:.2f}'} |")
