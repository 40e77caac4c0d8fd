# SPDX-License-Identifier: Apache-2.0
import sys, re, collections
# usage: cgparse.py FILE N FUNC...  -> per round trip: calls/N and inclusive Ir per round trip
def parse(path):
    names={}; self_=collections.Counter(); incl_extra=collections.Counter(); calls=collections.Counter()
    cur=None; cfn=None; pending_calls=None
    def nm(tok):
        m=re.match(r'\((\d+)\)(?: (.*))?', tok)
        if m:
            if m.group(2): names[m.group(1)]=m.group(2)
            return names.get(m.group(1), m.group(1))
        return tok
    for line in open(path, errors='replace'):
        line=line.rstrip('\n')
        if line.startswith('fn='): cur=nm(line[3:]); continue
        if line.startswith('cfn='): cfn=nm(line[4:]); continue
        if line.startswith('calls='): pending_calls=int(line[6:].split()[0]); continue
        if line and (line[0].isdigit() or line[0] in '+-*'):
            parts=line.split()
            if len(parts)>=2:
                try: c=int(parts[1])
                except: continue
                if pending_calls is not None:
                    incl_extra[cur]+=c; calls[cfn]+=pending_calls; pending_calls=None
                else:
                    self_[cur]+=c
    return self_, incl_extra, calls
path=sys.argv[1]; n=float(sys.argv[2])
s,e,c=parse(path)
out=[]
for f in sys.argv[3:]:
    out.append("%s %.2f/rt %.0f" % (f, c[f]/n, (s[f]+e[f])/n))
print("; ".join(out))
