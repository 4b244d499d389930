import sys, numpy as np
sys.path.insert(0,'/tmp/an'); sys.path.insert(0,'.')
from exp import *
F={n:i for i,n in enumerate(FEATURE_NAMES)}
def mlp_cols(X):
    grid=X[:,F['grid']]; warps=X[:,F['num_warps']]; sm=X[:,F['sm_count']]
    nb=2.0**X[:,F['log_bytes']]; iters=np.maximum(X[:,F['r_iters']],1)
    blocks=np.clip(64//warps,1,32)
    resident=np.minimum(grid, sm*blocks)
    step=nb/grid/iters
    infl=resident*step
    threads_res=resident*warps*32
    lat_us=nb*0.8/np.maximum(infl,1)/1e3*1e-0  # ns->us: bytes*lat(ns)/inflight -> ns
    ideal=X[:,F['ideal_us']]
    bound=np.maximum(ideal, nb*0.8e-3/np.maximum(infl,1))
    return np.column_stack([np.log2(infl), np.log2(step/(warps*32)), np.log2(threads_res/sm), np.log2(bound/np.maximum(ideal,1e-3)), np.log2(resident/sm)])
NAMES=tuple(FEATURE_NAMES)+('log_inflight','log_step_per_thread','log_threads_per_sm','log_mlp_bound','log_resident_per_sm')
import costmodel.rank as R
R.CONFIG_NAMES=frozenset(set(R.CONFIG_NAMES)|set(NAMES[-5:]))
which=sys.argv[1]
if which=='mlp':
    run('all + mlp', lambda i: True, names=NAMES, xfn=lambda X: np.hstack([X, mlp_cols(X)]))
else:
    run('old+new, new weight', lambda i: True, seeds=(0,1,2,3,4))
