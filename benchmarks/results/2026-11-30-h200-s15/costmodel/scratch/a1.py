import sys, gzip, json, numpy as np, time
sys.path.insert(0,'.')
from benchmarks.costmodel_noise import load
from costmodel.model import CostModel, usable, measured_us, fit
from costmodel.evaluate import metrics, split_by_graph, evaluate
from costmodel.features import feature_matrix
t0=time.time()
old = []
for p in ['costmodel/data/h200-2026-11-29.jsonl.gz','costmodel/data/h200-2026-11-30-s1.jsonl.gz','costmodel/data/h200-2026-11-30-s2.jsonl.gz']:
    old += usable(load(p))
new = usable(load('costmodel/data/h200-2026-11-30-s15.jsonl.gz'))
print(len(old), len(new), 'graphs new', len({r['features']['graph'] for r in new}))
cm4 = CostModel.from_bytes(open('costmodel/pretrained/cuda-nvidia-h200-sm90.pkl','rb').read())
print('cm4 on all new', evaluate(cm4, new))
# kinds
for kind in ('pointwise','reduction'):
    sub=[r for r in new if r['features']['kind']==kind]
    print(' cm4', kind, evaluate(cm4, sub))
m_old = fit(old, estimator='gbr', compile=False)
print('old-trained on new', evaluate(m_old, new), time.time()-t0)
tr, te = split_by_graph(new, seed=0)
m_both = fit(old+tr, estimator='gbr', compile=False)
print('held-out new graphs', len({r['features']['graph'] for r in te}))
print(' old-only on new-test', evaluate(m_old, te))
print(' old+newtrain on new-test', evaluate(m_both, te))
m_new = fit(tr, estimator='gbr', compile=False)
print(' newtrain-only on new-test', evaluate(m_new, te))
print(time.time()-t0)
