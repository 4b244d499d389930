"""FillEmptyColumns: the preprocessing step in front of the regressor (`model`) and the pair
classifier (`rank`), a scikit-learn transformer that `model_file` stores as the columns it fills."""
from __future__ import annotations

from typing import Any

import numpy as np


class FillEmptyColumns:
    """Sets columns that were all NaN in training to 0 (HistGradientBoosting cannot bin them); other
    NaN stay NaN, for estimators that handle missing values natively."""

    def fit(self, x: np.ndarray, y: Any = None) -> "FillEmptyColumns":
        self.empty_ = np.all(np.isnan(np.asarray(x, dtype=np.float64)), axis=0)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64, copy=True)
        x[:, self.empty_] = 0.0
        return x

    def fit_transform(self, x: np.ndarray, y: Any = None) -> np.ndarray:
        return self.fit(x, y).transform(x)

    def get_params(self, deep: bool = True) -> dict:
        return {}

    def set_params(self, **params: Any) -> "FillEmptyColumns":
        return self
