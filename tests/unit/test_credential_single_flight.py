"""CredentialCache.verified: identical concurrent first requests share one password check."""

from __future__ import annotations

import asyncio

import pytest

from gateway.providers.authentication.credential_cache import CredentialCache


class SlowCheck:
    def __init__(self, value=object(), error: Exception | None = None):
        self.value, self.error, self.calls = value, error, 0
        self.release = asyncio.Event()

    async def __call__(self):
        self.calls += 1
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return self.value


async def _burst(cache, check, n=50, password="pw"):
    tasks = [asyncio.create_task(cache.verified("alice", password, check)) for _ in range(n)]
    await asyncio.sleep(0)
    check.release.set()
    return await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_burst_of_identical_credentials_costs_one_check_then_none():
    cache, check = CredentialCache(), SlowCheck()
    assert await _burst(cache, check) == [check.value] * 50
    assert check.calls == 1
    assert await cache.verified("alice", "pw", check) is check.value and check.calls == 1  # cached


async def test_a_failed_check_is_shared_and_not_cached():
    cache, check = CredentialCache(), SlowCheck(value=None)
    assert await _burst(cache, check) == [None] * 50
    assert check.calls == 1
    check.release.set()
    assert await cache.verified("alice", "pw", check) is None and check.calls == 2


async def test_after_an_exception_each_waiting_request_runs_its_own_check():
    # Throttled is about one client address: a request from another one waiting on the same
    # credentials must not inherit it.
    cache, check = CredentialCache(), SlowCheck(error=PermissionError("throttled"))
    results = await _burst(cache, check, n=5)
    assert all(isinstance(r, PermissionError) for r in results) and check.calls == 5


async def test_other_credentials_do_not_wait_for_each_other():
    cache, check = CredentialCache(), SlowCheck()
    first = asyncio.create_task(cache.verified("alice", "one", check))
    second = asyncio.create_task(cache.verified("alice", "two", check))
    await asyncio.sleep(0)
    check.release.set()
    await asyncio.gather(first, second)
    assert check.calls == 2


async def test_a_waiting_request_runs_its_own_check_when_the_running_one_is_cancelled():
    cache, check = CredentialCache(), SlowCheck()
    leader = asyncio.create_task(cache.verified("alice", "pw", check))
    await asyncio.sleep(0)
    follower = asyncio.create_task(cache.verified("alice", "pw", check))
    await asyncio.sleep(0)
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    check.release.set()
    assert await follower is check.value
    assert check.calls == 2
