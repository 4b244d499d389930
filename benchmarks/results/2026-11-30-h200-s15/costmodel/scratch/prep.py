import sys, pickle, numpy as np
sys.path.insert(0,'.')
from benchmarks.costmodel_noise import load
from costmodel.model import usable
from costmodel.features import feature_matrix
rows=[]
for p,era in [('costmodel/data/h200-2026-11-29.jsonl.gz',0),('costmodel/data/h200-2026-11-30-s1.jsonl.gz',0),('costmodel/data/h200-2026-11-30-s2.jsonl.gz',0),('costmodel/data/h200-2026-11-30-s15.jsonl.gz',1),('costmodel/data/h200-2026-11-30-s15b.jsonl.gz',1)]:
    for r in usable(load(p)):
        r=dict(r); r['era']=era; rows.append(r)
X=feature_matrix([r['features'] for r in rows], compile=False, workers=2)
pickle.dump((rows,X), open('/tmp/an/data.pkl','wb'))
print(X.shape)
