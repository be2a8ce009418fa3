"""Typed, validated topology settings of the LDAP, JWT and Kerberos authentication providers.

These are the pydantic models :mod:`gateway.config` puts in its ``AuthenticationProvider``
union (discriminated by ``type``). Secret fields are :class:`Secret` references
(``file:``/``env:``, see :mod:`.secrets`). Relative file paths (``path_fields``) are resolved against the
topology file's directory by :meth:`with_base`, which raises ``ValueError("<field>: <reason>")``.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.providers.authentication.secrets import Secret


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Fields holding file paths that must exist, resolved against the topology file's directory.
    path_fields: ClassVar[tuple[str, ...]] = ()

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


class FailureThrottle(_Model):
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
    #: Distinct client addresses tracked at once (least recently failing forgotten first).
    max_clients: int = Field(default=100_000, gt=0)


# --- LDAP / Active Directory -----------------------------------------------------------------

_ASYMMETRIC = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
)
_HMAC = ("HS256", "HS384", "HS512")


class LdapProvider(_Model):
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
        if (self.bind_dn is None) != (self.bind_password is None):
            raise ValueError("bind_dn and bind_password go together")
        if self.start_tls and self.url.startswith("ldaps:"):
            raise ValueError("start_tls is for ldap:// URLs; ldaps:// is already TLS")
        return self


# --- JWT bearer tokens -----------------------------------------------------------------------


class JwtProvider(_Model):
    """JWT (RFC 7519) from ``Authorization: Bearer`` (RFC 6750) or the KnoxSSO cookie.

    Keys come from ``public_key_file`` (PEM) and/or ``jwks_url`` (RFC 7517) for the asymmetric
    ``algorithms``, from ``hmac_key`` for HS*. A token's ``alg`` must be listed, and picks the key
    family, so ``none`` and HS/RS key confusion cannot verify.
    """

    type: Literal["jwt"]
    algorithms: list[Literal[_ASYMMETRIC + _HMAC]] = Field(min_length=1)  # type: ignore[valid-type]
    issuer: str
    audience: str
    public_key_file: Path | None = None
    jwks_url: str | None = None
    #: CA bundle for the JWKS URL's TLS certificate; None: system CAs.
    jwks_ca_file: Path | None = None
    #: Seconds a fetched JWKS is used before it is fetched again.
    jwks_cache_seconds: float = Field(default=3600.0, gt=0)
    #: At most one refetch per this many seconds when a token names an unknown ``kid``.
    jwks_min_refresh_seconds: float = Field(default=30.0, ge=0)
    hmac_key: Secret | None = None
    cookie_name: str | None = "hadoop-jwt"
    #: Allowed clock difference for ``exp``/``nbf``/``iat`` (bounded: at most 5 minutes).
    clock_skew_seconds: int = Field(default=30, ge=0, le=300)
    user_claim: str = "sub"
    groups_claim: str | None = None

    path_fields: ClassVar[tuple[str, ...]] = ("public_key_file", "jwks_ca_file")

    @field_validator("jwks_url")
    @classmethod
    def _https(cls, url: str | None) -> str | None:
        if url is None:
            return url
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"{url!r} is not an https:// URL")
        return url

    @model_validator(mode="after")
    def _keys_for_algorithms(self) -> JwtProvider:
        asym = [a for a in self.algorithms if a in _ASYMMETRIC]
        hmac = [a for a in self.algorithms if a in _HMAC]
        if asym and self.public_key_file is None and self.jwks_url is None:
            raise ValueError(f"{asym[0]} needs public_key_file or jwks_url")
        if hmac and self.hmac_key is None:
            raise ValueError(f"{hmac[0]} needs hmac_key")
        if self.hmac_key is not None and not hmac:
            raise ValueError("hmac_key is set but no HS* algorithm is allowed")
        return self


# --- Kerberos / SPNEGO -----------------------------------------------------------------------


class SessionCookie(_Model):
    """The signed cookie issued after a successful SPNEGO handshake (Knox: ``hadoop.auth``)."""

    name: str = "hadoop.auth"
    #: Key the cookie is signed (and encrypted) with; share it between gateway replicas.
    signing_key: Secret
    lifetime_seconds: int = Field(default=3600, gt=0, le=86400)


class KerberosProvider(_Model):
    """SPNEGO (RFC 4559) with a keytab, as Hadoop's ``KerberosAuthenticationHandler``.

    ``keytab`` may be a path or ``env:NAME`` (a variable holding the path).
    """

    type: Literal["kerberos"]
    #: Service principal, ``HTTP/<fully qualified host>@REALM``.
    principal: str
    keytab: Path
    #: Hadoop ``auth_to_local`` rules (``RULE:[1:$1@$0](.*@EXAMPLE\\.COM)s/@.*//``, ``DEFAULT``).
    name_rules: list[str] = Field(default_factory=lambda: ["DEFAULT"], min_length=1)
    cookie: SessionCookie | None = None

    path_fields: ClassVar[tuple[str, ...]] = ("keytab",)

    @field_validator("keytab", mode="before")
    @classmethod
    def _keytab_from_env(cls, value: object) -> object:
        if isinstance(value, str) and value.startswith("env:"):
            return Secret.from_reference(value).reveal()
        return value

    @field_validator("principal")
    @classmethod
    def _service_principal(cls, principal: str) -> str:
        service, slash, rest = principal.partition("/")
        host, at, realm = rest.partition("@")
        if not (service and slash and host and at and realm):
            raise ValueError(f"{principal!r} is not a service principal like HTTP/host@REALM")
        return principal

    @field_validator("name_rules")
    @classmethod
    def _rules_parse(cls, rules: list[str]) -> list[str]:
        from gateway.providers.authentication.name_rules import parse_rules

        parse_rules(rules)  # raises ValueError naming the bad rule
        return rules


# --- client certificates (mTLS) ----------------------------------------------------------------


class MtlsProvider(_Model):
    """A client certificate verified by the listener against ``tls.client_ca`` (gateway file).

    The principal is the subject attribute ``principal_attribute`` (OpenSSL long names:
    ``commonName``, ``emailAddress``, ``userId`` ...). No challenge goes into a 401: a
    certificate is offered during the TLS handshake, not asked for by HTTP.
    """

    type: Literal["mtls"]
    principal_attribute: str = "commonName"
