"""Search: per-graph Optuna studies over fusion groupings, per-kernel launch-config tuning,
verification against eager, and the tuning DB's plans and measurements."""
