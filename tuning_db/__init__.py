"""Tuning database: graphs, plans, kernel measurements, cost models (see the tuning-DB issue).

An SQLite file in the user's cache dir by default, any SQLAlchemy URL (PostgreSQL) for a shared
one: `TuningDB.open(default_db_url())`. Everything that goes wrong is one `DBError` with a one-line
message.
"""
from .connect import default_db_url
from .errors import DBError
from .records import PlanRecord
from .store import TuningDB

__all__ = ["TuningDB", "DBError", "PlanRecord", "default_db_url"]
