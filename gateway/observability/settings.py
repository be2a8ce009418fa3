"""The observability settings of the gateway file: the audit log (``audit``) and the process
log (``logging``); :mod:`gateway.config` places them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from gateway.settings_model import SettingsModel


class AuditConfig(SettingsModel):
    """The audit log: one JSON line per request. ``path`` None writes to stderr."""

    enabled: bool = True
    path: Path | None = None


class LoggingConfig(SettingsModel):
    """The process log on stderr (the audit log is configured apart)."""

    format: Literal["json", "text"] = "json"
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
