#!/usr/bin/env python3
"""Medians of the A/B runs in this directory: put_ab.sh lines ("TEST SIZE round R: A-agent x
B-agent y B-embedded z") and osu_ab.sh blocks ("  A-agent v1 v2 ..." per size)."""
import re
import statistics
import sys

OSU_SIZES = [1 << i for i in range(0, 23)]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def put_ab(path):
    rows = {}
    for line in open(path):
        m = re.match(r"(\S+) (\d+) round \d+: A-agent (\S*) B-agent (\S*) B-embedded (\S*)", line)
        if not m:
            continue
        vals = [float(v) if v else None for v in m.group(3, 4, 5)]
        r = rows.setdefault((m.group(1), int(m.group(2))), ([], [], []))
        for i in range(3):
            r[i].append(vals[i])
    print("| test | size | A agent | B agent | B embedded | B/A agent | B agent/embedded |")
    print("|---|---|---|---|---|---|---|")
    for (test, size), (a, b, e) in sorted(rows.items()):
        ma, mb, me = med(a), med(b), med(e)
        print("| %s | %d | %.4g | %.4g | %.4g | %.2f | %.2f |" % (test, size, ma, mb, me, mb / ma, mb / me))


def osu_ab(path, first):
    cols = {}
    for line in open(path):
        m = re.match(r"\s+(A-agent|B-agent|B-embedded|tcp)\s+(.*)", line)
        if m:
            cols.setdefault(m.group(1), []).append([float(v) for v in m.group(2).split()])
    n = min(len(r) for runs in cols.values() for r in runs)
    sizes = [s for s in OSU_SIZES if s >= first][:n]
    names = ["A-agent", "B-agent", "B-embedded", "tcp"]
    print("| size | " + " | ".join(names) + " | B/A agent | B agent/tcp |")
    print("|---|" + "---|" * (len(names) + 2))
    for i, s in enumerate(sizes):
        m = {k: med([r[i] for r in cols[k]]) for k in names}
        print("| %d | %s | %.2f | %.2f |" % (s, " | ".join("%.4g" % m[k] for k in names),
                                             m["B-agent"] / m["A-agent"], m["B-agent"] / m["tcp"]))


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print("\n" + path)
        if "osu" in path:
            osu_ab(path, 1)
        else:
            put_ab(path)
