"""The ``cache:`` options of an ``hms-thrift``, ``glue`` or ``iceberg-rest`` service
(docs/operations.md, "Metadata cache")."""

from __future__ import annotations

from gateway.settings_model import SettingsModel
from pydantic import Field

__all__ = ["CacheOptions"]


class CacheOptions(SettingsModel):
    """``enabled`` (default false); ``max_bytes`` the bound on the replies held (keys and
    replies counted; one reply over a quarter of it is not stored); ``ttl_seconds`` how long
    an entry may serve at most (a safety net: invalidation keeps it exact);
    ``poll_interval_seconds`` the notification-log poll bound: an external change is seen
    within it; ``max_staleness_seconds``, when set, lets the cache run on an HMS without a
    notification log (entries then live at most that long) and caps ``ttl_seconds``;
    ``per_user``: key entries by the calling user and groups too (HMS with storage-based
    authorization on reads)."""

    enabled: bool = False
    max_bytes: int = Field(256 * 1024 * 1024, ge=64 * 1024)
    ttl_seconds: float = Field(600.0, gt=0)
    poll_interval_seconds: float = Field(1.0, gt=0, le=60)
    max_staleness_seconds: float | None = Field(None, gt=0)
    per_user: bool = False
