"""``POST /v1/oauth/tokens`` (operationId ``getToken``, deprecated by the spec but still what
Spark's, Trino's and PyIceberg's ``credential=id:secret`` use): the OAuth2 client-credentials
grant (RFC 6749 §4.4).

The client id and secret (form fields ``client_id``/``client_secret``, or HTTP Basic, RFC 6749
§2.3.1) are checked by the topology's password providers (htpasswd, LDAP) within its failure
throttle, exactly as Basic credentials are; the answer is the spec's ``OAuthTokenResponse`` with a
token of the topology's ``gateway-token`` provider
(:mod:`gateway.providers.authentication.gateway_token`), which then authenticates the client on
every service of the topology. The token-exchange grant is not offered (400
``unsupported_grant_type``): a client refreshes by asking again with its credentials, as
PyIceberg does on a 401. Refusals are the spec's ``OAuthError`` (``error``,
``error_description``), not the catalog's error model.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from aiohttp import hdrs, web
from pydantic import BaseModel, ConfigDict
from pyiceberg.catalog.rest.response import TokenResponse

from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.errors import IcebergError
from gateway.iceberg.paths import RouteMatch
from gateway.providers.authentication.base import Principal, well_formed
from gateway.providers.authentication.basic import CLIENT_CREDENTIALS
from gateway.providers.authentication.throttle import THROTTLE

GRANT = "client_credentials"
#: RFC 8693 §3: what ``issued_token_type`` says of an access token.
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
_FORM = "application/x-www-form-urlencoded"
_MAX_FIELDS = 32


class OAuthError(IcebergError):
    """A refusal of the token endpoint: ``{"error": code, "error_description": message}``
    (RFC 6749 §5.2, the spec's ``OAuthError``)."""

    def __init__(self, status: int, code: str, message: str, headers=()):
        super().__init__(message, headers)
        self.status, self.type = status, code

    def body(self) -> dict:
        return {"error": self.type, "error_description": self.message}


def oauth_error(error: IcebergError) -> IcebergError:
    """``error`` in the token endpoint's error model (a refusal raised before the handler ran:
    authentication of the service, body limits, throttle)."""
    if isinstance(error, OAuthError):
        return error
    code = {401: "invalid_client", 403: "unauthorized_client"}.get(error.status, "invalid_request")
    return OAuthError(error.status, code, error.message, error.headers)


def form(request: web.BaseRequest, body: bytes) -> dict[str, str]:
    """The fields of a form-encoded body. Raises :class:`OAuthError` (400 ``invalid_request``)
    for another content type, a body that is not UTF-8, a repeated field or too many fields."""
    if request.content_type != _FORM:
        raise OAuthError(400, "invalid_request", f"the token request must be {_FORM}")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body),
                          max_num_fields=_MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise OAuthError(400, "invalid_request", "the token request is not a valid form") from None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise OAuthError(400, "invalid_request", "a form field is repeated (RFC 6749 §3.2)")
    return fields


class TokenRequest(BaseModel):
    """The spec's ``OAuthClientCredentialsRequest``, form-encoded (other fields ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    grant_type: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None

    @classmethod
    def from_request(cls, catalog: Catalog, request: web.BaseRequest, body: bytes) -> TokenRequest:
        """Raises :class:`OAuthError` as :func:`form`."""
        return cls.model_validate(form(request, body))


async def get_token(catalog: Catalog, route: RouteMatch, request: web.BaseRequest, ask: TokenRequest) -> Reply:
    """The ``OAuthTokenResponse`` for valid client credentials. Raises :class:`OAuthError`: 400
    for a bad form or grant, or a topology without a ``gateway-token`` provider; 401
    ``invalid_client`` for credentials no password provider accepts; 429 from the throttle."""
    grant = ask.grant_type
    if grant != GRANT:
        raise OAuthError(400, "unsupported_grant_type" if grant else "invalid_request",
                         f"only grant_type={GRANT} is offered" if grant else "grant_type is required")
    authentication = catalog.service.authentication
    issuer = next((p for p in authentication.providers if hasattr(p, "mint")), None) if authentication else None
    if authentication is None or issuer is None:
        raise OAuthError(400, "invalid_request", "this topology issues no tokens: its providers have "
                                                 "no gateway-token provider")
    client_id, secret = ask.client_id, ask.client_secret
    if client_id is not None or secret is not None:
        if not client_id or secret is None:
            raise OAuthError(400, "invalid_request", "client_id and client_secret go together")
        request[CLIENT_CREDENTIALS] = (client_id, secret)  # else the Basic header's (§2.3.1)
    principal = await _client(request, authentication)
    if principal is None:
        challenges = [(hdrs.WWW_AUTHENTICATE, p.challenge()) for p in _password_providers(authentication)]
        raise OAuthError(401, "invalid_client", "the client credentials were not accepted", challenges)
    catalog.user = principal.name  # the audit line's user
    token = issuer.mint(principal)
    answer = TokenResponse(access_token=token, token_type="bearer", expires_in=issuer.lifetime,
                           issued_token_type=ACCESS_TOKEN_TYPE, scope=ask.scope or None)
    # RFC 6749 §5.1: a token response must not be cached.
    return Reply(body=answer, headers=((hdrs.CACHE_CONTROL, "no-store"), (hdrs.PRAGMA, "no-cache")))


def _password_providers(authentication) -> list:
    return [p for p in authentication.providers if getattr(p, "checks_passwords", False)]


async def _client(request: web.BaseRequest, authentication) -> Principal | None:
    """The principal of the first password provider that accepts the credentials (their checks
    spend the topology's failure budget; ``Throttled`` propagates)."""
    request[THROTTLE] = authentication.throttle
    for provider in _password_providers(authentication):
        principal = await provider.authenticate(request)
        if principal is not None and well_formed(principal):
            return principal
    return None
