"""Plans as the storage layer keeps them: records (:mod:`tiermem.storage.plans`) to and from
:class:`~tiermem.plans.plan.Plan`, checked on the way in and out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiermem.errors import StorageError
from tiermem.plans.plan import Plan
from tiermem.storage import plans as rows

if TYPE_CHECKING:
    from tiermem.storage.sql import Connection


def load(record: dict[str, Any]) -> Plan:
    """The plan of a stored record; :class:`StorageError` when the record is no valid plan."""
    try:
        return Plan.from_record(record)
    except ValueError as exc:
        raise StorageError(f"stored plan {record.get('id')} is unreadable: {exc}") from exc


def written(record: dict[str, Any]) -> Plan:
    """The plan of a record just written (redacted by the repository), checked again as a stored
    record must be: :class:`InvalidInput` when a redacted text no longer fits (e.g. a longer
    title); the caller's transaction then writes nothing."""
    return Plan.from_record(record)


def restore_plans(conn: Connection, records: list[dict[str, Any]], replace: bool) -> int:
    """Import: each record checked and normalised as a plan (:class:`InvalidInput` otherwise),
    then written back by :func:`tiermem.storage.plans.restore_plans` (conflicts, ``replace``)."""
    checked = [Plan.from_record(record).to_record() for record in records]
    return rows.restore_plans(conn, checked, replace)
