import re,statistics,sys
rows={}
for line in open(sys.argv[1]):
    if 'VALIDATION' in line: print('VALIDATION FAILURE', line)
    m=re.match(r'round (\d+) (\w+): (.*)',line)
    if not m: continue
    for kv in m.group(3).split():
        k,v=kv.split('='); rows.setdefault((m.group(2),int(k)),[]).append(float(v))
for size in sorted({k[1] for k in rows}):
    b=statistics.median(rows[('base',size)]); n=statistics.median(rows[('new',size)])
    print(size, 'base %.1f new %.1f new/base %.3f' % (b,n,n/b))
