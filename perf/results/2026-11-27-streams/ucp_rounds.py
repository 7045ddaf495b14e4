#!/usr/bin/env python3
"""ucx_perftest UCP (and UCT am_lat) figures for several columns side by side on loopback,
taking turns test by test and round by round (the column order reversed every other round),
each run as perf/compare.py runs it (server -c 0, client -c 1 -v, compare.py's full-mode
iteration counts, 50th-percentile latency or overall bandwidth); prints every round and the
medians, and the ratio of each column to the column named tcp.

usage: ucp_rounds.py [--rounds N] [--tests stream_lat:65536,...] COLUMN...
  COLUMN: NAME=tcp | NAME=MODULE[:VAR=VALUE...]   (MODULE: a built libuct_src.so)
Every process is bounded by a timeout.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import time

TIMEOUT = 60


def iters(test, size):
    lat = test.endswith("_lat")
    n = 20000 if size <= 8192 else (2000 if size <= 65536 else 200)
    return n if lat else n // 2


def env_for(spec):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("UCX_") or k == "LD_PRELOAD")}
    parts = spec.split(":")
    if parts[0] == "tcp":
        env.update(UCX_TLS="tcp,self", UCX_NET_DEVICES="lo")
        return env, "tcp"
    env.update(UCX_TLS="src,self", UCX_NET_DEVICES="lo", UCX_SRC_MODE="embedded",
               LD_PRELOAD=os.path.abspath(parts[0]))
    for kv in parts[1:]:
        k, v = kv.split("=", 1)
        env[k] = v
    return env, "src"


def run(spec, test, size):
    env, tl = env_for(spec)
    port = str(20000 + random.randrange(20000))
    n = iters(test, size)
    targs = ["-s", str(size), "-n", str(n), "-w", str(max(10, n // 10)), "-t", test]
    if test.startswith("am_"):
        targs += ["-x", tl, "-d", "lo", "-D", "short"]
    server = subprocess.Popen(["timeout", str(TIMEOUT), "ucx_perftest", "-p", port, "-c", "0"] +
                              targs, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            time.sleep(0.05)
            ss = subprocess.run(["ss", "-Hltn", "sport = :" + port], capture_output=True,
                                text=True)
            if ss.stdout.strip():
                break
        out = subprocess.run(["timeout", str(TIMEOUT), "ucx_perftest", "127.0.0.1", "-p", port,
                              "-c", "1", "-v"] + targs, env=env, capture_output=True,
                             text=True).stdout
    finally:
        try:
            server.wait(timeout=TIMEOUT + 5)
        except subprocess.TimeoutExpired:
            server.kill()
    final = [l for l in out.splitlines() if l.strip()[:1].isdigit() and "," in l]
    if not final:
        return None
    cols = final[-1].split(",")
    return float(cols[1] if test.endswith("_lat") else cols[5])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tests", default="stream_lat:65536,stream_lat:1048576,"
                                       "stream_bw:65536,stream_bw:1048576")
    ap.add_argument("columns", nargs="+")
    a = ap.parse_args()
    cols = [c.split("=", 1) for c in a.columns]
    tests = [(t.split(":")[0], int(t.split(":")[1])) for t in a.tests.split(",")]
    res = {}
    for r in range(a.rounds):
        for test, size in tests:
            order = cols if r % 2 == 0 else cols[::-1]
            line = []
            for name, spec in order:
                v = run(spec, test, size)
                res.setdefault((test, size, name), []).append(v)
                line.append("%s=%s" % (name, "-" if v is None else "%.1f" % v))
            print("round %d %-10s %8d  %s" % (r + 1, test, size, "  ".join(line)), flush=True)
    print("\nmedians of %d rounds (latency us, lower better; bandwidth MiB/s, higher better)"
          % a.rounds)
    names = [c[0] for c in cols]
    print("%-22s" % "test size" + "".join("%12s" % n for n in names) +
          "".join("%12s" % ("%s/tcp" % n) for n in names if n != "tcp"))
    for test, size in tests:
        meds = {}
        for n in names:
            vals = [v for v in res[(test, size, n)] if v is not None]
            meds[n] = statistics.median(vals) if vals else None
        row = "%-22s" % ("%s %d" % (test, size))
        row += "".join("%12s" % ("-" if meds[n] is None else "%.1f" % meds[n]) for n in names)
        for n in names:
            if n != "tcp":
                ok = meds[n] is not None and meds.get("tcp")
                row += "%12s" % ("%.2f" % (meds[n] / meds["tcp"]) if ok else "-")
        print(row)


if __name__ == "__main__":
    sys.exit(main())
