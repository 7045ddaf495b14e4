#!/usr/bin/env python3
# Medians of agent_ab.sh's rounds, per test, and their ratios to tcp and to the agent copying.
# usage: med.py FILE...
import re, statistics, sys
rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        m = re.match(r"agent (\S+) (\d+) (np\d+) round \d+: (.*)", line)
        if not m:
            continue
        vals = dict(re.findall(r"(\S+) (\S+)", m.group(4)))
        key = (m.group(1), int(m.group(2)), m.group(3))
        for k, v in vals.items():
            if v != "-":
                rows.setdefault(key, {}).setdefault(k, []).append(float(v))
for (prog, size, np_), cols in rows.items():
    med = {k: statistics.median(v) for k, v in cols.items()}
    unit = "MB/s" if prog in ("osu_bw", "osu_bibw") else "us"
    parts = ["%s %.1f" % (k, med[k]) for k in ("agent-copies", "direct", "embedded", "tcp") if k in med]
    ratios = []
    for k in ("agent-copies", "direct", "embedded"):
        if k in med and "tcp" in med:
            ratios.append("%s/tcp %.2f" % (k, med[k] / med["tcp"]))
    if "embedded" in med and "direct" in med:
        ratios.append("direct/embedded %.2f" % (med["direct"] / med["embedded"]))
    print("%s %d %s (%s, medians of %d): %s; %s" % (prog, size, np_, unit, len(cols["direct"]),
                                                   ", ".join(parts), ", ".join(ratios)))
