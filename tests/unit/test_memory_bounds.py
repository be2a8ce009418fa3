"""Every per-client and per-credential table has a size limit and an expiry (issue 9, item 6).

Expired entries must go even when their key is never seen again: a soak with thousands of
one-off client addresses must not leave them all behind. Clocks are injected.
"""

from __future__ import annotations

from gateway.providers.authentication.credential_cache import CredentialCache
from gateway.providers.authentication.settings import FailureThrottle
from gateway.providers.authentication.throttle import AuthFailureThrottle


class FakeClock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- failure throttle (per client address) -------------------------------------------------


def test_throttle_drops_addresses_that_never_come_back_once_their_window_passed():
    clock = FakeClock()
    throttle = AuthFailureThrottle(FailureThrottle(window_seconds=60), clock=clock)
    for i in range(1000):
        throttle.record_failure(f"10.0.{i // 250}.{i % 250}")
    assert len(throttle._failures) == 1000
    clock.now += 30
    throttle.record_failure("10.9.9.9")
    assert len(throttle._failures) == 1001  # nothing has expired yet
    clock.now += 31
    throttle.record_failure("10.9.9.10")
    # The first thousand left the window and were dropped without being looked up again.
    assert set(throttle._failures) == {"10.9.9.9", "10.9.9.10"}


def test_throttle_sweep_keeps_an_address_that_failed_again_recently():
    clock = FakeClock()
    throttle = AuthFailureThrottle(FailureThrottle(window_seconds=60, refuse_after=3), clock=clock)
    throttle.record_failure("old")
    throttle.record_failure("again")
    clock.now += 50
    throttle.record_failure("again")
    clock.now += 20  # "old" and the first failure of "again" have left the window
    throttle.record_failure("new")
    assert list(throttle._failures) == ["again", "new"]
    throttle.record_failure("again")
    assert throttle.retry_after("again") is None  # 2 failures in the window, refused at 3
    throttle.record_failure("again")
    assert throttle.retry_after("again") is not None


def test_throttle_never_holds_more_than_max_clients():
    throttle = AuthFailureThrottle(FailureThrottle(max_clients=100), clock=FakeClock())
    for i in range(1000):
        throttle.record_failure(f"a{i}")
    assert len(throttle._failures) == 100
    assert "a999" in throttle._failures and "a899" not in throttle._failures


# --- credential cache (per credentials) ----------------------------------------------------


def test_credential_cache_drops_expired_entries_that_are_never_looked_up():
    clock = FakeClock()
    cache = CredentialCache(ttl_seconds=10, max_entries=1000, clock=clock)
    for i in range(500):
        cache.put(f"user{i}", "pw", i)
    assert len(cache) == 500
    clock.now += 5
    cache.put("late", "pw", "late")
    clock.now += 6  # the first 500 expired; "late" has 4 s left
    cache.put("last", "pw", "last")
    assert len(cache) == 2
    assert cache.get("late", "pw") == "late" and cache.get("user0", "pw") is None


def test_credential_cache_expiry_is_checked_on_lookup_too():
    clock = FakeClock()
    cache = CredentialCache(ttl_seconds=10, clock=clock)
    cache.put("u", "pw", "v")
    clock.now += 10
    assert cache.get("u", "pw") == "v"  # expires at the end of its 10 s
    clock.now += 0.5
    assert cache.get("u", "pw") is None
    assert len(cache) == 0


def test_credential_cache_never_holds_more_than_max_entries_and_evicts_the_oldest():
    clock = FakeClock()
    cache = CredentialCache(ttl_seconds=300, max_entries=3, clock=clock)
    for name in ("a", "b", "c"):
        cache.put(name, "pw", name)
        clock.now += 1
    cache.put("a", "pw", "a2")  # refreshed: now the last to expire
    cache.put("d", "pw", "d")
    assert len(cache) == 3
    assert cache.get("b", "pw") is None
    assert [cache.get(n, "pw") for n in ("c", "a", "d")] == ["c", "a2", "d"]


def test_credential_cache_with_no_lifetime_stores_nothing():
    cache = CredentialCache(ttl_seconds=0, clock=FakeClock())
    cache.put("u", "pw", "v")
    assert len(cache) == 0 and cache.get("u", "pw") is None
