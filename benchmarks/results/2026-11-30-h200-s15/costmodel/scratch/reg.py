import sys, numpy as np
sys.path.insert(0,'.')
from benchmarks.costmodel_noise import load
from costmodel.model import CostModel, usable, measured_us
from costmodel.evaluate import split_by_graph
from collections import defaultdict
rows=usable(load('/tmp/s15-all.jsonl.gz'))
_,te=split_by_graph(rows, seed=0)
m=CostModel.from_bytes(open('costmodel/pretrained/cuda-nvidia-h200-sm90.pkl','rb').read())
p=m.predict_us([r['features'] for r in te]); y=measured_us(te)
g=defaultdict(list)
for i,r in enumerate(te): g[r['features']['group']].append(i)
def cs(c): return ' '.join(f"{k[0] if k!='num_warps' else 'w'}{v}" if not isinstance(v,bool) else (k if v else '') for k,v in c.items() if k not in('num_stages',) and v not in (False,None))
out=[]
for k,ix in g.items():
    if len(ix)<2: continue
    ix=np.array(ix); pick=ix[np.argmin(p[ix])]; best=ix[np.argmin(y[ix])]
    out.append((y[pick]/y[best]-1, te[pick]['features']['kind'], te[best]['features']['numel'], te[best]['features']['rnumel'], cs(te[pick]['features']['config']), cs(te[best]['features']['config']), y[best], len(ix), te[best]['features']['nodes'][:2]))
out.sort(reverse=True)
for o in out[:22]: print('%.3f %-10s %7d x %6d | pick %-45s | best %-45s %.1fus n=%d %s'%o)
