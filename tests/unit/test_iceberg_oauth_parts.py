"""The token endpoint's parts without servers: the ``gateway-token`` provider (mint, verify,
expiry, audience, foreign keys and algorithms), the form, the client-credentials grant with fake
password providers, and register's location check."""

from __future__ import annotations

from dataclasses import replace

import json
import time
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import make_mocked_request
from jose import jwt
from multidict import CIMultiDict
from pydantic import ValidationError

from gateway.iceberg.catalog import Catalog
from gateway.iceberg.oauth import OAuthError, form, oauth_error
from gateway.iceberg import errors
from gateway.iceberg.locations import inside as below
from gateway.iceberg.routes import RouteMatch, answer
from gateway.providers.authentication.base import Principal
from gateway.providers.authentication.basic import password_credentials
from gateway.providers.authentication.gateway_token import GatewayTokenProvider

KEY = "k" * 40
FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "token.key"
    path.write_text(KEY)
    return path


def _issuer(key_file, **extra):
    return GatewayTokenProvider(type="gateway-token", signing_key=f"file:{key_file}", **extra).build()


def _bearer(token: str):
    return make_mocked_request("GET", "/", headers={"Authorization": f"Bearer {token}"})


async def test_a_minted_token_authenticates_as_its_principal_with_groups(key_file):
    issuer = _issuer(key_file)
    principal = await issuer.authenticate(_bearer(issuer.mint(Principal("etl", "htpasswd", frozenset({"ops"})))))
    assert principal == Principal("etl", "gateway-token", frozenset({"ops"}))


async def test_an_expired_token_is_refused(key_file):
    issuer = _issuer(key_file, lifetime_seconds=60, clock_skew_seconds=0)
    token = issuer.mint(Principal("etl", "htpasswd"), now=time.time() - 120)
    assert await issuer.authenticate(_bearer(token)) is None


async def test_tokens_of_another_audience_key_or_algorithm_are_refused(key_file, tmp_path):
    issuer = _issuer(key_file)
    other_audience = _issuer(key_file, audience="other-topology")
    assert await issuer.authenticate(_bearer(other_audience.mint(Principal("etl", "x")))) is None
    other_key = tmp_path / "other.key"
    other_key.write_text("z" * 40)
    assert await issuer.authenticate(_bearer(_issuer(other_key).mint(Principal("etl", "x")))) is None
    claims = {"iss": "hms-gateway", "aud": "hms-gateway", "sub": "etl", "nbf": 0, "exp": 4102444800}
    assert await issuer.authenticate(_bearer(jwt.encode(claims, KEY, algorithm="HS512"))) is None
    unsigned = jwt.encode(claims, KEY, algorithm="HS256").rsplit(".", 1)[0] + "."
    assert await issuer.authenticate(_bearer(unsigned)) is None


def test_a_short_signing_key_is_refused_naming_its_file(tmp_path):
    short = tmp_path / "short.key"
    short.write_text("too-short")
    with pytest.raises(ValidationError, match="shorter than 32 bytes"):
        GatewayTokenProvider(type="gateway-token", signing_key=f"file:{short}")


def _request(body: bytes, content_type: str = FORM, headers=()):
    return make_mocked_request("POST", "/v1/oauth/tokens",
                               headers=CIMultiDict([("Content-Type", content_type), *headers]))


@pytest.mark.parametrize("body, content_type, words", [
    (b"grant_type=client_credentials", "application/json", "x-www-form-urlencoded"),
    (b"grant_type=a&grant_type=b", FORM, "repeated"),
    (b"\xff", FORM, "not a valid form"),
])
def test_a_bad_form_is_400_invalid_request(body, content_type, words):
    with pytest.raises(OAuthError, match=words) as caught:
        form(_request(body, content_type), body)
    assert (caught.value.status, caught.value.body()["error"]) == (400, "invalid_request")


class PasswordProvider:
    name, checks_passwords = "htpasswd", True

    def challenge(self):
        return 'Basic realm="HMS Gateway"'

    async def authenticate(self, request):
        given = password_credentials(request)
        return Principal(given[0], self.name) if given == ("etl", "secret") else None


def _catalog(key_file, with_issuer=True):
    providers = (PasswordProvider(), *((_issuer(key_file),) if with_issuer else ()))
    service = SimpleNamespace(authentication=SimpleNamespace(providers=providers, throttle=None))
    return Catalog(None, None, None, service, "")  # type: ignore[arg-type]


async def _token(catalog, body: bytes, headers=()):
    reply = await answer(catalog, RouteMatch("getToken"), _request(body, headers=headers), body)
    return replace(reply, body=json.loads(reply.body))


async def test_client_credentials_in_the_form_get_a_token_that_authenticates(key_file):
    catalog = _catalog(key_file)
    reply = await _token(catalog, b"grant_type=client_credentials&client_id=etl&client_secret=secret&scope=catalog")
    assert reply.body["token_type"] == "bearer" and reply.body["expires_in"] == 3600
    assert reply.body["scope"] == "catalog" and ("Cache-Control", "no-store") in reply.headers
    principal = await _issuer(key_file).authenticate(_bearer(reply.body["access_token"]))
    assert principal.name == "etl" and catalog.user == "etl"


async def test_client_credentials_in_the_basic_header_work_too(key_file):
    reply = await _token(_catalog(key_file), b"grant_type=client_credentials",
                         headers=[("Authorization", "Basic ZXRsOnNlY3JldA==")])  # etl:secret
    assert reply.body["access_token"]


@pytest.mark.parametrize("body, status, error", [
    (b"grant_type=client_credentials&client_id=etl&client_secret=wrong", 401, "invalid_client"),
    (b"grant_type=client_credentials", 401, "invalid_client"),
    (b"grant_type=client_credentials&client_secret=secret", 400, "invalid_request"),
    (b"grant_type=urn:ietf:params:oauth:grant-type:token-exchange", 400, "unsupported_grant_type"),
    (b"client_id=etl&client_secret=secret", 400, "invalid_request"),
])
async def test_refusals_are_oauth_errors(key_file, body, status, error):
    with pytest.raises(OAuthError) as caught:
        await _token(_catalog(key_file), body)
    assert caught.value.status == status
    assert set(caught.value.body()) == {"error", "error_description"} and caught.value.body()["error"] == error


async def test_a_topology_without_a_token_provider_issues_no_token(key_file):
    with pytest.raises(OAuthError, match="no gateway-token provider"):
        await _token(_catalog(key_file, with_issuer=False),
                     b"grant_type=client_credentials&client_id=etl&client_secret=secret")


def test_refusals_raised_before_the_handler_take_the_oauth_model():
    error = oauth_error(errors.PayloadTooLarge("body over 64 KiB"))
    assert error.status == 413 and json.loads(error.response().body) == {
        "error": "invalid_request", "error_description": "body over 64 KiB"}


@pytest.mark.parametrize("location, prefix, inside", [
    ("file:/wh/db.db/t/metadata/1.json", "file:/wh/db.db", True),
    ("file:///wh/db.db/t/m.json", "file:/wh/db.db", True),
    ("/wh/db.db/t/m.json", "file:///wh/db.db/", True),
    ("file:/wh/db.db2/t/m.json", "file:/wh/db.db", False),
    ("file:/wh/db.db/../other.db/t/m.json", "file:/wh/db.db", False),
    ("s3://bucket/wh/db/t/m.json", "s3://bucket/wh/db", True),
    ("s3://other/wh/db/t/m.json", "s3://bucket/wh/db", False),
    ("s3a://bucket/wh/db/t/m.json", "s3://bucket/wh/db", True),  # s3a names the same objects
])
def test_register_takes_only_locations_below_a_prefix(location, prefix, inside):
    assert below(location, prefix) is inside
