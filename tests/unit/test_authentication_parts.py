"""Unit tests of the provider-independent authentication parts: secrets, auth_to_local rules,
the failure throttle (with a fake clock) and the session cookie."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from pydantic import BaseModel

from gateway.providers.authentication.name_rules import NameRules, parse_rules
from gateway.providers.authentication.secrets import Secret
from gateway.providers.authentication.session_cookie import SessionCookies
from gateway.providers.authentication.settings import FailureThrottle
from gateway.providers.authentication.throttle import AuthFailureThrottle


class _WithSecret(BaseModel):
    password: Secret


# --- secrets -------------------------------------------------------------------------------


def test_secret_from_file_is_stripped_and_hidden(tmp_path: Path):
    f = tmp_path / "pw"
    f.write_text("s3cret-value\n")
    model = _WithSecret(password=f"file:{f}")
    assert model.password.reveal() == "s3cret-value"
    assert "s3cret" not in repr(model) and "s3cret" not in str(model.password)


def test_secret_from_env(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("P4A_TEST_SECRET", "from-env")
    assert _WithSecret(password="env:P4A_TEST_SECRET").password.reveal() == "from-env"


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        ("hunter2", "never inline"),
        ("env:P4A_SURELY_UNSET_VARIABLE", "is not set"),
        ("file:relative/path", "absolute"),
        ("file:/nonexistent/p4a/secret", "cannot read"),
        (42, "reference"),
    ],
)
def test_bad_secret_references_are_refused_without_echoing_values(reference, reason):
    with pytest.raises(ValueError) as info:
        _WithSecret(password=reference)
    message = info.value.errors()[0]["msg"]  # what ConfigError reports
    assert reason in message
    assert "hunter2" not in message


# --- auth_to_local -------------------------------------------------------------------------


def test_default_rule_strips_default_realm_only():
    rules = NameRules(["DEFAULT"], default_realm="EXAMPLE.COM")
    assert rules.short_name("alice@EXAMPLE.COM") == "alice"
    assert rules.short_name("HTTP/host.example.com@EXAMPLE.COM") == "HTTP"
    assert rules.short_name("alice@OTHER.ORG") is None


def test_hadoop_rules_in_order():
    rules = NameRules(
        [
            r"RULE:[2:$1@$0](hive@EXAMPLE\.COM)s/.*/hive/",
            r"RULE:[1:$1@$0](.*@PARTNER\.ORG)s/@.*//L",
            r"RULE:[1:$1](svc_.*)s/svc_/service-/g",
            "DEFAULT",
        ],
        default_realm="EXAMPLE.COM",
    )
    assert rules.short_name("hive/node1.example.com@EXAMPLE.COM") == "hive"
    assert rules.short_name("Bob@PARTNER.ORG") == "bob"
    assert rules.short_name("svc_etl@EXAMPLE.COM") == "service-etl"
    assert rules.short_name("carol@EXAMPLE.COM") == "carol"
    assert rules.short_name("mallory@EVIL.ORG") is None


def test_rule_producing_a_non_simple_name_maps_to_nothing():
    rules = NameRules([r"RULE:[2:$1/$2@$0](.*)"], default_realm="EXAMPLE.COM")
    assert rules.short_name("hive/host@EXAMPLE.COM") is None


@pytest.mark.parametrize("bad", ["RULE:[x:$1]", "RULE:[1:$1](*bad)", "NOT A RULE"])
def test_bad_rules_raise(bad: str):
    with pytest.raises(ValueError):
        parse_rules([bad])


# --- failure throttle ----------------------------------------------------------------------


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttle_delays_then_refuses_one_address_only():
    clock = FakeClock()
    config = FailureThrottle(window_seconds=60, delay_after=2, delay_seconds=1,
                             max_delay_seconds=4, refuse_after=6)
    throttle = AuthFailureThrottle(config, clock=clock)
    delays = [throttle.record_failure("10.0.0.1") for _ in range(5)]
    assert delays == [0, 0, 1, 2, 4]
    assert throttle.retry_after("10.0.0.1") is None
    throttle.record_failure("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") == 60
    assert throttle.retry_after("10.0.0.2") is None
    assert throttle.record_failure("10.0.0.2") == 0
    clock.now += 30
    assert throttle.retry_after("10.0.0.1") == 30
    clock.now += 31
    assert throttle.retry_after("10.0.0.1") is None


def test_throttle_disabled_never_refuses():
    throttle = AuthFailureThrottle(FailureThrottle(enabled=False, refuse_after=1), clock=FakeClock())
    assert throttle.record_failure("a") == 0
    assert throttle.retry_after("a") is None


def test_throttle_forgets_least_recent_addresses_beyond_max_clients():
    throttle = AuthFailureThrottle(FailureThrottle(refuse_after=1, max_clients=2), clock=FakeClock())
    for address in ("a", "b", "c"):
        throttle.record_failure(address)
    assert throttle.retry_after("a") is None
    assert throttle.retry_after("c") is not None


# --- session cookie ------------------------------------------------------------------------


def test_session_cookie_round_trip_and_attributes():
    cookies = SessionCookies("hadoop.auth", "signing-secret", lifetime=600)
    header = cookies.issue("alice", "alice@EXAMPLE.COM")
    name, _, rest = header.partition("=")
    value = rest.split(";")[0]
    assert name == "hadoop.auth"
    for attribute in ("Secure", "HttpOnly", "SameSite=Strict", "Max-Age=600", "Path=/gateway/"):
        assert attribute in header
    assert cookies.check(value) == ("alice", "alice@EXAMPLE.COM")


def test_session_cookie_refuses_tampering_other_keys_and_garbage():
    cookies = SessionCookies("hadoop.auth", "signing-secret", lifetime=600)
    value = cookies.issue("alice", "alice@EXAMPLE.COM").split("=", 1)[1].split(";")[0]
    other = SessionCookies("hadoop.auth", "another-secret", lifetime=600)
    assert other.check(value) is None
    tampered = value[:-6] + ("A" if value[-6] != "A" else "B") + value[-5:]
    assert cookies.check(tampered) is None
    assert cookies.check("not-a-token") is None
    assert cookies.check(None) is None


@pytest.mark.parametrize("header", [
    "Basic " + base64.b64encode(b"admin:admin-password\0").decode(),
    "Basic " + base64.b64encode(b"admin\0:admin-password").decode(),
    "Basic " + base64.b64encode(b"admin:pass\x7fword").decode(),
    "Basic " + base64.b64encode(b"ad\nmin:password").decode(),
    "Basic \udcff\udcfe\udcfd",  # raw bytes 0xff 0xfe 0xfd as aiohttp hands them over
    "Basic \xff\xfe\xfd",
    "Basic " + base64.b64encode(b"\xff\xfe:\xfd").decode(),  # not UTF-8 once decoded
])
def test_basic_credentials_with_control_characters_or_bad_bytes_are_absent(header):
    """RFC 7617 §2: no control characters in user-id or password; anything undecodable is as if
    absent (→ 401), never an exception (→ 500)."""
    from gateway.providers.authentication.basic import basic_credentials

    assert basic_credentials(header) is None


async def test_concurrent_checks_are_counted_when_they_start():
    """300 guesses at once from one address: no more than ``refuse_after`` checks ever run,
    the rest are refused before checking; another address is not affected."""
    import asyncio

    from gateway.providers.authentication.throttle import Throttled

    throttle = AuthFailureThrottle(FailureThrottle(refuse_after=7, delay_after=100), clock=FakeClock())
    ran = 0

    async def wrong_password():
        nonlocal ran
        ran += 1
        await asyncio.sleep(0.01)
        return None

    results = await asyncio.gather(*(throttle.run("10.0.0.1", wrong_password) for _ in range(300)),
                                   return_exceptions=True)
    assert ran == 7
    assert sum(isinstance(r, Throttled) for r in results) == 293
    assert all(r.retry_after >= 1 for r in results if isinstance(r, Throttled))
    assert await throttle.run("10.0.0.2", wrong_password) is None  # checked, not refused
    assert ran == 8


async def test_a_successful_check_gives_its_reservation_back():
    throttle = AuthFailureThrottle(FailureThrottle(refuse_after=2, delay_after=100), clock=FakeClock())

    async def ok():
        return "principal"

    for _ in range(10):
        assert await throttle.run("10.0.0.1", ok) == "principal"
    assert throttle.retry_after("10.0.0.1") is None and not throttle._in_flight


async def test_a_check_that_raises_counts_as_failed_and_is_released():
    throttle = AuthFailureThrottle(FailureThrottle(refuse_after=5, delay_after=100), clock=FakeClock())

    async def broken():
        raise OSError("ldap unreachable")

    with pytest.raises(OSError):
        await throttle.run("a", broken)
    assert not throttle._in_flight and len(throttle._failures["a"]) == 1
