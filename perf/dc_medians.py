#!/usr/bin/env python3
"""Medians of dc_bench runs: DIR/run[0-9]*.txt, each dc_bench's table (columns found by their
header, so tables from before and after the `settled_B` and `pkts/rt` columns alike). Per (mode, peers): the
medians of latency, p99, rate and DC latency over connection latency; the state columns are the
first run's (runs differ there only by what was in flight at the end).

    perf/dc_medians.py DIR
"""
import glob
import statistics
import sys

where = sys.argv[1] if len(sys.argv) > 1 else '.'
rows, order = {}, []
for path in sorted(glob.glob(where + '/run[0-9]*.txt')):
    cols = None
    for line in open(path):
        f = line.split()
        if f and f[0] == 'mode':
            cols = {name: i for i, name in enumerate(f)}
            continue
        if cols is None or len(f) != len(cols):
            continue
        key = (f[0], int(f[cols['peers']]))
        if key not in rows:
            rows[key] = []
            order.append(key)
        rows[key].append((cols, f))
state = [c for c in ('nic_state_B', 'B/peer', 'settled_B', 'addr_hdl_B') if any(c in r[0][0] for r in rows.values())]
pk = any('pkts/rt' in r[0][0] for r in rows.values())
print(f"{'mode':9} {'peers':>6} {'lat_us':>7} {'p99_us':>7} " + (f"{'pkts/rt':>7} " if pk else '') +
      f"{'rate':>9} {'dc/conn':>7} " +
      ' '.join(f'{c:>11}' for c in state) + ' runs')
for key in order:
    rs = rows[key]
    med = lambda name: statistics.median(float(f[c[name]]) for c, f in rs)
    c0, f0 = rs[0]
    print(f"{key[0]:9} {key[1]:6} {med('lat_us'):7.2f} {med('p99_us'):7.2f} " +
          (f"{med('pkts/rt'):7.2f} " if pk else '') + f"{med('rate_msg/s'):9.0f} "
          f"{med('dc/conn'):7.2f} " + ' '.join(f"{f0[c0[c]] if c in c0 else '-':>11}" for c in state) +
          f" {len(rs)}")
