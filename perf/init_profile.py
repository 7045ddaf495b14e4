#!/usr/bin/env python3
"""The report of perf/init_profile.sh: for each scale job of DIR/run.log (its "# scale job:"
and "# init window" lines), the samples of DIR/perf.data inside the job's MPI_Init window, as
CPU seconds by process and, for the ranks, by what ran: the kernel, libc, Open MPI's runtime
(with PMIx and libevent), pml ucx, UCX's ucp/ucs, UCX's own transports (libuct), the src
transport, the dynamic loader. Counts samples itself (perf script), at the profile's rate.

usage: init_profile.py DIR [--hz 499]"""
import argparse
import collections
import os
import re
import subprocess
import sys


def group(dso):
    base = os.path.basename(dso)
    if dso.startswith("[kernel"):
        return "kernel"
    if base.startswith("libc.so") or dso == "[vdso]":
        return "libc"
    if base.startswith("ld-linux"):
        return "loader"
    if base.startswith("mca_pml_ucx"):
        return "pml ucx"
    if re.match(r"lib(ucp|ucs|ucm)\.", base):
        return "ucp+ucs"
    if base.startswith("libuct.so") or base.startswith("libuct_"):
        return "src" if base.startswith("libuct_src") else "uct (tcp)"
    if re.match(r"lib(open-pal|open-rte|mpi|event|pmix|hwloc)|mca_", base):
        return "Open MPI"
    return "other"


GROUPS = ["kernel", "libc", "Open MPI", "pml ucx", "ucp+ucs", "uct (tcp)", "src", "loader",
          "other"]


def jobs(run_log):
    peer = None
    with open(run_log) as f:
        for line in f:
            if line.startswith("# scale job:"):
                peer = line.split()[-1]
            elif line.startswith("# init window") and peer:
                first, last = line.split()[-2:]
                yield peer, float(first), float(last)
                peer = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--hz", type=float, default=499.0, help="the profile's samples per CPU-s")
    args = ap.parse_args()
    data = os.path.join(args.dir, "perf.data")
    rows = []
    for peer, first, last in jobs(os.path.join(args.dir, "run.log")):
        out = subprocess.run(["perf", "script", "-i", data, "--time", "%f,%f" % (first, last),
                              "-F", "comm,ip,dso"], capture_output=True, text=True).stdout
        comms, ranks = collections.Counter(), collections.Counter()
        for line in out.splitlines():
            m = re.match(r"\s*(.*?)\s+[0-9a-f]+\s+\((.*)\)\s*$", line)
            if not m:
                continue
            comm, dso = m.group(1), m.group(2)
            comms[comm] += 1
            if comm == "mpi_bench":
                ranks[group(dso)] += 1
        rows.append((peer, last - first, comms, ranks))

    print("CPU seconds in each job's MPI_Init window (samples / %g Hz), by process:" % args.hz)
    print("%-10s %8s %9s %9s %7s %7s %7s %7s" % ("job", "window s", "CPU-s", "ranks", "async",
                                                 "orted", "srcd", "other"))
    for peer, win, comms, ranks in rows:
        total = sum(comms.values())
        named = ("mpi_bench", "async", "orted", "srcd")
        print("%-10s %8.1f %9.1f %9.1f %7.1f %7.1f %7.1f %7.1f" % (
            peer, win, total / args.hz, comms["mpi_bench"] / args.hz, comms["async"] / args.hz,
            comms["orted"] / args.hz, comms["srcd"] / args.hz,
            sum(v for k, v in comms.items() if k not in named) / args.hz))
    print("\nThe ranks' main threads (comm mpi_bench), % of their samples by what ran:")
    print("%-10s" % "job" + "".join("%10s" % g for g in GROUPS))
    for peer, win, comms, ranks in rows:
        total = sum(ranks.values()) or 1
        print("%-10s" % peer + "".join("%9.1f%%" % (100.0 * ranks[g] / total) for g in GROUPS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
