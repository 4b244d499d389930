"""Fusion strategies that produce plans: none, inductor (schedule/fusion.py), tvm."""
