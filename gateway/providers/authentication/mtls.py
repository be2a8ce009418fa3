"""Client-certificate authentication (mutual TLS, RFC 8446 §4.4.2).

The listener verifies the certificate chain against ``tls.client_ca`` during the handshake
(``gateway.tls``); this provider only names the principal from the verified certificate's
subject. A request without a certificate is simply not authenticated by this provider.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from aiohttp import web

from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.settings import GatewayFile, ProviderSettings


class MtlsProvider(ProviderSettings):
    """A client certificate verified by the listener against ``tls.client_ca`` (gateway file).

    The principal is the subject attribute ``principal_attribute`` (OpenSSL long names:
    ``commonName``, ``emailAddress``, ``userId`` ...). No challenge goes into a 401: a
    certificate is offered during the TLS handshake, not asked for by HTTP.
    """

    type: Literal["mtls"]
    principal_attribute: str = "commonName"

    def check(self, gateway: GatewayFile) -> str | None:
        # Without a CA the listener never asks for a certificate: this provider could never succeed.
        return None if gateway.tls.client_ca else "type mtls needs tls.client_ca in the gateway file"

    authenticator: ClassVar[str] = "gateway.providers.authentication.mtls:MtlsAuthenticator"


class MtlsAuthenticator:
    name = "mtls"

    def __init__(self, config: MtlsProvider):
        self.attribute = config.principal_attribute

    def challenge(self) -> str:
        return ""  # no HTTP challenge: certificates are offered in the TLS handshake

    async def authenticate(self, request: web.Request) -> Principal | None:
        transport = request.transport
        cert = transport.get_extra_info("peercert") if transport is not None else None
        if not cert:  # no certificate, or one the handshake did not verify
            return None
        for rdn in cert.get("subject", ()):
            for key, value in rdn:
                if key == self.attribute and value:
                    return Principal(name=value, provider=self.name)
        return None
