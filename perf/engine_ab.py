#!/usr/bin/env python3
"""Side-by-side figures of two engine builds from srcnic_bench outputs (perf/README.md,
"Authentication's cost"): DIR holds base-N.txt and new-N.txt, each the output of
`perf/run-engine-bench.sh BUILDDIR --tests lat,rate` for build "base" or "new", run in
alternation. Prints every run, then medians over the runs whose two threads both got at least
MIN_CPU percent of a CPU, overall and by the machine's speed state (told by the UDP floor of the
same run), raw and against that floor; then round by round (base N and new N ran back to back)
the median of new/base.

    perf/engine_ab.py DIR [MIN_CPU]        MIN_CPU defaults to 90
"""
import glob
import re
import statistics
import sys


def parse(path):
    text = open(path).read()

    def grab(side, label):
        m = re.search(r'^\s+%s\s+%s\s+([\d.]+) \S+\s+cpu=(\d+)%%/(\d+)%%' % (side, re.escape(label)),
                      text, re.M)
        return (float(m.group(1)), min(int(m.group(2)), int(m.group(3)))) if m else (None, 0)

    lat, lat_cpu = grab('srcnic', 'latency 8 B median')
    ulat, ulat_cpu = grab('udp', 'latency 8 B median')
    rate, rate_cpu = grab('srcnic', 'msg rate 8 B')
    urate, urate_cpu = grab('udp', 'msg rate 8 B')
    return dict(lat=lat, ulat=ulat, latcpu=min(lat_cpu, ulat_cpu),
                rate=rate, urate=urate, ratecpu=min(rate_cpu, urate_cpu))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    min_cpu = int(sys.argv[2]) if len(sys.argv) > 2 else 90
    runs = {'base': [], 'new': []}
    for path in glob.glob(sys.argv[1] + '/*.txt'):
        m = re.match(r'.*/(base|new)-(\d+)\.txt$', path)
        if m:
            r = parse(path)
            r['run'] = int(m.group(2))
            runs[m.group(1)].append(r)
    for side in ('base', 'new'):
        for r in sorted(runs[side], key=lambda r: r['run']):
            print('%-4s run %2d  latency %s us (floor %s, cpu %d%%)  rate %s Mmsg/s (floor %s, cpu %d%%)' % (
                side, r['run'], r['lat'], r['ulat'], r['latcpu'], r['rate'], r['urate'], r['ratecpu']))
    tests = (('lat', 'ulat', 'latcpu', '8 B latency, us', lambda r: r['ulat'] < 2.6),
             ('rate', 'urate', 'ratecpu', 'msg rate 8 B, Mmsg/s', lambda r: r['urate'] >= 0.40))
    print('medians of the runs with both threads at %d%% CPU or more; "fast": latency floor under'
          ' 2.6 us, rate floor 0.40 Mmsg/s or more' % min_cpu)
    for key, fkey, ckey, name, fast in tests:
        for state in (None, True, False):
            pick = {s: [r for r in runs[s] if r[key] is not None and r[ckey] >= min_cpu and
                        (state is None or fast(r) == state)] for s in runs}
            if not pick['base'] or not pick['new']:
                continue
            raw = {s: statistics.median(r[key] for r in pick[s]) for s in pick}
            vs_floor = {s: statistics.median(r[key] / r[fkey] for r in pick[s]) for s in pick}
            print('%-22s %-5s base %.3f (%2d runs)  new %.3f (%2d runs)  new/base %.3f  |  against the'
                  ' floor: base %.3f new %.3f, new/base %.3f' % (
                      name, {None: 'all', True: 'fast', False: 'slow'}[state], raw['base'],
                      len(pick['base']), raw['new'], len(pick['new']), raw['new'] / raw['base'],
                      vs_floor['base'], vs_floor['new'], vs_floor['new'] / vs_floor['base']))
    paired(runs, min_cpu)


def paired(runs, min_cpu):
    """Round by round: base run N and new run N ran back to back, most likely in one state."""
    by_run = {s: {r['run']: r for r in runs[s]} for s in runs}
    print('round by round (base N and new N ran back to back; both at %d%% CPU or more), medians'
          ' of new/base:' % min_cpu)
    for key, fkey, ckey, name in (('lat', 'ulat', 'latcpu', '8 B latency'),
                                  ('rate', 'urate', 'ratecpu', 'msg rate 8 B')):
        raw, vs_floor = [], []
        for n, b in by_run['base'].items():
            w = by_run['new'].get(n)
            if w is None or b[key] is None or w[key] is None or min(b[ckey], w[ckey]) < min_cpu:
                continue
            raw.append(w[key] / b[key])
            vs_floor.append((w[key] / w[fkey]) / (b[key] / b[fkey]))
        if raw:
            print('%-22s %2d rounds  raw %.3f (%.3f-%.3f)  against the floor %.3f (%.3f-%.3f)' % (
                name, len(raw), statistics.median(raw), min(raw), max(raw),
                statistics.median(vs_floor), min(vs_floor), max(vs_floor)))


if __name__ == '__main__':
    main()
