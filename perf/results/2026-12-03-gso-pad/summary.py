#!/usr/bin/env python3
"""summary.py FILE LOWER_IS_BETTER(0|1): medians per label and size of ab.sh output, and each src
label's median over tcp's (for times: below 1 is src ahead; for rates: above 1)."""
import re
import statistics
import sys

runs = {}   # label -> size -> [values]
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ (\S+): (.*)", line)
    if not m:
        continue
    for size, value in re.findall(r"(\d+)=([\d.]+)", m.group(2)):
        runs.setdefault(m.group(1), {}).setdefault(int(size), []).append(float(value))
labels = list(runs)
sizes = sorted({s for by in runs.values() for s in by})
print("size " + " ".join(f"{l:>9}" for l in labels) +
      "".join(f" {l + '/tcp':>9}" for l in labels if l != "tcp"))
for s in sizes:
    med = {l: statistics.median(runs[l][s]) for l in labels if s in runs[l]}
    row = f"{s:>7} " + " ".join(f"{med.get(l, float('nan')):>9.2f}" for l in labels)
    if "tcp" in med:
        row += "".join(f" {med[l] / med['tcp']:>9.2f}" for l in labels if l != "tcp" and l in med)
    print(row)
print("medians of", {l: len(next(iter(runs[l].values()))) for l in labels}, "runs")
