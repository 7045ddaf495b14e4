#!/usr/bin/env python3
"""Side-by-side benchmark drivers: every figure of the src transport is measured in the same run
as the transports a user would pick instead, and reported as a ratio (src / peer).

Suites (each on loopback and across two namespace nodes of contrib/netns-testbed.sh; scale on
the bed only):
  uct     ucx_perftest UCT: am_lat, am_bw short and bcopy, put_bw zcopy, get zcopy
          peers: src (embedded engines) and src-agent (every process on its node's srcd, when
          --agent-socket is given) vs UCX tcp
  ucp     ucx_perftest UCP: tag_lat, tag_bw, ucp_am_bw, stream_bw, stream_lat
          peers: UCX_TLS=src,self vs tcp,self
  mpi     perf/mpi_bench: lat, bw, bibw, overlap (2 ranks); msgrate, alltoall, allreduce (4 ranks);
          alltoall, allreduce (8 ranks)
          peers: pml ucx over src; pml ucx over UCX tcp; ob1 + tcp BTL; cm + ofi MTL over
          libfabric udp;ofi_rxd and tcp;ofi_rxm
  osu     the same MPI peers with osu-micro-benchmarks from --osu-dir (OSU_DIR), if given
  wireup  perf/ucp_wireup: ucp_ep_create to first message delivered (cold and warm), src vs tcp
  state   perf/mpi_bench --tests init: MPI_Init, first alltoall, resident memory, descriptors,
          sockets and the src engine's connection state after it, as ranks grow
  scale   the same at the bed's largest size (full mode, 2nodes placement: 256 ranks on 8 nodes
          by default), src-agent beside ucx-tcp and src, rounds in turn, medians; the job's
          wall and CPU time; connections per node from every node's srcctl --json

Run through perf/compare.sh, which builds the benchmark programs and brings the test bed up
and down; this file only measures and reports. See perf/README.md.
"""
import argparse
import csv
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time

MPI_PEERS = ["src", "src-agent", "ucx-tcp", "ob1-tcp", "ofi-rxd", "ofi-tcp"]
UCX_PEERS = ["src", "src-agent", "tcp"]
SRC_PEERS = ("src", "src-agent")
# The scale suite runs ob1-tcp (Open MPI's own TCP, no UCX: the launch and runtime without any
# UCX transport) only when --peers names it: a 256-rank job takes minutes a run. In the table's
# order (src first); a round runs them from the last.
SCALE_PEERS = ["src", "src-agent", "ucx-tcp"]
BED_NET = "198.51.100"

# What each placement uses: devices, addresses, and the nodes processes run on.
PLACEMENTS = {
    "loopback": {"src_dev": "lo", "tcp_dev": "lo", "server": "127.0.0.1",
                 "server_node": None, "client_node": None, "ifinc": "lo"},
    "2nodes": {"src_dev": "veth0", "tcp_dev": "veth0", "server": BED_NET + ".2",
               "server_node": "n2", "client_node": "n1", "ifinc": BED_NET + ".0/24"},
}

HIGHER_IS_BETTER_UNITS = {"MB/s", "msg/s"}


class Driver:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.rows = []
        self.log = open(os.path.join(args.out, "run.log"), "a")
        self.port = 20000 + (os.getpid() % 500) * 20
        self.children = []
        self.footnotes = []

    # ---------------------------------------------------------------- process handling
    def next_port(self):
        self.port += 1
        return self.port

    def base_env(self):
        env = {k: v for k, v in os.environ.items()
               if not (k.startswith(("UCX_", "FI_", "OMPI_MCA_")) or k == "LD_PRELOAD")}
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        return env

    def on_node(self, node, cmd):
        return cmd if node is None else [self.args.testbed, "exec", node] + cmd

    def spawn(self, cmd, env):
        self.log.write("$ %s\n" % " ".join(cmd))
        self.log.flush()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)
        self.children.append(p)
        return p

    def finish(self, p, timeout):
        """Output and exit code of p, or (output, None) if it outlived timeout (then killed)."""
        try:
            out, _ = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            self.kill(p)
            out, _ = p.communicate()
            rc = None
        self.children.remove(p)
        self.log.write(out or "")
        self.log.write("# exit %s\n" % rc)
        self.log.flush()
        return out or "", rc

    def kill(self, p):
        # Our child leads its own process group: TERM it (mpirun then stops its daemons), then KILL.
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                p.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                pass

    def kill_all(self):
        for p in list(self.children):
            self.kill(p)

    def run(self, cmd, env, timeout):
        return self.finish(self.spawn(cmd, env), timeout)

    def add(self, suite, test, size, place, peer, value, unit, note=""):
        row = {"suite": suite, "test": test, "size": size, "placement": place, "peer": peer,
               "value": value, "unit": unit, "note": note}
        self.rows.append(row)
        shown = "n/a (%s)" % note if value is None else "%.4g %s" % (value, unit)
        print("  %-6s %-22s %-9s %-8s %-8s %s" % (suite, test, str(size), place, peer, shown),
              flush=True)

    # ---------------------------------------------------------------- ucx_perftest
    def src_mode(self, env, peer, place):
        """Embedded engines for src; the node's agent for src-agent (the bed's nodes each run
        theirs on @srcd, loopback runs on the one compare.sh started)."""
        if peer == "src-agent":
            env["UCX_SRC_MODE"] = "agent"
            env["UCX_SRC_AGENT_SOCKET"] = self.args.agent_socket if place == "loopback" else "@srcd"
        else:
            env["UCX_SRC_MODE"] = "embedded"

    def peers(self, peers):
        return [p for p in peers if (p != "src-agent" or self.args.agent_socket) and
                (not self.args.peers or p in self.args.peers)]

    def scale_peers(self):
        named = self.args.peers or []
        return self.peers(SCALE_PEERS + (["ob1-tcp"] if "ob1-tcp" in named else []))

    def ucx_env(self, peer, place):
        env = self.base_env()
        pl = PLACEMENTS[place]
        if peer in SRC_PEERS:
            env["LD_PRELOAD"] = self.args.probe + ":" + self.args.module
            env["UCX_TLS"] = "src,self"
            env["UCX_NET_DEVICES"] = pl["src_dev"]
            self.src_mode(env, peer, place)
        else:
            env["UCX_TLS"] = "tcp,self"
            env["UCX_NET_DEVICES"] = pl["tcp_dev"]
        return env

    def wait_listen(self, node, port, limit=10.0):
        """Until something listens on TCP port in node's namespace (bounded)."""
        ns = [] if node is None else ["ip", "netns", "exec", "%s-%s" % (self.args.prefix, node)]
        end = time.time() + limit
        while time.time() < end:
            out = subprocess.run(ns + ["ss", "-Hltn", "sport = :%d" % port],
                                 capture_output=True, text=True).stdout
            if out.strip():
                return True
            time.sleep(0.05)
        return False

    def perftest_cmd(self):
        """ucx_perftest, with -P 0 where it was built with MPI (Debian 13's UCX 1.18): that one
        takes the MPI run-time whenever stdin is no terminal and then wants to be one of two
        mpirun ranks; one built without MPI (Debian 12's) refuses -P."""
        if getattr(self, "_perftest_cmd", None) is None:
            try:
                h = subprocess.run(["ucx_perftest", "-h"], stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=20)
                text = h.stdout + h.stderr
            except (OSError, subprocess.TimeoutExpired):
                text = ""
            self._perftest_cmd = ["ucx_perftest"] + (
                ["-P", "0"] if "disable/enable MPI mode" in text else [])
        return list(self._perftest_cmd)

    def perftest(self, suite, test, size, place, peer, targs, value_col, unit, iters):
        pl = PLACEMENTS[place]
        env = self.ucx_env(peer, place)
        port = self.next_port()
        warm = max(10, iters // 10)
        # The server gets the test's parameters too: UCX 1.18's checks them before it accepts
        # (a UCT test without -d fails there); 1.13's takes the client's.
        test_args = ["-s", str(size), "-n", str(iters), "-w", str(warm)] + targs
        server = self.spawn(self.on_node(pl["server_node"], self.perftest_cmd() +
                                         ["-p", str(port), "-c", "0"] + test_args), env)
        if not self.wait_listen(pl["server_node"], port):
            self.finish(server, 1)
            return self.add(suite, test, size, place, peer, None, unit, "server did not start")
        cmd = self.on_node(pl["client_node"],
                           self.perftest_cmd() + [pl["server"], "-p", str(port), "-c", "1", "-v"] +
                           test_args)
        out, rc = self.run(cmd, env, 60 if not self.quick else 30)
        self.finish(server, 10)
        final = [l for l in out.splitlines() if re.match(r"^\s*\d+,", l)]
        if rc == 0 and final:
            cols = final[-1].split(",")
            return self.add(suite, test, size, place, peer, float(cols[value_col]), unit)
        err = [l for l in out.splitlines() if "ERROR" in l]
        note = "timeout" if rc is None else (
            re.sub(r".*UCX +ERROR +", "", err[0]) if err else "exit %s" % rc)
        if "larger than max supported" in note:
            note = "size above the transport's limit: " + note
        return self.add(suite, test, size, place, peer, None, unit, note[:120])

    def perftest_iters(self, size, lat):
        n = 20000 if size <= 8192 else (2000 if size <= 65536 else 200)
        if not lat:
            n = n // 2
        return max(20, n // 4) if self.quick else n

    def suite_uct(self, place):
        # 50th-percentile latency (col 1), overall bandwidth (col 5) of ucx_perftest -v.
        tests = [("am_lat", ["-t", "am_lat", "-D", "short"], 1, "us", True),
                 ("am_bw/short", ["-t", "am_bw", "-D", "short"], 5, "MiB/s", False),
                 ("am_bw/bcopy", ["-t", "am_bw", "-D", "bcopy"], 5, "MiB/s", False),
                 ("put_bw/zcopy", ["-t", "put_bw", "-D", "zcopy"], 5, "MiB/s", False),
                 ("get/zcopy", ["-t", "get", "-D", "zcopy"], 5, "MiB/s", False)]
        if self.quick:
            tests = [t for t in tests if t[0] in ("am_lat", "am_bw/bcopy", "put_bw/zcopy")]
        pl = PLACEMENTS[place]
        for name, targs, col, unit, lat in tests:
            for size in self.args.sizes:
                for peer in self.peers(UCX_PEERS):
                    tl, dev = ("src", pl["src_dev"]) if peer in SRC_PEERS else ("tcp", pl["tcp_dev"])
                    self.perftest("uct", name, size, place, peer, targs + ["-x", tl, "-d", dev],
                                  col, unit, self.perftest_iters(size, lat))

    def suite_ucp(self, place):
        tests = [("tag_lat", ["-t", "tag_lat"], 1, "us", True),
                 ("tag_bw", ["-t", "tag_bw"], 5, "MiB/s", False),
                 ("ucp_am_bw", ["-t", "ucp_am_bw"], 5, "MiB/s", False),
                 ("stream_lat", ["-t", "stream_lat"], 1, "us", True),
                 ("stream_bw", ["-t", "stream_bw"], 5, "MiB/s", False)]
        if self.quick:
            tests = [t for t in tests if t[0] in ("tag_lat", "tag_bw")]
        for name, targs, col, unit, lat in tests:
            for size in self.args.sizes:
                for peer in self.peers(UCX_PEERS):
                    self.perftest("ucp", name, size, place, peer, targs, col, unit,
                                  self.perftest_iters(size, lat))

    # ---------------------------------------------------------------- wire-up (UCP)
    def suite_wireup(self, place):
        pl = PLACEMENTS[place]
        rounds = "10" if self.quick else "30"
        for peer in self.peers(UCX_PEERS):
            env = self.ucx_env(peer, place)
            port = str(self.next_port())
            server = self.spawn(self.on_node(pl["server_node"],
                                             [self.args.bin + "/ucp_wireup", "-l", pl["server"],
                                              "-p", port, "-r", rounds]), env)
            out, rc = self.run(self.on_node(pl["client_node"],
                                            [self.args.bin + "/ucp_wireup", "-c", pl["server"],
                                             "-p", port, "-r", rounds, "--json"]), env, 60)
            self.finish(server, 10)
            res = None
            for line in out.splitlines():
                if line.startswith("{"):
                    res = json.loads(line)
            for key, label in (("first_us", "ep_to_first_msg/cold"),
                               ("next_us", "ep_to_first_msg/warm"),
                               ("ep_create_first_us", "ep_create/cold")):
                if rc == 0 and res:
                    self.add("wireup", label, 2, place, peer, res[key], "us")
                else:
                    self.add("wireup", label, 2, place, peer, None, "us",
                             "timeout" if rc is None else "exit %s" % rc)

    # ---------------------------------------------------------------- MPI
    def mpi_env(self, peer, place):
        pl = PLACEMENTS[place]
        env = self.base_env()
        fwd = []
        if peer in SRC_PEERS:
            env["LD_PRELOAD"] = self.args.probe + ":" + self.args.module
            env.update(UCX_TLS="src,self", UCX_NET_DEVICES=pl["src_dev"])
            self.src_mode(env, peer, place)
        elif peer == "ucx-tcp":
            # pml and osc ucx, as srcrun selects for src (Debian's defaults disable both).
            env.update(OMPI_MCA_pml="ucx", OMPI_MCA_osc="ucx", OMPI_MCA_pml_ucx_tls="any",
                       OMPI_MCA_pml_ucx_devices="any", UCX_TLS="tcp,self",
                       UCX_NET_DEVICES=pl["tcp_dev"])
            fwd = ["UCX_TLS", "UCX_NET_DEVICES"]
        elif peer == "ob1-tcp":
            env.update(OMPI_MCA_pml="ob1", OMPI_MCA_btl="tcp,self",
                       OMPI_MCA_btl_tcp_if_include=pl["ifinc"])
        else:
            prov = "udp;ofi_rxd" if peer == "ofi-rxd" else "tcp;ofi_rxm"
            env.update(OMPI_MCA_pml="cm", OMPI_MCA_mtl="ofi",
                       OMPI_MCA_mtl_ofi_provider_include=prov, FI_PROVIDER=prov,
                       FI_UDP_IFACE=pl["tcp_dev"], FI_TCP_IFACE=pl["tcp_dev"])
            fwd = ["FI_PROVIDER", "FI_UDP_IFACE", "FI_TCP_IFACE"]
        return env, fwd

    def ompi_major(self):
        """Open MPI's major version (ompi_info), 0 if unknown."""
        if getattr(self, "_ompi_major", None) is None:
            try:
                out = subprocess.run(["ompi_info", "--version"], capture_output=True, text=True,
                                     timeout=20).stdout
            except (OSError, subprocess.TimeoutExpired):
                out = ""
            m = re.search(r"Open MPI v?(\d+)\.", out)
            self._ompi_major = int(m.group(1)) if m else 0
        return self._ompi_major

    def hosts_for(self, nranks, nodes):
        per = [nranks // nodes + (1 if i < nranks % nodes else 0) for i in range(nodes)]
        return ",".join("n%d:%d" % (i + 1, c) for i, c in enumerate(per) if c)

    def mpirun(self, peer, place, nranks, nodes, prog, timeout):
        """Runs prog (a list) on nranks ranks; returns (output, rc)."""
        env, fwd = self.mpi_env(peer, place)
        launcher = ["mpirun"]
        if peer in SRC_PEERS:
            launcher = [self.args.srcrun, "--module", self.args.module, "mpirun"]
        opts = ["--bind-to", "none", "--oversubscribe"]
        if nranks > (os.cpu_count() or 1):
            # More ranks than cores (each node of the bed believes it has all of them): idle
            # ranks yield, for every peer alike.
            opts += ["--mca", "mpi_yield_when_idle", "1"]
        for v in fwd:
            opts += ["-x", v]
        if place == "loopback":
            # Open MPI 4's run-time is kept on lo by oob_tcp_if_include; Open MPI 5's (PRRTE)
            # finds no interface for out-of-band messages with it ("No network interfaces
            # were found"), and a single-node job needs none.
            oob = ["--mca", "oob_tcp_if_include", "lo"] if self.ompi_major() < 5 else []
            cmd = launcher + ["-np", str(nranks)] + oob + opts
        else:
            cmd = [self.args.testbed, "mpi"] + launcher + [
                "-np", str(nranks), "--host", self.hosts_for(nranks, nodes)] + opts
            env["OMPI_MCA_btl_tcp_if_include"] = PLACEMENTS[place]["ifinc"]
        out, rc = self.run(cmd + prog, env, timeout)
        if rc is None and place != "loopback":
            self.clean_bed()
        return out, rc

    def clean_bed(self):
        """After a timeout, stop whatever our job left in the test bed's namespaces."""
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for ns in [l.split()[0] for l in out.splitlines() if l.startswith(self.args.prefix + "-")]:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass

    @staticmethod
    def parse_json_array(out):
        m = re.search(r"^\[\s*$.*?^\]\s*$", out, re.S | re.M)
        if not m:
            m = re.search(r"^\[.*?^\]", out, re.S | re.M)
        return json.loads(m.group(0)) if m else None

    def why(self, out, rc):
        if rc is None:
            return "timeout"
        for pat, note in (("No components were able to be opened|none of the installed "
                           "components", "component not available"),
                          ("mtl:ofi:.*no provider|No provider|fi_getinfo", "no libfabric provider"),
                          ("MPI_ABORT|Abort", "job aborted")):
            if re.search(pat, out):
                return "%s (exit %s)" % (note, rc)
        lines = [l for l in out.splitlines() if l.strip() and "setpgid" not in l]
        return ("exit %s: %s" % (rc, lines[-1][:80])) if lines else "exit %s" % rc

    def mpi_bench(self, suite_tests, place, peer, nranks, nodes, sizes, timeout):
        prog = [self.args.bin + "/mpi_bench", "--json", "--tests", suite_tests,
                "--sizes", ",".join(str(s) for s in sizes),
                "--scale", "0.25" if self.quick else "1"]
        out, rc = self.mpirun(peer, place, nranks, nodes, prog, timeout)
        res = self.parse_json_array(out) if rc == 0 else None
        return res, (None if res else self.why(out, rc))

    def suite_mpi(self, place):
        sizes = self.args.sizes
        t = 120 if self.quick else 300
        for tests, nranks, expect in (("lat,bw,bibw,overlap", 2, ["lat", "bw", "bibw", "overlap"]),
                                      ("msgrate,alltoall,allreduce", 4,
                                       ["msgrate", "alltoall", "allreduce"]),
                                      ("alltoall,allreduce", 8, ["alltoall", "allreduce"])):
            for peer in self.peers(MPI_PEERS):
                res, why = self.mpi_bench(tests, place, peer, nranks, 2, sizes, t)
                for test in expect:
                    for size in sizes:
                        if test == "msgrate" and size > 65536:
                            continue
                        unit = {"lat": "us", "overlap": "us", "alltoall": "us", "allreduce": "us",
                                "msgrate": "msg/s"}.get(test, "MB/s")
                        name = test if test not in ("msgrate", "alltoall", "allreduce") else \
                            "%s/%dr" % (test, nranks)
                        vals = [r["value"] for r in res or []
                                if r["test"] == test and r["size"] == size]
                        self.add("mpi", name, size, place, peer, vals[0] if vals else None, unit,
                                 "" if vals else (why or "not reported"))

    def suite_state(self, place):
        if place == "loopback":
            plan = [(n, 1) for n in ((2, 8) if self.quick else (2, 8, 16, 32, 64))]
        else:
            plan = [(2, 2), (8, 2)] if self.quick else \
                [(2, 2), (8, 2), (16, 4), (32, 8), (64, 8)]
            plan = [(r, min(n, self.args.nodes)) for r, n in plan]
        keys = [("init_us", "us"), ("first_alltoall_us", "us"), ("rss_kib", "KiB"),
                ("fds", "count"), ("sockets", "count"), ("engine_conns", "count"),
                ("engine_state_bytes", "bytes"), ("engine_retransmits", "count")]
        for nranks, nodes in plan:
            for peer in self.peers(MPI_PEERS):
                res, why = self.mpi_bench("init", place, peer, nranks, nodes, [8],
                                          120 if nranks <= 16 else 300)
                label = "%dr/%dn" % (nranks, nodes)
                if peer == "src-agent":
                    self.agent_state(place, label, nodes)
                for key, unit in keys:
                    if key.startswith("engine") and peer != "src":
                        continue
                    vals = [r["value"] for r in res or [] if r["test"] == key]
                    self.add("state", key, label, place, peer, vals[0] if vals else None, unit,
                             "" if vals else (why or "not reported"))

    def agent_state(self, place, label, nodes):
        """Per node, from its agent (srcctl --json): connections to other nodes and the state
        they hold, beside the embedded engines' sum over the node's ranks (engine_* rows)."""
        st, why = self.read_agents(place, nodes)
        if st is None:
            return self.add("state", "node_conns", label, place, "src-agent", None, "count", why)
        self.add("state", "node_conns", label, place, "src-agent", st["node_conns"], "count")
        self.add("state", "node_state_bytes", label, place, "src-agent", st["node_state_bytes"],
                 "bytes")

    def read_agents(self, place, nodes):
        """srcctl --json on every node (or the loopback agent): ({node_conns (the busiest node's
        connections to other nodes), node_conns_min, node_state_bytes (the busiest node's
        connection state), node_attaches_min (processes that attached, the fewest on a node)},
        None), or (None, why)."""
        srcctl = self.args.srcctl
        conns, state, attaches = [], [], []
        for n in ([None] if place == "loopback" else ["n%d" % (i + 1) for i in range(nodes)]):
            cmd = [srcctl, "--json"] + (["-s", self.args.agent_socket] if place == "loopback" else [])
            out, rc = self.run(self.on_node(n, cmd), self.base_env(), 30)
            try:
                st = json.loads(out)
            except ValueError:
                return None, "srcctl on %s: exit %s" % (n or "loopback", rc)
            node_conns, node_bytes = 0, 0
            for e in st["engines"]:
                own = e["address"] + ":"
                remote = [p for p in e["peers"] if not p["peer"].startswith(own)]
                node_conns = max(node_conns, len(remote))
                node_bytes = max(node_bytes, len(e["peers"]) * e["conn_state_bytes"])
            conns.append(node_conns)
            state.append(node_bytes)
            attaches.append(st["agent"]["attaches"])
        return {"node_conns": max(conns), "node_conns_min": min(conns),
                "node_state_bytes": max(state), "node_attaches_min": min(attaches)}, None

    # ---------------------------------------------------------------- scale
    SCALE_KEYS = [("init_us", "us"), ("init_after_last_start_us", "us"),
                  ("init_launch_spread_us", "us"), ("init_own_us", "us"),
                  ("init_own_us_max", "us"), ("init_cpu_us", "us"), ("init_cpu_us_max", "us"),
                  ("init_cpu_total_us", "us"),
                  ("first_alltoall_us", "us"), ("all_pairs_us", "us"),
                  ("job_s", "s"),
                  ("rss_kib", "KiB"), ("rss_kib_max", "KiB"), ("fds", "count"),
                  ("fds_max", "count"), ("sockets", "count"), ("sockets_max", "count"),
                  ("engine_conns", "count"), ("node_conns", "count"),
                  ("node_conns_min", "count"), ("node_state_bytes", "bytes"),
                  ("node_attaches_min", "count")]

    def restart_agents(self):
        """Fresh agents on every node of the bed, so that a src-agent job starts as a job on
        idle nodes does: no connection open, no process attached."""
        tb, env = self.args.testbed, self.base_env()
        self.run([tb, "agents-stop"], env, 60)
        out, rc = self.run([tb, "agents", self.args.srcd, "--log-file",
                            os.path.join(self.args.out, "srcd-bed.log")], env, 60)
        return rc == 0

    def scale_job(self, peer, nranks, nodes):
        """One run of mpi_bench --tests init on nranks ranks over nodes nodes: ({figure: value},
        None) or (None, why); job_s is the job's wall time, launch to exit."""
        self.log.write("# scale job: %s\n" % peer)
        self.log.flush()
        if peer == "src-agent" and not self.restart_agents():
            return None, "the node agents did not restart"
        prog = [self.args.bin + "/mpi_bench", "--json", "--tests", "init", "--sizes", "8",
                "--list-fds"]
        t0 = time.time()
        out, rc = self.mpirun(peer, "2nodes", nranks, nodes, prog, self.args.scale_timeout)
        wall = time.time() - t0
        res = self.parse_json_array(out) if rc == 0 else None
        if not res:
            return None, self.why(out, rc)
        vals = {r["test"]: r["value"] for r in res}
        vals["job_s"] = wall
        if peer == "src-agent":
            st, why = self.read_agents("2nodes", nodes)
            vals.update(st or {})
        return vals, None

    def suite_scale(self, place):
        """The largest job of the bed: nranks ranks on 8 nodes, one agent per node for
        src-agent, beside UCX tcp and embedded engines in the same run; runs rounds, the peers
        in turn (the order reversed every other round), and reports each figure's median."""
        nranks, nodes, runs = self.args.scale_ranks, 8, self.args.scale_runs
        label = "%dr/%dn" % (nranks, nodes)
        place = "%dnodes" % nodes
        peers = self.scale_peers()[::-1]
        got = {p: [] for p in peers}
        why = {p: [] for p in peers}
        if self.args.nodes < nodes:
            for p in peers:
                self.add("scale", "init_us", label, place, p, None, "us",
                         "needs %d nodes of the test bed, %d up" % (nodes, self.args.nodes))
            return
        for i in range(runs):
            for p in (peers if i % 2 == 0 else peers[::-1]):
                vals, w = self.scale_job(p, nranks, nodes)
                if vals is None:
                    why[p].append(w)
                else:
                    got[p].append(vals)
                print("  scale  run %d %-9s %s" % (i + 1, p, w or "init %.1f s, first alltoall "
                      "%.2f s, job %.0f s" % (vals["init_us"] / 1e6,
                                              vals["first_alltoall_us"] / 1e6, vals["job_s"])),
                      flush=True)
        for p in peers:
            for key, unit in self.SCALE_KEYS:
                series = [v[key] for v in got[p] if key in v]
                if key.startswith("node_") and p != "src-agent" or \
                        key == "engine_conns" and p != "src":
                    continue
                if not series:
                    self.add("scale", key, label, place, p, None, unit,
                             "; ".join(sorted(set(why[p]))) or "not reported")
                    continue
                note = "median of %d: %s" % (len(series), ", ".join("%.6g" % v for v in series))
                if why[p]:
                    note += "; %d failed: %s" % (len(why[p]), "; ".join(sorted(set(why[p]))))
                self.add("scale", key, label, place, p, statistics.median(series), unit, note)
        self.footnotes.append("scale: medians of %d runs (%s); each run's figures are in "
                              "results.csv (note)" % (runs, label))

    # ---------------------------------------------------------------- OSU
    # program, ranks, test, unit, column of the figure, sizes, kind. Sizes "all": every size
    # OSU runs by default (1 B .. 4 MiB), or only --sizes when given on the command line;
    # "sizes": --sizes (default two in quick mode, four in full). Kinds: lat and bw are
    # point-to-point, coll collectives (-T mpi_int: OSU's own check of MPI_CHAR sums overflows),
    # rma one-sided through osc/ucx (OSU has no -c for them), init osu_init (no options).
    OSU_PLAN = [("osu_latency", 2, "lat", "us", 1, "all", "lat"),
                ("osu_bw", 2, "bw", "MB/s", 1, "all", "bw"),
                ("osu_bibw", 2, "bibw", "MB/s", 1, "sizes", "bw"),
                ("osu_mbw_mr", 4, "msgrate/4r", "msg/s", 2, "all", "bw"),
                ("osu_alltoall", 4, "alltoall/4r", "us", 1, "sizes", "coll"),
                ("osu_allreduce", 4, "allreduce/4r", "us", 1, "sizes", "coll"),
                ("osu_put_latency", 2, "put_lat", "us", 1, "all", "rma_lat"),
                ("osu_get_bw", 2, "get_bw", "MB/s", 1, "all", "rma_bw"),
                ("osu_init", 2, "init", "ms", None, None, "init")]
    OSU_DEFAULT_SIZES = [1 << i for i in range(23)]
    # Quick mode: fewer timed and warm-up iterations (-i and -x set OSU's small- and
    # large-message counts alike: a bandwidth iteration is a window of 64 messages, 256 MiB at
    # 4 MiB) and fewer warm-up rounds before each validated iteration (-u; OSU's default is 5).
    # Full mode: OSU's own counts.
    OSU_QUICK = {"lat": ["-i", "20", "-x", "10", "-u", "1"], "bw": ["-i", "4", "-x", "2", "-u", "0"],
                 "coll": ["-i", "20", "-x", "2", "-u", "1"], "rma_lat": ["-i", "20", "-x", "10"],
                 "rma_bw": ["-i", "4", "-x", "2"], "init": []}
    # One-sided runs through osc/ucx (the pml ucx peers); the others would run another osc
    # component, not one-sided over their own transport: not run, and why.
    OSU_NO_RMA = ("not run: one-sided is measured through osc/ucx, which this peer does not use; "
                  "its osc would be rdma, pt2pt (an emulation over the pml, disabled by Debian's "
                  "MCA defaults) or sm (shared memory, not the transport)")
    OSU_NO_RMA_OB1 = ("not run: one-sided is measured through osc/ucx; over ob1 and btl tcp, "
                      "osc/rdma fails to create a window (MPI_ERR_WIN), osc/pt2pt is an "
                      "emulation over the pml (disabled by Debian's MCA defaults) and osc/sm "
                      "would measure shared memory")

    def osu_args(self, kind, sizes):
        args = []
        if kind in ("lat", "bw", "coll"):
            args += ["-c"]
        if kind == "coll":
            args += ["-T", "mpi_int"]
        if sizes and kind != "init":
            args += ["-m", "%d:%d" % (min(sizes), max(sizes))]
        if self.quick:
            args += self.OSU_QUICK[kind]
        return args

    def parse_osu(self, out, col):
        """{size: (figure, validation or None)} from OSU's rows, and its header's settings."""
        table, header = {}, {}
        for line in out.splitlines():
            m = re.match(r"^# (Window creation|Synchronization|Datatype): (.*?)\.?\s*$", line)
            if m:
                header[m.group(1)] = m.group(2)
            f = line.split()
            if len(f) > col and re.match(r"^\d+$", f[0]):
                try:
                    table[int(f[0])] = (float(f[col]),
                                        f[-1] if f[-1] in ("Pass", "Fail") else None)
                except ValueError:
                    pass
        return table, header

    def osu_failure(self, out, rc, table):
        """Why a run that did not end well has no figures: OSU's validation error, or the
        run's own reason with the last size OSU completed."""
        failed = sorted(s for s, (_, v) in table.items() if v == "Fail")
        m = re.search(r"DATA VALIDATION ERROR: .* on message size (\d+)", out)
        if failed or m:
            at = failed[0] if failed else int(m.group(1))
            return "OSU validation (-c) failed at %s: run has no figures" % size_label(at)
        why = self.why(out, rc)
        if table:
            why += " after OSU's %s row" % size_label(max(table))
        return why

    def osu_rows(self, name, unit, col, kind, place, peer, sizes, runs, settings,
                 prog):
        """Rows of one OSU program for one peer from its launches (one per round): the median
        of the rounds at each size. A validation failure in any round voids the size (or the
        program, when OSU stopped); a round that failed otherwise is left out, and said so."""
        n = len(runs)
        if kind == "init":
            vals, whys = [], []
            for out, rc in runs:
                m = re.search(r"nprocs: *\d+, min: *([\d.]+) ms, max: *([\d.]+) ms, "
                              r"avg: *([\d.]+) ms", out)
                if rc == 0 and m:
                    vals.append(float(m.group(3)))
                else:
                    whys.append(self.why(out, rc) if rc != 0 else
                                "no 'nprocs: ...' line from osu_init")
            v = statistics.median(vals) if vals else None
            self.add("osu", name, sizes[0], place, peer, v, unit,
                     self.rounds_note(vals, n, whys))
            return
        parsed, whys, void = [], [], None
        for out, rc in runs:
            table, header = self.parse_osu(out, col)
            if rc == 0 and header:
                settings.setdefault(prog, header)
            if rc == 0:
                parsed.append(table)
                continue
            why = self.osu_failure(out, rc, table)
            if why.startswith("OSU validation"):
                void = why
            whys.append(why)
        # Every size OSU ran: with -m MIN:MAX (--sizes, and the collectives and osu_bibw) that
        # is every power of two between them, not only the sizes asked for.
        rows = list(sizes) + sorted({s for t in parsed for s in t} - set(sizes))
        for size in rows:
            got = [t[size] for t in parsed if size in t]
            vals = [v for v, status in got if status != "Fail"]
            if void or not parsed:
                v, note = None, void or (whys[0] if whys else "no run")
            elif any(status == "Fail" for _, status in got):
                v, note = None, "OSU validation (-c) failed"
            elif not vals:
                v, note = None, "size not run by OSU (powers of two from the smallest size)"
            else:
                v, note = statistics.median(vals), self.rounds_note(vals, n, whys)
            self.add("osu", name, size, place, peer, v, unit, note)

    @staticmethod
    def rounds_note(vals, n, whys):
        """'' for a single round; else the rounds' figures, and why any round has none."""
        if n <= 1:
            return whys[0] if whys else ""
        note = "median of %d: %s" % (len(vals), ", ".join("%.4g" % v for v in vals)) if vals else ""
        if whys:
            note += ("; " if note else "") + "%d of %d rounds without figures (%s)" % (
                len(whys), n, whys[0])
        return note

    def suite_osu(self, place):
        osu = self.args.osu_dir
        found = {}
        for root, _, files in os.walk(osu):
            for f in files:
                if f.startswith("osu_") and os.access(os.path.join(root, f), os.X_OK):
                    found.setdefault(f, os.path.join(root, f))
        t = 150 if self.quick else 900
        settings = {}
        for prog, nranks, name, unit, col, which, kind in self.OSU_PLAN:
            nodes = 2 if place != "loopback" else 1
            if kind == "init":
                sizes, explicit = ["%dr/%dn" % (nranks, nodes)], []
            elif which == "all" and not self.args.sizes_given:
                sizes, explicit = list(self.OSU_DEFAULT_SIZES), []
            else:
                sizes = explicit = self.args.sizes
            runs = {}
            for rnd in range(self.args.osu_runs):
                # Peers in turn, the order reversed every other round, so that a slow spell of
                # the machine does not fall on one peer's launches.
                order = self.peers(MPI_PEERS)
                for peer in (order if rnd % 2 == 0 else order[::-1]):
                    if prog not in found or (kind.startswith("rma") and
                                             peer not in SRC_PEERS + ("ucx-tcp",)):
                        continue
                    args = [found[prog]] + self.osu_args(kind, explicit)
                    runs.setdefault(peer, []).append(self.mpirun(peer, place, nranks, 2, args, t))
            for peer in self.peers(MPI_PEERS):
                if prog not in found:
                    for size in sizes:
                        self.add("osu", name, size, place, peer, None, unit,
                                 "%s not found under %s" % (prog, osu))
                    continue
                if peer not in runs:
                    for size in sizes:
                        self.add("osu", name, size, place, peer, None, unit,
                                 self.OSU_NO_RMA_OB1 if peer == "ob1-tcp" else self.OSU_NO_RMA)
                    continue
                self.osu_rows(name, unit, col, kind, place, peer, sizes, runs[peer],
                              settings, prog)
        if settings:
            used = ["%s: %s, %s" % (p, h["Window creation"], h.get("Synchronization", "?"))
                    for p, h in settings.items() if "Window creation" in h]
            note = ("osu (%s): -c validation on osu_latency, osu_bw, osu_bibw, osu_mbw_mr and the "
                    "collectives (-T mpi_int); %s iteration counts" %
                    (place, "quick" if self.quick else "OSU's default"))
            if used:
                note += "; one-sided through osc/ucx with OSU's default window and "\
                    "synchronization (%s)" % "; ".join(used)
            self.footnotes.append(note)


# -------------------------------------------------------------------- reporting
def ratio(src, peer, unit):
    if src is None or peer is None or peer == 0 or src == 0:
        return None
    return src / peer


def fmt(v):
    if v is None:
        return "n/a"
    if abs(v) >= 100000:
        return "%.3g" % v
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.2f" % v


def size_label(s):
    if isinstance(s, int):
        for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
            if s >= div and s % div == 0:
                return "%d%s" % (s // div, unit)
    return str(s)


def make_table(rows, peers_of):
    out = []
    notes = {}
    keys = []
    for r in rows:
        k = (r["suite"], r["placement"], r["test"], r["size"], r["unit"])
        if k not in keys:
            keys.append(k)
    by = {}
    for r in rows:
        by[(r["suite"], r["placement"], r["test"], r["size"], r["peer"])] = r
    current = None
    for suite, place, test, size, unit in keys:
        peers = peers_of[suite]
        if (suite, place) != current:
            current = (suite, place)
            out.append("")
            out.append("== %s, %s   (ratio = src / peer, agent/ = src-agent / peer; for %s "
                       "higher is better, otherwise lower)" % (suite.upper(), place,
                                             " and ".join(sorted(HIGHER_IS_BETTER_UNITS))))
            head = "%-24s %-8s %-6s %10s" % ("test", "size", "unit", "src")
            for p in peers[1:]:
                head += " %10s %7s" % (p, "ratio")
                if p != "src-agent" and "src-agent" in peers:
                    head += " %7s" % "agent/"
            out.append(head)
            out.append("-" * len(head))
        src = by.get((suite, place, test, size, "src"))
        sv = src["value"] if src else None
        line = "%-24s %-8s %-6s %10s" % (test, size_label(size), unit, fmt(sv))
        agent = by.get((suite, place, test, size, "src-agent"))
        av = agent["value"] if agent else None
        for p in peers[1:]:
            r = by.get((suite, place, test, size, p))
            pv = r["value"] if r else None
            rt = ratio(sv, pv, unit)
            line += " %10s %7s" % (fmt(pv), "%.2f" % rt if rt is not None else "-")
            if p != "src-agent" and "src-agent" in peers:
                at = ratio(av, pv, unit)
                line += " %7s" % ("%.2f" % at if at is not None else "-")
            if r and r["value"] is None and r["note"]:
                notes.setdefault(r["note"], set()).add("%s %s" % (p, suite))
        if src and sv is None and src["note"]:
            notes.setdefault(src["note"], set()).add("src %s" % suite)
        out.append(line)
    if notes:
        out.append("")
        out.append("n/a reasons:")
        for note, who in notes.items():
            out.append("  %s: %s" % (", ".join(sorted(who)), note))
    return "\n".join(out) + "\n"


# The plot's panels, in order: suite, test, title, x axis ("size", "ranks", or "peer": one bar
# per peer and placement). A panel is drawn only when its suite ran and has figures.
PANELS = [("mpi", "lat", "MPI latency (us)", "size"), ("mpi", "bw", "MPI bandwidth (MB/s)", "size"),
          ("ucp", "tag_bw", "UCP tag_bw (MiB/s)", "size"),
          ("state", "first_alltoall_us", "MPI first alltoall (us)", "ranks"),
          ("state", "rss_kib", "resident memory per rank (KiB)", "ranks"),
          ("state", "sockets", "sockets per rank", "ranks"),
          ("osu", "lat", "osu_latency (us)", "size"), ("osu", "bw", "osu_bw (MB/s)", "size"),
          ("osu", "msgrate/4r", "osu_mbw_mr, 4 ranks (msg/s)", "size"),
          ("osu", "bibw", "osu_bibw (MB/s)", "size"),
          ("osu", "put_lat", "osu_put_latency, osc/ucx (us)", "size"),
          ("osu", "get_bw", "osu_get_bw, osc/ucx (MB/s)", "size"),
          ("osu", "alltoall/4r", "osu_alltoall, 4 ranks (us)", "size"),
          ("osu", "allreduce/4r", "osu_allreduce, 4 ranks (us)", "size"),
          ("osu", "init", "osu_init: MPI_Init (ms)", "peer")]


def make_plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (contrib/install-deps.sh installs it): no plot"
    panels = [p for p in PANELS if any(r["suite"] == p[0] and r["test"] == p[1] and
                                       r["value"] is not None for r in rows)]
    if not panels:
        return "no figures to plot (every point n/a, or no suite with a panel ran)"
    cols = min(3, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.4 * cols, 4.3 * nrows + 0.6), squeeze=False)
    styles = {"loopback": "-", "2nodes": "--"}
    colors = {"src": "black", "src-agent": "tab:purple", "tcp": "tab:blue", "ucx-tcp": "tab:blue", "ob1-tcp": "tab:orange",
              "ofi-rxd": "tab:green", "ofi-tcp": "tab:red"}
    for ax, (suite, test, title, xaxis) in zip(axes.flat, panels):
        series = {}
        for r in rows:
            # Log axes: a figure OSU printed as 0.00 has no point.
            if r["suite"] != suite or r["test"] != test or r["value"] is None or \
                    (r["value"] <= 0 and xaxis != "peer"):
                continue
            x = r["size"] if xaxis == "size" else int(str(r["size"]).split("r")[0])
            series.setdefault((r["peer"], r["placement"]), []).append((x, r["value"]))
        ax.set_title(title)
        if xaxis == "peer":
            # Bars: loopback plain, two nodes hatched.
            keys = sorted(series)
            for i, k in enumerate(keys):
                ax.bar(i, series[k][0][1], color=colors.get(k[0], "gray"), edgecolor="black",
                       hatch="//" if k[1] != "loopback" else None)
            ax.set_xticks(range(len(keys)))
            ax.set_xticklabels(["%s\n%s" % k for k in keys], fontsize=7)
            ax.grid(True, axis="y", alpha=0.3)
            continue
        for (peer, place), pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], styles.get(place, "-"),
                    marker="o", markersize=3 if len(pts) > 8 else 6,
                    linewidth=2.5 if peer == "src" else 1.2,
                    color=colors.get(peer),
                    label="%s (%s)" % (peer, place))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)" if xaxis == "size" else "ranks")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("src beside the transports users pick today (solid: loopback, dashed: two "
                 "namespace nodes)")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=90)
    return None


def versions():
    def cmd(c):
        try:
            return subprocess.run(c, capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    cpu = ""
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
               if l.startswith("model name")][0]
    except (OSError, IndexError):
        pass
    mem = ""
    try:
        mem = "%.1f GiB" % (int(open("/proc/meminfo").readline().split()[1]) / 1048576)
    except (OSError, ValueError):
        pass
    # UCX 1.13 prints "# Version 1.13.1", UCX 1.18 "# Library version: 1.18.1"
    ucx = re.search(r"[Vv]ersion:? ([\d.]+)", cmd(["ucx_info", "-v"]))
    ompi = re.search(r"Open MPI: ([\d.]+)", cmd(["ompi_info", "--version"]) + cmd(["ompi_info"]))
    fi = re.search(r"libfabric: ([\d.]+)", cmd(["fi_info", "--version"]))
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    commit = cmd(["git", "-C", top, "describe", "--always", "--dirty"]).strip() or "?"
    return {"commit": commit, "cpu": cpu, "cores": os.cpu_count(), "memory": mem,
            "kernel": platform.release(), "os": cmd(["sh", "-c", ". /etc/os-release && "
                                                     "echo $PRETTY_NAME"]).strip(),
            "ucx": ucx.group(1) if ucx else "?", "openmpi": ompi.group(1) if ompi else "?",
            "libfabric": fi.group(1) if fi else "?"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--bin", help="directory of mpi_bench, ucp_wireup, probe")
    ap.add_argument("--module")
    ap.add_argument("--srcrun")
    ap.add_argument("--testbed")
    ap.add_argument("--prefix", default=os.environ.get("SRCBED_PREFIX", "srcbed"))
    ap.add_argument("--nodes", type=int, default=2, help="test-bed nodes that are up")
    ap.add_argument("--only", default="uct,ucp,mpi,osu,wireup,state,scale")
    ap.add_argument("--placements", default="loopback,2nodes")
    ap.add_argument("--osu-dir", default=os.environ.get("OSU_DIR", ""))
    ap.add_argument("--sizes", default="")
    ap.add_argument("--command", default="", help="the command line, for the record")
    ap.add_argument("--srcctl", default="", help="srcctl of the build, for the agents' state")
    ap.add_argument("--srcd", default="", help="srcd of the build, restarted on the bed's "
                    "nodes before each src-agent job of the scale suite")
    ap.add_argument("--scale-ranks", type=int, default=256, help="ranks of the scale suite "
                    "(on 8 nodes)")
    ap.add_argument("--scale-runs", type=int, default=3, help="rounds of the scale suite")
    ap.add_argument("--scale-timeout", type=int, default=900, help="bound of one scale job, s")
    ap.add_argument("--agent-socket", default="",
                    help="the loopback node agent's socket; the bed's nodes run theirs on @srcd "
                         "(empty: no src-agent peer)")
    ap.add_argument("--osu-runs", type=int, default=1,
                    help="launches of each OSU program per peer, peers in turn; medians")
    ap.add_argument("--peers", default="",
                    help="measure only these (comma-separated, e.g. src,tcp,ucx-tcp; default all)")
    ap.add_argument("--check", action="store_true",
                    help="check the arguments and exit (compare.sh, before it sets anything up)")
    args = ap.parse_args()
    missing = [a for a in ("out", "bin", "module", "srcrun", "testbed") if not getattr(args, a)]
    if missing and not args.check:
        ap.error("required: %s" % ", ".join("--" + a for a in missing))
    suites = ("uct", "ucp", "wireup", "mpi", "osu", "state", "scale")
    unknown = sorted(set(s for s in args.only.split(",") if s) - set(suites))
    if unknown:
        ap.error("--only: unknown %s (known: %s)" % (", ".join(unknown), ", ".join(suites)))
    unknown = sorted(set(p for p in args.placements.split(",") if p) - set(PLACEMENTS))
    if unknown:
        ap.error("--placements: unknown %s (known: %s)" % (", ".join(unknown),
                 ", ".join(sorted(PLACEMENTS))))
    args.peers = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(args.peers) - set(MPI_PEERS) - set(UCX_PEERS))
    if args.peers and "src" not in args.peers:
        ap.error("--peers: src must be one of them (every ratio is src / peer)")
    if unknown:
        ap.error("--peers: unknown %s (known: %s)" % (", ".join(unknown),
                 ", ".join(sorted(set(MPI_PEERS) | set(UCX_PEERS)))))
    if args.check:
        return 0
    args.probe = os.path.join(args.bin, "libsrc_probe.so")
    args.sizes_given = bool(args.sizes)
    if args.sizes:
        args.sizes = [int(s) for s in args.sizes.split(",")]
    else:
        args.sizes = [8, 65536] if args.quick else [8, 1024, 65536, 1048576]
    os.makedirs(args.out, exist_ok=True)

    d = Driver(args)

    def stop(signum, frame):
        d.kill_all()
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    started = time.time()
    wanted = args.only.split(",")
    for place in args.placements.split(","):
        for suite in suites:
            if suite not in wanted:
                continue
            if suite == "scale" and (args.quick or place != "2nodes"):
                if args.quick or "2nodes" not in args.placements.split(","):
                    print("== scale: skipped (%s)" % ("full mode only" if args.quick else
                          "runs on the 2nodes placement's test bed only"), flush=True)
                    wanted.remove("scale")
                continue
            if suite == "osu" and not args.osu_dir:
                print("== osu: skipped (set OSU_DIR or --osu-dir to an installed "
                      "osu-micro-benchmarks)", flush=True)
                continue
            print("== %s, %s" % (suite, place), flush=True)
            getattr(d, "suite_" + suite)(place)

    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": args.command, "quick": args.quick, "seconds": round(time.time() - started),
            "machine": versions(), "sizes": args.sizes}
    peers_of = {"uct": UCX_PEERS, "ucp": UCX_PEERS, "wireup": UCX_PEERS, "mpi": MPI_PEERS,
                "osu": MPI_PEERS, "state": MPI_PEERS}
    peers_of = {k: d.peers(v) for k, v in peers_of.items()}
    peers_of["scale"] = d.scale_peers()
    m = meta["machine"]
    header = ("srcucx side-by-side comparison, %s, source %s\ncommand: %s\nmachine: %s, %s "
              "cores, %s, Linux %s, %s; UCX %s, Open MPI %s, libfabric %s; %d s\n"
              % (meta["date"], m["commit"], meta["command"], m["cpu"], m["cores"], m["memory"],
                 m["kernel"], m["os"], m["ucx"], m["openmpi"], m["libfabric"], meta["seconds"]))
    table = header + make_table(d.rows, peers_of)
    if d.footnotes:
        table += "\n" + "\n".join(d.footnotes) + "\n"
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(table)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": d.rows}, f, indent=1)
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["suite", "test", "size", "placement", "peer", "value",
                                          "unit", "ratio_src_over_peer", "note"])
        w.writeheader()
        src = {(r["suite"], r["test"], r["size"], r["placement"]): r["value"]
               for r in d.rows if r["peer"] == "src"}
        for r in d.rows:
            rt = None if r["peer"] == "src" else ratio(
                src.get((r["suite"], r["test"], r["size"], r["placement"])), r["value"], r["unit"])
            w.writerow(dict(r, ratio_src_over_peer="" if rt is None else "%.4f" % rt,
                            value="" if r["value"] is None else r["value"]))
    why = make_plot(d.rows, os.path.join(args.out, "plot.png"))
    print(table)
    if why:
        print("plot: " + why)
    print("results: %s/{table.txt,results.csv,results.json,plot.png,run.log}" % args.out)


if __name__ == "__main__":
    main()
