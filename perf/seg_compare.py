#!/usr/bin/env python3
"""Fragment sizes of the src transport side by side: MPI and UCP figures with each value of
UCX_SRC_SEG_SIZE given, optionally another build at its defaults, and UCX tcp, taking turns
round by round (the order reversed every other round), the median of the rounds reported.
Loopback only, 2 ranks / 2 processes.

usage: perf/seg_compare.py --build BUILDDIR [--rounds N] [--segs 8k,16k] [--base OTHERDIR]

BUILDDIR (and OTHERDIR, e.g. a build of an earlier commit: column "base") is a configured and
built tree (uct_src/.libs/libuct_src.so, contrib/srcrun). --segs "" runs BUILDDIR at its
defaults only (column "build"). The program builds perf/mpi_bench.c with mpicc into a scratch
directory. Every process runs under a timeout; a figure that could not be measured is printed
as "-". About 7 s per column a round.
"""
import argparse
import collections
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MPI_SIZES = "8K,16K,64K,256K,1M"
UCP_TESTS = [("tag_lat", 8192), ("tag_lat", 65536), ("tag_bw", 65536), ("ucp_am_bw", 65536),
             ("stream_lat", 65536), ("stream_bw", 1048576)]
TIMEOUT = 120


def base_env():
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("UCX_", "OMPI_MCA_")) or k == "LD_PRELOAD")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def variant_build(builds, variant):
    """The build a column runs, and the fragment size it sets (None: the build's default)."""
    if variant in ("build", "base"):
        return builds[variant], None
    return builds["build"], variant


def variant_env(builds, variant):
    env = base_env()
    if variant == "tcp":
        env.update(UCX_TLS="tcp,self", UCX_NET_DEVICES="lo")
        return env
    build, seg = variant_build(builds, variant)
    env.update(UCX_TLS="src,self", UCX_NET_DEVICES="lo",
               LD_PRELOAD=os.path.join(build, "uct_src/.libs/libuct_src.so"))
    if seg is not None:
        env["UCX_SRC_SEG_SIZE"] = seg
    return env


def mpi(builds, mb, variant):
    """lat, bw, bibw at MPI_SIZES: {(test, size): value}."""
    env = variant_env(builds, variant)
    bench = [mb, "--json", "--tests", "lat,bw,bibw", "--sizes", MPI_SIZES]
    if variant == "tcp":
        cmd = ["mpirun", "-np", "2", "-x", "UCX_TLS", "-x", "UCX_NET_DEVICES", "--mca", "pml",
               "ucx", "--mca", "pml_ucx_tls", "any", "--mca", "pml_ucx_devices", "any"] + bench
    else:
        env.pop("LD_PRELOAD")   # srcrun preloads the module and forwards UCX_* to the ranks
        build = variant_build(builds, variant)[0]
        cmd = ["bash", os.path.join(build, "contrib/srcrun"), "--module",
               os.path.join(build, "uct_src/.libs/libuct_src.so"), "mpirun", "-np", "2"] + bench
    try:
        out = subprocess.run(["timeout", str(TIMEOUT)] + cmd, env=env, capture_output=True,
                             text=True).stdout
        return {(r["test"], r["size"]): r["value"] for r in json.loads(out[out.index("["):])}
    except (ValueError, KeyError):
        return {}


def ucp(builds, variant, test, size):
    """ucx_perftest's 50th-percentile latency (us) or bandwidth (MB/s), or None."""
    env = variant_env(builds, variant)
    port = str(20000 + random.randrange(10000))
    server = subprocess.Popen(["timeout", str(TIMEOUT), "ucx_perftest", "-p", port, "-c", "0"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(20):   # until the server listens (bounded)
            time.sleep(0.1)
            ss = subprocess.run(["ss", "-ltn", "sport = :" + port], capture_output=True, text=True)
            if port in ss.stdout:
                break
        out = subprocess.run(["timeout", str(TIMEOUT), "ucx_perftest", "127.0.0.1", "-p", port,
                              "-c", "1", "-t", test, "-s", str(size), "-n", "2000", "-w", "200"],
                             env=env, capture_output=True, text=True).stdout
    finally:
        server.wait()
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "Final:" and len(f) >= 7:
            return float(f[2] if "lat" in test else f[5])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--segs", default="8k,16k")
    ap.add_argument("--base", help="another build, run at its defaults (column 'base')")
    args = ap.parse_args()
    if args.rounds < 1 or args.rounds > 50:
        sys.exit("seg_compare: --rounds must be 1..50")
    builds = {"build": os.path.abspath(args.build)}
    if args.base:
        builds["base"] = os.path.abspath(args.base)
    for build in builds.values():
        if not os.path.exists(os.path.join(build, "uct_src/.libs/libuct_src.so")):
            sys.exit("seg_compare: %s/uct_src/.libs/libuct_src.so not found: build first" % build)
    work = tempfile.mkdtemp()
    try:
        mb = os.path.join(work, "mpi_bench")
        subprocess.run(["mpicc", "-O2", "-o", mb, os.path.join(HERE, "mpi_bench.c")], check=True)
        segs = [v for v in args.segs.split(",") if v]
        variants = (["base"] if args.base else []) + (segs or ["build"]) + ["tcp"]
        res = collections.defaultdict(list)
        for r in range(args.rounds):
            for v in (variants if r % 2 == 0 else variants[::-1]):
                for key, val in mpi(builds, mb, v).items():
                    res[("MPI",) + key + (v,)].append(val)
                for test, size in UCP_TESTS:
                    val = ucp(builds, v, test, size)
                    if val is not None:
                        res[("UCP", test, size, v)].append(val)
            print("round %d of %d done" % (r + 1, args.rounds), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work)
    print("median of %d rounds; latency in us (lower is better), bandwidth in MB/s" % args.rounds)
    names = {"tcp": "ucx tcp", "build": "build", "base": "base"}
    print("%-26s" % "test size" + "".join("%11s" % names.get(v, "seg " + v) for v in variants))
    for key in sorted({k[:-1] for k in res}):
        row = "%-26s" % ("%s %s %s" % key)
        for v in variants:
            vals = res.get(key + (v,), [])
            row += "%11.1f" % statistics.median(vals) if vals else "%11s" % "-"
        print(row)


if __name__ == "__main__":
    main()
