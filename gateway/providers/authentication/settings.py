"""What every authentication provider's settings model shares, and the failure throttle settings.

A provider's settings model (in the provider's own module, listed in :mod:`.registry`) derives
from :class:`ProviderSettings`: it declares ``type: Literal["<tag>"]`` (the discriminator of the
topology file's ``providers.authentication`` entries), its ``path_fields``, its run-time
:attr:`~ProviderSettings.authenticator` (made by :meth:`~ProviderSettings.build`) and, when it
needs something from the gateway file, :meth:`~ProviderSettings.check`. Secret fields are :class:`~.secrets.Secret` references
(``file:``/``env:``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from pydantic import Field

from gateway.registry import resolve
from gateway.settings_model import SettingsModel

if TYPE_CHECKING:
    from gateway.providers.authentication.base import AuthenticationProvider


class _TlsFile(Protocol):
    @property
    def client_ca(self) -> Path | None: ...


class GatewayFile(Protocol):
    """What a provider's :meth:`ProviderSettings.check` may read of the gateway file
    (:class:`gateway.config.GatewayConfig` meets it). Stated here, not imported: the
    configuration module imports this one to build its provider union."""

    @property
    def tls(self) -> _TlsFile: ...


class ProviderSettings(SettingsModel):
    """Base of the authentication providers' settings models (Knox: role ``authentication``)."""

    #: Fields holding file paths that must exist, resolved against the topology file's directory.
    path_fields: ClassVar[tuple[str, ...]] = ()
    #: ``"module:Class"`` of the run-time authenticator :meth:`build` makes from these settings.
    #: A provider whose authenticator wraps a client library (ldap3, botocore, gssapi) keeps it
    #: in a module of its own, so that the library is imported only when a topology names the
    #: provider, not by every worker validating its configuration.
    authenticator: ClassVar[str]

    def with_base(self, base: Path):
        """A copy whose relative ``path_fields`` are absolute below ``base``.

        Raises ``ValueError("<field>: no such file: <path>")`` when a named file is missing.
        """
        update = {}
        for name in self.path_fields:
            value = getattr(self, name)
            if value is None:
                continue
            path = value if value.is_absolute() else (base / value).resolve()
            if not path.is_file():
                raise ValueError(f"{name}: no such file: {path}")
            update[name] = path
        return self.model_copy(update=update)

    def check(self, gateway: GatewayFile) -> str | None:
        """Why this provider cannot run under ``gateway`` (the gateway file), or None.

        Called once per topology build; the caller raises ``ConfigError`` with the reason.
        """
        return None

    def build(self) -> AuthenticationProvider:
        """The run-time authenticator for these settings (:attr:`authenticator` called with
        them). Raises what the authenticator's constructor raises."""
        return resolve(self.authenticator)(self)


class FailureThrottle(SettingsModel):
    """Slow down, then refuse (429), clients whose credentials keep failing (per client address).

    Only requests that present credentials and fail count. Within ``window_seconds``, after
    ``delay_after`` failures each further failure is answered after a delay doubling from
    ``delay_seconds`` up to ``max_delay_seconds``; after ``refuse_after`` failures the address gets
    429 with ``Retry-After`` until its oldest failure leaves the window. Other addresses are
    never affected.
    """

    enabled: bool = True
    window_seconds: float = Field(default=300.0, gt=0)
    delay_after: int = Field(default=5, ge=0)
    delay_seconds: float = Field(default=0.5, ge=0)
    max_delay_seconds: float = Field(default=5.0, ge=0)
    refuse_after: int = Field(default=20, ge=1)
    #: Distinct client addresses tracked at once (least recently failing forgotten first); about
    #: 1 KiB each.
    max_clients: int = Field(default=10_000, gt=0)
