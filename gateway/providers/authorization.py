"""Authorization (Knox's term): may this identity use this service at all?

Which Thrift methods a service exposes is decided separately, by the service's method list.
"""

from __future__ import annotations

from gateway.providers.identity import Identity


class Authorizer:
    """The default authorization provider: every authenticated identity is allowed."""

    def deny_reason(self, identity: Identity, remote: str | None) -> str | None:
        """None when ``identity`` connecting from ``remote`` (an IP address) may proceed,
        else a short reason for the 403 (no secrets)."""
        return None
