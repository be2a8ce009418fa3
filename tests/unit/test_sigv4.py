"""The sigv4 authentication provider: requests signed by botocore's own signer are accepted,
and every way of getting a signature wrong is refused with AWS's error code and status."""

from __future__ import annotations

import json
import time

import pytest
from aiohttp.test_utils import make_mocked_request
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pydantic import ValidationError

from gateway.providers.authentication.sigv4 import (
    REFUSAL,
    SIGNED_BODY,
    SigV4Authenticator,
    SigV4Provider,
    parse_credentials_file,
)
from gateway.providers.authentication.settings import FailureThrottle
from gateway.providers.authentication.throttle import THROTTLE, AuthFailureThrottle, Throttled

KEY_ID, SECRET = "AKIAALICE000000001", "alice/secret+key0000000000000000000000001"
CREDENTIALS = f"""[alice]
aws_access_key_id = {KEY_ID}
aws_secret_access_key = {SECRET}

[bob]
aws_access_key_id = AKIABOB0000000000001
aws_secret_access_key = bob-secret
"""
HOST = "gateway.example:8443"
PATH = "/gateway/default/glue"
BODY = json.dumps({"DatabaseName": "sales"}).encode()


@pytest.fixture
def secrets(tmp_path):
    path = tmp_path / "credentials"
    path.write_text(CREDENTIALS)
    return f"file:{path}"


def provider(secrets: str, **extra) -> SigV4Provider:
    return SigV4Provider(type="sigv4", access_keys={KEY_ID: "alice", "AKIABOB0000000000001": "bob"},
                         secret_keys=secrets, **extra)


def signed(*, key_id=KEY_ID, secret=SECRET, when: float | None = None, region="us-east-1",
           service="glue", body=BODY, path=PATH, sent_body=None, extra_headers=None) -> dict[str, str]:
    """Headers of a request botocore signs as boto3's glue client does."""
    request = AWSRequest(method="POST", url=f"https://{HOST}{path}", data=body, headers={
        "X-Amz-Target": "AWSGlue.GetTables", "Content-Type": "application/x-amz-json-1.1",
        **(extra_headers or {})})
    signer = SigV4Auth(Credentials(key_id, secret), service, region)
    if when is None:
        signer.add_auth(request)
    else:  # sign at a chosen time, as add_auth does at "now"
        request.context["timestamp"] = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
        signer._modify_request_before_signing(request)
        canonical = signer.canonical_request(request)
        signature = signer.signature(signer.string_to_sign(request, canonical), request)
        signer._inject_signature_to_request(request, signature)
    headers = dict(request.headers.items())
    headers["Host"] = HOST
    return headers


async def authenticate(authenticator, headers, *, body=BODY, path=PATH, throttle=None):
    request = make_mocked_request("POST", path, headers=headers)
    request[SIGNED_BODY] = body
    if throttle is not None:
        request[THROTTLE] = throttle
    return await authenticator.authenticate(request), request.get(REFUSAL)


async def test_a_request_botocore_signed_is_accepted_as_its_user(secrets):
    principal, refusal = await authenticate(provider(secrets).build(), signed())
    assert refusal is None
    assert principal.name == "alice" and principal.provider == "sigv4"


async def test_region_comes_from_the_credential_scope_and_can_be_restricted(secrets):
    any_region = provider(secrets).build()
    assert (await authenticate(any_region, signed(region="eu-west-3")))[0].name == "alice"
    restricted = provider(secrets, regions=["us-east-1"]).build()
    principal, refusal = await authenticate(restricted, signed(region="eu-west-3"))
    assert principal is None and refusal.code == "InvalidSignatureException" and refusal.status == 403


async def test_a_wrong_secret_is_an_invalid_signature(secrets):
    principal, refusal = await authenticate(provider(secrets).build(), signed(secret="not-the-secret"))
    assert principal is None
    assert (refusal.code, refusal.status) == ("InvalidSignatureException", 403)
    assert "does not match the signature you provided" in refusal.message


async def test_an_unknown_access_key_is_an_unrecognized_client(secrets):
    principal, refusal = await authenticate(provider(secrets).build(), signed(key_id="AKIANOBODY00000001"))
    assert principal is None and (refusal.code, refusal.status) == ("UnrecognizedClientException", 403)


async def test_a_changed_body_or_path_breaks_the_signature(secrets):
    authenticator = provider(secrets).build()
    _, refusal = await authenticate(authenticator, signed(), body=b'{"DatabaseName":"finance"}')
    assert refusal.code == "InvalidSignatureException"
    _, refusal = await authenticate(authenticator, signed(), path="/gateway/other/glue")
    assert refusal.code == "InvalidSignatureException"


async def test_a_signed_header_that_is_changed_breaks_the_signature(secrets):
    headers = signed()
    headers["X-Amz-Target"] = "AWSGlue.GetUnfilteredTableMetadata"
    _, refusal = await authenticate(provider(secrets).build(), headers)
    assert refusal.code == "InvalidSignatureException"


async def test_a_content_hash_that_is_not_the_body_is_refused(secrets):
    headers = signed(extra_headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    _, refusal = await authenticate(provider(secrets).build(), headers)
    assert refusal.code == "InvalidSignatureException" and "x-amz-content-sha256" in refusal.message


@pytest.mark.parametrize("offset, words", [(-400, "Signature expired"), (400, "not yet current")])
async def test_clock_skew_beyond_five_minutes_is_refused(secrets, offset, words):
    principal, refusal = await authenticate(provider(secrets).build(), signed(when=time.time() + offset))
    assert principal is None
    assert (refusal.code, refusal.status) == ("InvalidSignatureException", 403)
    assert words in refusal.message and "5 min." in refusal.message


async def test_clock_skew_within_the_bound_is_accepted(secrets):
    principal, _ = await authenticate(provider(secrets).build(), signed(when=time.time() - 200))
    assert principal.name == "alice"


async def test_the_scope_must_name_the_service(secrets):
    _, refusal = await authenticate(provider(secrets).build(), signed(service="s3"))
    assert refusal.code == "InvalidSignatureException" and "'glue'" in refusal.message


@pytest.mark.parametrize("authorization, code", [
    ("AWS4-HMAC-SHA256 Credential=AKIAALICE000000001/20260101/us-east-1/glue/aws4_request",
     "IncompleteSignatureException"),
    ("AWS4-HMAC-SHA256 Credential=x/y, SignedHeaders=host, Signature=00", "IncompleteSignatureException"),
    ("AWS4-HMAC-SHA256 garbage", "IncompleteSignatureException"),
])
async def test_malformed_authorization_is_an_incomplete_signature(secrets, authorization, code):
    headers = signed()
    headers["Authorization"] = authorization
    principal, refusal = await authenticate(provider(secrets).build(), headers)
    assert principal is None and refusal.code == code and refusal.status == 400


async def test_other_schemes_are_left_to_other_providers(secrets):
    principal, refusal = await authenticate(provider(secrets).build(), {"Authorization": "Basic YTpi"})
    assert principal is None and refusal is None


async def test_without_the_body_the_provider_declines(secrets):
    request = make_mocked_request("POST", PATH, headers=signed())
    assert await provider(secrets).build().authenticate(request) is None


async def test_failed_checks_spend_the_throttle_budget(secrets):
    throttle = AuthFailureThrottle(FailureThrottle(delay_after=100, refuse_after=2))
    authenticator = provider(secrets).build()
    for _ in range(2):
        await authenticate(authenticator, signed(secret="wrong"), throttle=throttle)
    with pytest.raises(Throttled):
        await authenticate(authenticator, signed(secret="wrong"), throttle=throttle)


def test_secrets_never_show_in_settings_or_errors(secrets, tmp_path):
    settings = provider(secrets)
    assert SECRET not in repr(settings) and SECRET not in str(settings.model_dump())
    lacking = tmp_path / "lacking"
    lacking.write_text(f"[alice]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n")
    with pytest.raises(ValidationError) as caught:
        provider(f"file:{lacking}")
    assert "AKIABOB0000000000001" in str(caught.value) and SECRET not in str(caught.value)


def test_inline_secrets_and_bad_key_ids_are_refused(secrets):
    with pytest.raises(ValidationError, match="never inline"):
        provider(SECRET)
    with pytest.raises(ValidationError, match="not an access key id"):
        SigV4Provider(type="sigv4", access_keys={"bad id": "alice"}, secret_keys=secrets)


def test_credentials_file_parsing():
    assert parse_credentials_file(CREDENTIALS) == {KEY_ID: SECRET, "AKIABOB0000000000001": "bob-secret"}
    with pytest.raises(ValueError, match=r"\[x\] needs"):
        parse_credentials_file("[x]\naws_access_key_id = A\n")
    with pytest.raises(ValueError, match="not an AWS credentials file"):
        parse_credentials_file("no section here")


def test_the_registry_knows_sigv4():
    from gateway.providers.authentication.registry import settings_models

    assert SigV4Provider in settings_models()
    assert SigV4Authenticator.name == "sigv4"


def test_the_challenge_names_the_scheme(secrets):
    assert provider(secrets).build().challenge() == "AWS4-HMAC-SHA256"
