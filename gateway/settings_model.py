"""The base of every settings model read from the gateway's YAML files, and the address
validators several of them share. Each component keeps its own settings model beside it
(``providers/settings.py``, ``upstream/settings.py``, ...); :mod:`gateway.config` assembles them
into the gateway and topology files' models."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict

__all__ = ["SettingsModel", "address_pattern", "network"]


class SettingsModel(BaseModel):
    """Settings read from a file: unknown keys refused (a misspelt key is an error, not a
    silent default), immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def network(value: str, expected: str = "an IP address or a CIDR network") -> str:
    """An IP address or a CIDR network (host bits allowed); returns it unchanged. Raises
    ``ValueError`` naming ``expected`` otherwise (pydantic reports it under the key)."""
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise ValueError(f"{value!r} is not {expected}") from None
    return value


def address_pattern(value: str) -> str:
    """``*``, an IP address or a CIDR network (host bits allowed); returns it unchanged. Raises
    ``ValueError`` otherwise."""
    return value if value == "*" else network(value, "'*', an IP address or a CIDR network")
