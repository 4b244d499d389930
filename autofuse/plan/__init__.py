"""Fusion plans as values: FusionPlan, applying a plan with legality checks."""
