import glob,re,statistics,sys
d={}
for f in sorted(glob.glob(sys.argv[1]+'/dc-*.txt')):
    v=f.split('/')[-1].split('-')[1]
    for line in open(f):
        p=line.split()
        if len(p)>10 and p[0] in('conn','dc','budget64') and p[1].isdigit():
            d.setdefault((p[0],int(p[1]),v),[]).append((float(p[4]),float(p[7]),int(p[9]),int(p[11])))
for k in sorted(set((a,b) for a,b,c in d)):
    b=d[k+('base',)]; n=d[k+('new',)]
    print('%-5s %5d lat base %-20s new %-20s med new/base %.3f  rate new/base %.3f  state %d -> %d  settled %d -> %d'%(k[0],k[1],[x[0] for x in b],[x[0] for x in n],statistics.median([x[0] for x in n])/statistics.median([x[0] for x in b]),statistics.median([x[1] for x in n])/statistics.median([x[1] for x in b]),b[0][2],n[0][2],b[0][3],n[0][3]))
