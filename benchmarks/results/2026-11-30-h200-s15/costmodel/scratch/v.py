import sys, numpy as np
sys.path.insert(0,'/tmp/an'); sys.path.insert(0,'.')
import exp
import costmodel.rank as R
from costmodel.features import FEATURE_NAMES
which=sys.argv[1]
if which=='minkernel':
    keep_kernel={'is_reduction','log_numel','log_rnumel','log_bytes','bytes_per_element','log_ideal_us','op_intensity','ptr_args','ptr16_args','sm_count'}
    names=tuple(n for n in FEATURE_NAMES if n in R.CONFIG_NAMES or n in keep_kernel)
    cols=[FEATURE_NAMES.index(n) for n in names]
    exp.run('min kernel features', lambda i: True, names=names, xfn=lambda X: X[:,cols])
elif which=='groupweight':
    orig=R.training_pairs
    import sklearn.ensemble as E
    from collections import Counter
    class W(E.HistGradientBoostingClassifier):
        def fit(self, X, y, sample_weight=None):
            return super().fit(X, y, sample_weight=W.w)
    def tp(log_us, groups):
        a,b,l=orig(log_us, groups)
        g=np.array([groups[i] for i in a],dtype=object)
        c=Counter(g.tolist()); W.w=np.array([1.0/c[x] for x in g])*len(a)/len(c)
        return a,b,l
    R.training_pairs=tp
    E.HistGradientBoostingClassifier=W
    exp.run('group-equal pair weights', lambda i: True)
