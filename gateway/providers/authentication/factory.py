"""Builds the run-time authenticator for an LDAP, JWT, Kerberos or mTLS provider configuration."""

from __future__ import annotations

from gateway.providers.authentication.base import AuthenticationProvider
from gateway.providers.authentication.settings import (
    JwtProvider,
    KerberosProvider,
    LdapProvider,
    MtlsProvider,
)


def build_provider(config: object) -> AuthenticationProvider | None:
    """The authenticator for ``config``, or None when the type is not one of this package's."""
    if isinstance(config, LdapProvider):
        from gateway.providers.authentication.ldap import LdapAuthenticator

        return LdapAuthenticator(config)
    if isinstance(config, JwtProvider):
        from gateway.providers.authentication.jwt import JwtAuthenticator

        return JwtAuthenticator(config)
    if isinstance(config, KerberosProvider):
        from gateway.providers.authentication.kerberos import KerberosAuthenticator

        return KerberosAuthenticator(config)
    if isinstance(config, MtlsProvider):
        from gateway.providers.authentication.mtls import MtlsAuthenticator

        return MtlsAuthenticator(config)
    return None
