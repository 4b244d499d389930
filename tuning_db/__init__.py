"""Tuning database: graphs, plans, kernel measurements, cost models (see the tuning-DB issue)."""
