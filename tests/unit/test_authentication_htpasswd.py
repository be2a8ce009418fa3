"""Basic authentication against an htpasswd file: bcrypt, reload, cache, no user enumeration."""

import asyncio
import base64
import os
import subprocess
import time

from aiohttp.test_utils import make_mocked_request

from gateway.providers.authentication.basic import basic_credentials
from gateway.providers.authentication.credential_cache import CredentialCache
from gateway.providers.authentication.htpasswd import HtpasswdAuthenticator, HtpasswdProvider


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def request(auth: str | None):
    return make_mocked_request("POST", "/", headers={"Authorization": auth} if auth else {})


def htpasswd(path, user, password):
    # Apache's own tool writes the file, as operators would (`htpasswd -B`).
    flags = "-bB" + ("c" if not path.exists() else "")
    subprocess.run(["htpasswd", flags, "-C", "4", str(path), user, password], check=True,
                   capture_output=True)


def test_basic_header_parsing():
    assert basic_credentials(basic("alice", "p:w")) == ("alice", "p:w")
    assert basic_credentials("basic " + base64.b64encode(b"bob:").decode()) == ("bob", "")
    for bad in (None, "", "Bearer x", "Basic", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode(),
                "Basic " + base64.b64encode(b":pw").decode(), "Basic " + base64.b64encode(b"\xff:x").decode()):
        assert basic_credentials(bad) is None


async def test_htpasswd_accepts_only_the_right_password(tmp_path):
    users = tmp_path / "users"
    htpasswd(users, "admin", "admin-password")
    auth = HtpasswdAuthenticator(HtpasswdProvider(type="htpasswd", realm="R", users_file=users))
    assert auth.challenge().startswith('Basic realm="R"')
    ok = await auth.authenticate(request(basic("admin", "admin-password")))
    assert ok is not None and ok.name == "admin" and ok.provider == "htpasswd"
    assert await auth.authenticate(request(basic("admin", "wrong"))) is None
    assert await auth.authenticate(request(basic("nobody", "admin-password"))) is None
    assert await auth.authenticate(request(None)) is None


async def test_users_file_is_reloaded_when_it_changes(tmp_path, monkeypatch):
    users = tmp_path / "users"
    htpasswd(users, "admin", "one")
    auth = HtpasswdAuthenticator(HtpasswdProvider(type="htpasswd", users_file=users))
    assert await auth.authenticate(request(basic("admin", "one")))
    htpasswd(users, "admin", "two")
    htpasswd(users, "carol", "three")
    later = time.time() + 5
    os.utime(users, (later, later))  # a distinct mtime even on coarse clocks
    monkeypatch.setattr("gateway.providers.authentication.htpasswd._RELOAD_CHECK_SECONDS", 0.0)
    assert await auth.authenticate(request(basic("admin", "one"))) is None  # cache was cleared
    assert await auth.authenticate(request(basic("admin", "two")))
    assert await auth.authenticate(request(basic("carol", "three")))


async def test_verified_credentials_are_cached(tmp_path, monkeypatch):
    users = tmp_path / "users"
    htpasswd(users, "admin", "pw")
    auth = HtpasswdAuthenticator(HtpasswdProvider(type="htpasswd", users_file=users))
    calls = []
    real = auth._verify
    monkeypatch.setattr(auth, "_verify", lambda u, p: calls.append(u) or real(u, p))
    results = await asyncio.gather(*(auth.authenticate(request(basic("admin", "pw"))) for _ in range(1)))
    for _ in range(20):
        results.append(await auth.authenticate(request(basic("admin", "pw"))))
    assert all(r is not None for r in results)
    assert calls == ["admin"]
    # A wrong password is never served from the cache.
    assert await auth.authenticate(request(basic("admin", "pw2"))) is None
    assert calls == ["admin", "admin"]


def test_credential_cache_never_holds_the_password_and_expires(monkeypatch):
    cache = CredentialCache(ttl_seconds=10, max_entries=2)
    cache.put("u", "secret-password", "v")
    assert cache.get("u", "secret-password") == "v"
    assert cache.get("u", "other") is None
    assert all(b"secret-password" not in k for k in cache._entries)
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + 11)
    assert cache.get("u", "secret-password") is None
    cache.put("a", "1", 1); cache.put("b", "2", 2); cache.put("c", "3", 3)
    assert cache.get("a", "1") is None and cache.get("c", "3") == 3
