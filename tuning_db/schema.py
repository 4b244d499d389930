"""The tables of schema version 1 (SQLAlchemy Core), shared by SQLite and PostgreSQL.

Device, torch/triton versions and plan schema are separate columns so a lookup miss can say which
of them did not match. JSON payloads are TEXT (portable, stored exactly as written); timestamps are
naive UTC in the database and timezone-aware UTC in Python.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

MARKER = "autofuse tuning database"
META_TABLE = "autofuse_meta"


class UTCDateTime(sa.types.TypeDecorator):
    """Aware UTC datetimes in Python, naive UTC in the column: same values on SQLite and PostgreSQL."""

    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return None if value is None else value.replace(tzinfo=timezone.utc)


class JSONText(sa.types.TypeDecorator):
    """A JSON value stored as TEXT with sorted keys, so equal values are equal strings."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> str | None:
        return None if value is None else json.dumps(value, sort_keys=True)

    def process_result_value(self, value: str | None, dialect: Any) -> Any:
        return None if value is None else json.loads(value)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


metadata = sa.MetaData()

meta = sa.Table(
    META_TABLE, metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

graphs = sa.Table(
    "graphs", metadata,
    sa.Column("hash", sa.Text, primary_key=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("created", UTCDateTime, nullable=False),
)

plans = sa.Table(
    "plans", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uid", sa.Text, nullable=False, unique=True),  # identity across export/import
    sa.Column("graph_hash", sa.Text, sa.ForeignKey("graphs.hash"), nullable=False),
    sa.Column("device", sa.Text, nullable=False),
    sa.Column("torch_version", sa.Text, nullable=False),
    sa.Column("triton_version", sa.Text, nullable=False),
    sa.Column("plan_schema", sa.Integer, nullable=False),
    sa.Column("plan_json", sa.Text, nullable=False),
    sa.Column("time_us", sa.Float, nullable=True),
    sa.Column("baselines", JSONText, nullable=False),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("created", UTCDateTime, nullable=False),
    sa.Index("ix_plans_match", "graph_hash", "device", "torch_version", "triton_version", "plan_schema"),
    sa.Index("ix_plans_created", "created"),
)

kernel_measurements = sa.Table(
    "kernel_measurements", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kernel_key", sa.Text, nullable=False),
    sa.Column("device", sa.Text, nullable=False),
    sa.Column("features", JSONText, nullable=False),
    sa.Column("stats", JSONText, nullable=False),
    sa.Column("created", UTCDateTime, nullable=False),
    sa.UniqueConstraint("kernel_key", "device", name="uq_kernel_measurements_key_device"),
    sa.Index("ix_kernel_measurements_created", "created"),
)

cost_models = sa.Table(
    "cost_models", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uid", sa.Text, nullable=False, unique=True),  # identity across export/import
    sa.Column("device", sa.Text, nullable=False),
    sa.Column("version", sa.Text, nullable=False),
    sa.Column("blob", sa.LargeBinary, nullable=False),
    sa.Column("metrics", JSONText, nullable=False),
    sa.Column("trained_on", JSONText, nullable=False),
    sa.Column("created", UTCDateTime, nullable=False),
    sa.Index("ix_cost_models_device", "device", "created"),
)

DATA_TABLES = ("graphs", "plans", "kernel_measurements", "cost_models")

# Optuna's RDB storage keeps the search's studies in the same database (tuning DB and studies share
# one file or server); its tables are not foreign.
OPTUNA_TABLES = frozenset({
    "studies", "study_directions", "study_user_attributes", "study_system_attributes", "trials",
    "trial_user_attributes", "trial_system_attributes", "trial_params", "trial_values",
    "trial_intermediate_values", "trial_heartbeats", "version_info", "alembic_version"})
