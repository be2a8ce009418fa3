"""HTTP Basic checked against LDAP / Active Directory (Knox: ShiroProvider with an LDAP realm).

Two ways to find the user's entry, as Knox's ``KnoxLdapRealm``:

* direct bind: the DN is ``user_dn_template`` with ``{user}`` (RDN-escaped, RFC 4514);
* search then bind: bind as the service account, search ``user_search_filter`` (value escaped,
  RFC 4515) below ``user_search_base``, require exactly one entry, bind as it.

The user name is the directory's own spelling: the value, in the entry found, of the attribute
that ``{user}`` was compared with (``uid`` in ``(uid={user})`` or ``uid={user},ou=people,...``),
so that ``ALICE`` and ``alice``, which a directory matches alike, are one user to the policies.

Groups: the user entry's ``group_member_attribute`` (``memberOf``) and/or a group search. The
client library is ldap3 (synchronous; run in a worker thread). TLS is LDAPS or StartTLS
(RFC 4513 §3) with certificate and host name checks. Verified credentials are cached
(:mod:`.credential_cache`), so a burst of requests costs one bind. An empty password is refused
before any bind: LDAP treats it as an unauthenticated bind that "succeeds" (RFC 4513 §5.1.2).

This module holds the settings; the binds, with ldap3, are
:mod:`gateway.providers.authentication.ldap_authenticator`, imported only when a topology
names the provider.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from gateway.providers.authentication.secrets import Secret
from gateway.providers.authentication.settings import ProviderSettings


#: ``(attr={user})`` in a search filter (RFC 4515 equality), or ``attr={user}`` opening a DN
#: template (RFC 4514): the attribute whose value is the user name.
_FILTER_NAME = re.compile(r"\(([A-Za-z0-9][A-Za-z0-9.;-]*)=\{user\}\)")
_TEMPLATE_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9.;-]*)\s*=\s*\{user\}\s*,")


class LdapProvider(ProviderSettings):
    """HTTP Basic checked against LDAP or Active Directory (Knox's ShiroProvider + LDAP realm).

    Either ``user_dn_template`` (direct bind as ``uid={user},ou=people,...``), or search-then-bind:
    bind as ``bind_dn``/``bind_password``, find the user with ``user_search_filter`` below
    ``user_search_base``, bind as the entry found. Groups come from ``group_member_attribute`` of
    the user entry (AD/overlay ``memberOf``) and/or a search below ``group_search_base``.
    """

    type: Literal["ldap"]
    realm: str = "HMS Gateway"
    #: ``ldap://host:389`` or ``ldaps://host:636``.
    url: str
    start_tls: bool = False
    #: CA bundle (PEM) that signs the server's certificate, for LDAPS/StartTLS; None: system CAs.
    ca_file: Path | None = None
    user_dn_template: str | None = None
    bind_dn: str | None = None
    bind_password: Secret | None = None
    user_search_base: str | None = None
    user_search_filter: str = "(uid={user})"
    #: Attribute of the user entry listing its groups' DNs (``memberOf``); None: not read.
    group_member_attribute: str | None = None
    group_search_base: str | None = None
    #: ``{dn}`` is the user's DN, ``{user}`` the login name (both escaped).
    group_search_filter: str = "(|(member={dn})(uniqueMember={dn})(memberUid={user}))"
    group_name_attribute: str = "cn"
    cache_ttl_seconds: float = Field(default=300.0, ge=0)
    timeout_seconds: float = Field(default=5.0, gt=0)

    path_fields: ClassVar[tuple[str, ...]] = ("ca_file",)

    @field_validator("url")
    @classmethod
    def _ldap_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("ldap", "ldaps") or not parts.hostname:
            raise ValueError(f"{url!r} is not an ldap:// or ldaps:// URL")
        return url

    @model_validator(mode="after")
    def _one_mode(self) -> LdapProvider:
        if self.user_dn_template is None and self.user_search_base is None:
            raise ValueError("set user_dn_template (direct bind) or user_search_base (search then bind)")
        if self.user_dn_template is not None and "{user}" not in self.user_dn_template:
            raise ValueError("user_dn_template must contain {user}")
        if "{user}" not in self.user_search_filter:
            raise ValueError("user_search_filter must contain {user}")
        if not self.name_attributes:
            raise ValueError(
                "user_dn_template must start with <attribute>={user}, (uid={user},ou=people,...)"
                if self.user_dn_template is not None else
                "user_search_filter must compare an attribute with exactly {user}, as (uid={user}):"
                " that attribute's value in the entry is the user name")
        if (self.bind_dn is None) != (self.bind_password is None):
            raise ValueError("bind_dn and bind_password go together")
        if self.start_tls and self.url.startswith("ldaps:"):
            raise ValueError("start_tls is for ldap:// URLs; ldaps:// is already TLS")
        return self

    @property
    def name_attributes(self) -> tuple[str, ...]:
        """The attributes whose value in the user's entry is the user name: the first RDN's of
        ``user_dn_template`` (direct bind), else each compared with ``{user}`` in
        ``user_search_filter``, in the filter's order. Empty: the settings name none."""
        if self.user_dn_template is not None:
            found = _TEMPLATE_NAME.match(self.user_dn_template)
            return (found.group(1),) if found else ()
        return tuple(dict.fromkeys(_FILTER_NAME.findall(self.user_search_filter)))

    authenticator: ClassVar[str] = "gateway.providers.authentication.ldap_authenticator:LdapAuthenticator"
