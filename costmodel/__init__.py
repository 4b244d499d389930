"""Cost model: kernel features, training and prediction (see the cost-model issue).

Modules: `predict` (the Predictor interface the tuner uses), `features` (+ `source_ops`,
`compiled`, `occupancy`), `model` (CostModel), `preprocess` (the fill of empty columns), `rank`
(the pair ranker of one kernel's configs), `evaluate` (held-out metrics, plan prediction), `select`
(estimator comparison), `train` (retrain from the tuning DB), `cli` (`autofuse retrain`), `synth`
(a synthetic dataset for tests). Only `predict` is imported here: scikit-learn loads when a model
is trained or unpickled.
"""
from .predict import ByteCountPredictor, LearnedPredictor, Predictor, load_predictor

__all__ = ["ByteCountPredictor", "LearnedPredictor", "Predictor", "load_predictor"]
