import sys,re,statistics as st
rows=[]
for l in open(sys.argv[1]):
    m=re.search(r'round \d+: gpuwire ([0-9.]+) old ([0-9.]+) perftest ([0-9.]+)',l)
    if m: rows.append(tuple(map(float,m.groups())))
for name,sel in (('fast',lambda p:p<13.5),('slow',lambda p:p>=13.5),('all',lambda p:True)):
    r=[x for x in rows if sel(x[2])]
    if r: print(name,len(r),'new %.3f old %.3f'%(st.median([g/p for g,o,p in r]),st.median([o/p for g,o,p in r])))
