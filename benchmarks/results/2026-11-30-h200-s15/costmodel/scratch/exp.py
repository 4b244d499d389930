import sys, pickle, numpy as np, time
sys.path.insert(0,'.')
from costmodel.evaluate import metrics, split_by_graph
from costmodel.features import FEATURE_NAMES
from costmodel.rank import fit_ranker
from costmodel.model import measured_us
rows,X = pickle.load(open('/tmp/an/data.pkl','rb'))
era=np.array([r['era'] for r in rows]); y=np.log(measured_us(rows))
groups=np.array([str(r['features'].get('group')) for r in rows],dtype=object)
graph=np.array([str(r['features'].get('graph')) for r in rows],dtype=object)
kind=np.array([r['features'].get('kind') for r in rows])
looped=X[:,FEATURE_NAMES.index('looped')]>0
def run(name, train_mask_fn, seeds=(0,1,2,3,4), names=FEATURE_NAMES, xfn=None):
    res=[]
    Xv = X if xfn is None else xfn(X)
    for s in seeds:
        newix=np.flatnonzero(era==1)
        tr,te=split_by_graph([rows[i] for i in newix], seed=s)
        teg={str(r['features']['graph']) for r in te}
        test=np.array([i for i in newix if graph[i] in teg])
        train=np.array([i for i in range(len(rows)) if graph[i] not in teg and train_mask_fn(i)])
        rk=fit_ranker(Xv[train], y[train], list(groups[train]), names, seed=0)
        sc=rk.scores(Xv[test], list(groups[test]))
        m=metrics(np.exp(y[test]), np.exp(-np.nan_to_num(sc, nan=0.5)), list(groups[test]))
        res.append(m)
        out={k:[getattr(mm,k) for mm in res] for k in ('pairwise','pairwise_sig','peak1','peak1_tol','peak5','regret')}
    print(f"{name:40s}", ' '.join(f"{k}={np.mean(v):.3f}" for k,v in out.items()), ' s0pw=%.3f'%out['pairwise'][0], flush=True)
    return res
if __name__=='__main__':
    t=time.time()
    run('all', lambda i: True)
    run('new only', lambda i: era[i]==1)
    run('old minus looped', lambda i: era[i]==1 or not looped[i])
    print(time.time()-t)
