import sys, numpy as np
sys.path.insert(0,'/tmp/an'); sys.path.insert(0,'.')
import exp
from sklearn.ensemble import HistGradientBoostingClassifier
import costmodel.rank as R
orig=HistGradientBoostingClassifier
kw=dict(max_iter=int(sys.argv[1]), max_leaf_nodes=int(sys.argv[2]), learning_rate=float(sys.argv[3]))
class Big(orig):
    def __init__(self, **k):
        k.update(kw); super().__init__(**k)
import sklearn.ensemble
sklearn.ensemble.HistGradientBoostingClassifier=Big
exp.run(f'ranker {kw}', lambda i: True)
