"""The authentication providers a topology file may name, by ``type`` tag.

One line per provider (as uvicorn's ``LOOP_SETUPS``/``HTTP_PROTOCOLS``: ``"module:attribute"``
strings); the attribute is the provider's settings model, a
:class:`~gateway.providers.authentication.settings.ProviderSettings` whose ``type`` is
``Literal["<tag>"]``. :mod:`gateway.config` builds the discriminated union of
``providers.authentication`` from :func:`settings_models`; topologies build each authenticator
with the model's ``build()``.
"""

from __future__ import annotations

from functools import cache
from typing import get_args

from gateway.providers.authentication.settings import ProviderSettings
from gateway.registry import resolve

PROVIDERS: dict[str, str] = {
    "htpasswd": "gateway.providers.authentication.htpasswd:HtpasswdProvider",
    "ldap": "gateway.providers.authentication.ldap:LdapProvider",
    "jwt": "gateway.providers.authentication.jwt:JwtProvider",
    "kerberos": "gateway.providers.authentication.kerberos:KerberosProvider",
    "mtls": "gateway.providers.authentication.mtls:MtlsProvider",
    "sigv4": "gateway.providers.authentication.sigv4:SigV4Provider",
    "gateway-token": "gateway.providers.authentication.gateway_token:GatewayTokenProvider",
}


def _load(tag: str, target: str) -> type[ProviderSettings]:
    model = resolve(target)
    if not (isinstance(model, type) and issubclass(model, ProviderSettings)):
        raise TypeError(f"{target} is not a ProviderSettings model")
    field = model.model_fields.get("type")
    if field is None or get_args(field.annotation) != (tag,):
        raise TypeError(f"{target} must declare type: Literal[{tag!r}]")
    return model


@cache
def settings_models() -> tuple[type[ProviderSettings], ...]:
    """Every registered settings model, in registry order (imports the provider modules).

    Raises ``TypeError`` when an entry is not a ``ProviderSettings`` with ``type: Literal[tag]``.
    """
    return tuple(_load(tag, target) for tag, target in PROVIDERS.items())
