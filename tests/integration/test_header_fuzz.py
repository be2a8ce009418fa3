"""Header fuzzing against the real gateway over raw TLS sockets (issue 9): ``Authorization``,
``Cookie``, ``X-Request-Id``, ``Content-Type`` and ``Host`` with seeded random bytes and
lengths, and the named cases from the attack (NUL bytes inside Basic credentials, raw
``\\xff\\xfe\\xfd``). No header value may ever give a 5xx; the named ones get 401 (or 400 when
the header cannot be decoded). Raw sockets, because urllib and aiohttp refuse to send most of
these bytes. Topologies: htpasswd Basic and JWT (HS256), the failure throttle off.
"""

from __future__ import annotations

import base64
import random
import socket
import ssl
import time

import pytest
from jose import jwt

from tests.support.gateway import SPEC_PATH, RunningGateway, htpasswd_provider, service

pytestmark = pytest.mark.integration

USER, PASSWORD = "admin", "admin-password"
HMAC_KEY = "header-fuzz-shared-secret-0123456789"
BODY = b'[1,"get_all_databases",1,1,{}]'
SEED = 909
NO_THROTTLE = {"enabled": False}  # every request reaches the providers, none waits


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory) -> RunningGateway:
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    topologies = {
        "default": {"providers": {
            "authentication": [htpasswd_provider()],
            "failure_throttle": NO_THROTTLE}, "services": [service([hms_url])]},
        "jwt": {"providers": {
            "authentication": [{"type": "jwt", "algorithms": ["HS256"], "issuer": "fuzz", "audience": "hms",
                                "hmac_key": "env:HEADER_FUZZ_JWT_KEY"}],
            "failure_throttle": NO_THROTTLE}, "services": [service([hms_url])]},
    }
    return module_gateway_factory(topologies, {USER: PASSWORD}, env={"HEADER_FUZZ_JWT_KEY": HMAC_KEY})


def basic(credentials: bytes) -> bytes:
    return b"Basic " + base64.b64encode(credentials)


GOOD = basic(f"{USER}:{PASSWORD}".encode())


def token(**claims) -> str:
    now = int(time.time())
    return jwt.encode({"iss": "fuzz", "aud": "hms", "sub": "carol", "exp": now + 300, "nbf": now - 5, **claims},
                      HMAC_KEY, algorithm="HS256")


def exchange(gw: RunningGateway, headers: list[tuple[bytes, bytes]], *, topology: str = "default",
             host: bytes | None = None, body: bytes = BODY) -> tuple[int | None, bytes]:
    """One HTTP/1.1 POST with exactly these header bytes over a new TLS connection; the status
    (None if the gateway closed without answering) and the raw response."""
    lines = [f"POST /gateway/{topology}/{SPEC_PATH} HTTP/1.1".encode(),
             b"Host: " + (f"localhost:{gw.port}".encode() if host is None else host),
             b"Content-Length: " + str(len(body)).encode(), b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    request = b"\r\n".join(lines) + b"\r\n\r\n" + body
    context = gw.ssl_context()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=30) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as sock:
            try:
                sock.sendall(request)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass  # the gateway may answer and close before reading a huge header
            chunks = []
            while True:
                try:
                    chunk = sock.recv(65536)
                except (ConnectionResetError, ssl.SSLError):
                    break
                if not chunk:
                    break
                chunks.append(chunk)
    response = b"".join(chunks)
    if not response.startswith(b"HTTP/1."):
        return None, response
    return int(response.split(b" ", 2)[1]), response


NAMED_AUTHORIZATION = {
    "Basic NUL after the password": basic(b"admin:admin-password\x00"),
    "Basic NUL after the user": basic(b"admin\x00:admin-password"),
    "Basic NUL only": basic(b"\x00"),
    "Basic NUL-separated": basic(b"admin\x00admin-password"),
    "raw \\xff\\xfe\\xfd after Basic": b"Basic \xff\xfe\xfd",
    "raw \\xff\\xfe\\xfd alone": b"\xff\xfe\xfd",
    "raw \\xff\\xfe\\xfd in base64": b"Basic YWRt\xff\xfe\xfdaW4=",
    "non-UTF-8 after base64 decoding": basic(b"\xff\xfe\xfd:\xfd"),
    "non-UTF-8 password": basic(b"admin:\xc0\xaf"),
    "invalid base64": b"Basic !!!not-base64!!!",
    "base64 without padding": b"Basic YWRtaW46YWRtaW4tcGFzc3dvcmQ",
    "empty user": basic(b":admin-password"),
    "colon-less": basic(b"adminadmin-password"),
    "empty credentials": b"Basic ",
    "scheme only": b"Basic",
    "huge Basic (6 KB)": basic(b"admin:" + b"p" * 4500),
    "huge Basic (100 KB)": basic(b"admin:" + b"p" * 75000),
    "control characters": basic(b"admin:admin-\x01\x7fpassword"),
    "Bearer junk": b"Bearer \x00\xff junk",
    "Bearer three dots": b"Bearer a.b.c",
    "Bearer alg none": b"Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.",
    "Negotiate junk": b"Negotiate \xff\xfe" + b"A" * 300,
    "Negotiate base64 junk": b"Negotiate " + base64.b64encode(b"\x60\x82\x00\x00junk"),
    "unknown scheme": b"Digest username=\"admin\"",
}


@pytest.mark.parametrize("value", NAMED_AUTHORIZATION.values(), ids=NAMED_AUTHORIZATION.keys())
def test_named_authorization_values_get_401_or_400(gateway, value):
    status, response = exchange(gateway, [(b"Authorization", value), (b"Content-Type", b"application/x-thrift")])
    assert status in (400, 401, 431), response[:300]


def test_good_credentials_still_work_over_raw_sockets(gateway):
    # the client above can succeed: the named cases fail for their header, not for the client
    status, response = exchange(gateway, [(b"Authorization", GOOD)])
    assert status == 200, response[:300]
    status, response = exchange(gateway, [(b"Authorization", b"Bearer " + token().encode())], topology="jwt")
    assert status == 200, response[:300]


def random_value(rng: random.Random) -> bytes:
    """Random bytes of a random length; no CR or LF (they would end the header line)."""
    size = rng.choice([0, 1, 3, 16, 64, 300, 2000, 7000, 9000])
    alphabet = rng.choice(["any", "ascii", "high"])
    out = bytearray()
    for _ in range(size):
        if alphabet == "ascii":
            b = rng.randrange(0x20, 0x7F)
        elif alphabet == "high":
            b = rng.randrange(0x80, 0x100)
        else:
            b = rng.randrange(0x100)
        out.append(b if b not in (0x0A, 0x0D) else 0x20)
    return bytes(out)


def fuzz_cases(seed: int, count: int) -> list[tuple[str, str, list[tuple[bytes, bytes]], bytes | None]]:
    """(label, topology, headers, host) with one fuzzed header each; the others are valid, so
    that the fuzzed one is what the gateway has to cope with."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        topology = rng.choice(["default", "jwt"])
        good = GOOD if topology == "default" else b"Bearer " + token().encode()
        target = rng.choice(["Authorization", "Cookie", "X-Request-Id", "Content-Type", "Host"])
        value = random_value(rng)
        if target == "Authorization":
            prefix = rng.choice([b"", b"Basic ", b"Bearer ", b"Negotiate "])
            if prefix == b"Basic " and rng.random() < 0.5:
                value = base64.b64encode(value[:3000])  # decodes, to random bytes
            headers = [(b"Authorization", prefix + value)]
        else:
            headers = [(b"Authorization", good)]
            if target == "Cookie":
                prefix = rng.choice([b"", b"hadoop-jwt=", b"hadoop.auth=", b"a=b; hadoop-jwt="])
                headers.append((b"Cookie", prefix + value))
            elif target != "Host":
                headers.append((target.encode(), value))
        cases.append((f"#{i} {topology} {target}", topology, headers, value if target == "Host" else None))
    return cases


def test_random_header_values_never_give_a_5xx(gateway):
    cases = fuzz_cases(SEED, 400)
    answers: dict[str, int] = {}
    failures = []
    for label, topology, headers, host in cases:
        status, response = exchange(gateway, headers, topology=topology, host=host)
        key = "closed" if status is None else str(status)
        answers[key] = answers.get(key, 0) + 1
        if status is None or status >= 500:
            failures.append(f"{label} {headers[-1][1][:60]!r}: {response[:200]!r}")
    assert failures == [], f"{len(failures)} of {len(cases)} failed ({answers}):\n" + "\n".join(failures[:10])
    # the fuzz got past authentication as well as being refused by it
    assert answers.get("200", 0) > 50 and answers.get("401", 0) + answers.get("400", 0) > 50, answers


JWT_TOKENS = {
    "NUL in the subject": lambda: token(sub="car\x00ol"),
    "control characters in the subject": lambda: token(sub="carol\x1b[31m"),
    "huge subject": lambda: token(sub="c" * 20000),
    "empty subject": lambda: token(sub=""),
    "subject not a string": lambda: token(sub=12),
    "lone surrogate escape in the subject": lambda: token(sub="\ud800"),
    "expired": lambda: token(exp=1),
    "wrong key": lambda: jwt.encode({"iss": "fuzz", "aud": "hms", "sub": "x", "exp": 2**40}, "other", algorithm="HS256"),
}


@pytest.mark.parametrize("make", JWT_TOKENS.values(), ids=JWT_TOKENS.keys())
def test_hostile_jwt_claims_never_give_a_5xx(gateway, make):
    try:
        value = make().encode()
    except (TypeError, ValueError, UnicodeEncodeError) as exc:  # python-jose refuses to sign it
        raise AssertionError(f"cannot build the token: {exc}") from exc
    for headers in ([(b"Authorization", b"Bearer " + value)], [(b"Cookie", b"hadoop-jwt=" + value)]):
        status, response = exchange(gateway, headers, topology="jwt")
        assert status is not None and status < 500, response[:300]
