"""JWT provider: tokens signed by the test (python-jose + cryptography keys), verified by the
provider; JWKS served over real TLS by a local aiohttp server."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
import time
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jose import jwk, jwt

from gateway.certs import write_dev_certificates
from gateway.config import ConfigError, load_topology_file
from gateway.providers.authentication.jwt import JwtAuthenticator, JwtProvider

ISS, AUD = "https://sso.example.org", "hms-gateway"


def pem_pair(key) -> tuple[str, str]:
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


@pytest.fixture(scope="module")
def rsa_keys():
    return pem_pair(rsa.generate_private_key(public_exponent=65537, key_size=2048))


def claims(**over) -> dict:
    now = int(time.time())
    return {"iss": ISS, "aud": AUD, "sub": "alice", "exp": now + 300, "nbf": now - 5,
            "groups": ["analysts"], **over}


def request_with(token: str | None = None, cookie: str | None = None):
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if cookie is not None:
        headers["Cookie"] = f"hadoop-jwt={cookie}"
    return make_mocked_request("POST", "/gateway/t/x", headers=headers)


@pytest.fixture
def pem_provider(tmp_path: Path, rsa_keys):
    key_file = tmp_path / "public.pem"
    key_file.write_text(rsa_keys[1])
    return JwtAuthenticator(JwtProvider(type="jwt", algorithms=["RS256"], issuer=ISS, audience=AUD,
                                        public_key_file=key_file, groups_claim="groups"))


async def test_valid_bearer_and_cookie(pem_provider, rsa_keys):
    token = jwt.encode(claims(), rsa_keys[0], algorithm="RS256")
    for request in (request_with(token=token), request_with(cookie=token)):
        principal = await pem_provider.authenticate(request)
        assert principal is not None
        assert (principal.name, principal.groups) == ("alice", {"analysts"})
    assert pem_provider.challenge().startswith("Bearer")


@pytest.mark.parametrize(
    "bad",
    [
        {"exp": -120},                        # expired beyond the 30 s skew (relative to now)
        {"nbf": +120},                        # not yet valid
        {"iss": "https://evil.example.org"},
        {"aud": "another-service"},
        {"exp": None}, {"nbf": None}, {"iss": None}, {"aud": None},  # required claims missing
        {"sub": None},
    ],
)
async def test_claims_are_enforced(pem_provider, rsa_keys, bad):
    now = int(time.time())
    relative = {k: now + v for k, v in bad.items() if k in ("exp", "nbf") and v is not None}
    body = {k: v for k, v in claims(**{**bad, **relative}).items() if v is not None}
    token = jwt.encode(body, rsa_keys[0], algorithm="RS256")
    assert await pem_provider.authenticate(request_with(token=token)) is None


async def test_clock_skew_is_tolerated_within_bounds(pem_provider, rsa_keys):
    token = jwt.encode(claims(exp=int(time.time()) - 10), rsa_keys[0], algorithm="RS256")
    assert await pem_provider.authenticate(request_with(token=token)) is not None


async def test_alg_none_and_hs256_with_the_public_key_are_refused(pem_provider, rsa_keys):
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=")
    payload = base64.urlsafe_b64encode(json.dumps(claims()).encode()).rstrip(b"=")
    unsigned = (header + b"." + payload + b".").decode()
    assert await pem_provider.authenticate(request_with(token=unsigned)) is None
    # Key confusion: HMAC "signed" with the RSA public key as the secret.
    header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()).rstrip(b"=")
    signing_input = header + b"." + payload
    sig = base64.urlsafe_b64encode(
        hmac.new(rsa_keys[1].encode(), signing_input, hashlib.sha256).digest()).rstrip(b"=")
    confused = (signing_input + b"." + sig).decode()
    assert await pem_provider.authenticate(request_with(token=confused)) is None


async def test_wrong_key_and_garbage_are_refused(pem_provider):
    other = pem_pair(rsa.generate_private_key(public_exponent=65537, key_size=2048))[0]
    assert await pem_provider.authenticate(request_with(token=jwt.encode(claims(), other, "RS256"))) is None
    assert await pem_provider.authenticate(request_with(token="a.b.c")) is None
    assert await pem_provider.authenticate(request_with(token="x" * 20000)) is None
    assert await pem_provider.authenticate(make_mocked_request("POST", "/")) is None


async def test_hmac_key_from_env(monkeypatch):
    monkeypatch.setenv("P4A_JWT_KEY", "a-long-shared-secret-for-hs256-tokens")
    provider = JwtAuthenticator(JwtProvider(type="jwt", algorithms=["HS256"], issuer=ISS,
                                            audience=AUD, hmac_key="env:P4A_JWT_KEY"))
    good = jwt.encode(claims(), "a-long-shared-secret-for-hs256-tokens", algorithm="HS256")
    bad = jwt.encode(claims(), "another-secret", algorithm="HS256")
    assert await provider.authenticate(request_with(token=good)) is not None
    assert await provider.authenticate(request_with(token=bad)) is None


@pytest.mark.parametrize(
    ("provider", "reason"),
    [
        ({"algorithms": ["none"]}, "Input should be"),
        ({"algorithms": ["RS256"]}, "needs public_key_file or jwks_url"),
        ({"algorithms": ["HS256"]}, "needs hmac_key"),
        ({"algorithms": ["RS256"], "jwks_url": "http://sso/jwks"}, "not an https:// URL"),
        ({"algorithms": ["RS256"], "public_key_file": "missing.pem"}, "no such file"),
        ({"algorithms": ["HS256"], "hmac_key": "inline-secret"}, "never inline"),
        ({"algorithms": ["RS256"], "jwks_url": "https://sso/jwks", "clock_skew_seconds": 3600},
         "less than or equal to 300"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, provider: dict, reason: str):
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump({
        "providers": {"authentication": [{"type": "jwt", "issuer": ISS, "audience": AUD, **provider}]},
        "services": [{"path": "x", "upstream": {"urls": ["thrift://h:9083"]}}],
    }))
    with pytest.raises(ConfigError) as info:
        load_topology_file(topo)
    assert "providers.authentication[0]" in str(info.value)
    assert reason in str(info.value)
    assert "inline-secret" not in str(info.value)


# --- JWKS over real TLS ---------------------------------------------------------------------


@pytest.fixture
async def jwks_server(tmp_path: Path, unused_tcp_port: int):
    keys = {"k1": ec.generate_private_key(ec.SECP256R1()), "k2": ec.generate_private_key(ec.SECP256R1())}
    state = {"published": ["k1"], "fetches": 0}

    async def handler(_request):
        state["fetches"] += 1
        out = []
        for kid in state["published"]:
            public = pem_pair(keys[kid])[1]
            entry = jwk.construct(public, "ES256").to_dict()
            out.append({**entry, "kid": kid, "use": "sig", "alg": "ES256"})
        return web.json_response({"keys": out})

    certs = write_dev_certificates(tmp_path / "certs")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs.certificate, certs.private_key)
    app = web.Application()
    app.router.add_get("/jwks.json", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", unused_tcp_port, ssl_context=ctx)
    await site.start()
    url = f"https://localhost:{unused_tcp_port}/jwks.json"
    yield url, certs.ca_certificate, keys, state
    await runner.cleanup()


def es256(key, kid: str) -> str:
    return jwt.encode(claims(), pem_pair(key)[0], algorithm="ES256", headers={"kid": kid})


async def test_jwks_cached_and_refreshed_on_unknown_kid(jwks_server):
    url, ca, keys, state = jwks_server
    provider = JwtAuthenticator(JwtProvider(type="jwt", algorithms=["ES256"], issuer=ISS, audience=AUD,
                                            jwks_url=url, jwks_ca_file=ca, jwks_min_refresh_seconds=0))
    for _ in range(3):
        assert await provider.authenticate(request_with(token=es256(keys["k1"], "k1"))) is not None
    assert state["fetches"] == 1
    state["published"] = ["k1", "k2"]  # the issuer rotates in a new key
    assert await provider.authenticate(request_with(token=es256(keys["k2"], "k2"))) is not None
    assert state["fetches"] == 2
    # A token signed by k1's key but claiming kid k2 does not verify.
    assert await provider.authenticate(request_with(token=es256(keys["k1"], "k2"))) is None


async def test_unknown_kid_refetch_is_rate_limited(jwks_server):
    url, ca, keys, state = jwks_server
    provider = JwtAuthenticator(JwtProvider(type="jwt", algorithms=["ES256"], issuer=ISS, audience=AUD,
                                            jwks_url=url, jwks_ca_file=ca, jwks_min_refresh_seconds=3600))
    assert await provider.authenticate(request_with(token=es256(keys["k1"], "k1"))) is not None
    for i in range(5):
        assert await provider.authenticate(request_with(token=es256(keys["k2"], f"junk{i}"))) is None
    assert state["fetches"] == 1


async def test_untrusted_jwks_certificate_means_no_keys(jwks_server):
    url, _ca, keys, state = jwks_server
    provider = JwtAuthenticator(JwtProvider(type="jwt", algorithms=["ES256"], issuer=ISS, audience=AUD,
                                            jwks_url=url))
    assert await provider.authenticate(request_with(token=es256(keys["k1"], "k1"))) is None
    assert state["fetches"] == 0
