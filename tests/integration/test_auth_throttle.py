"""The password-check throttle against the real gateway and HMS (issue 9): concurrent guesses
from one address run at most ``refuse_after`` checks, other addresses are unaffected, and a user
whose credentials were verified before still gets in from a throttled address, and a burst of
identical first logins costs one check (not a 429 for all but ``refuse_after`` of them).

Client addresses are distinct loopback addresses (127.0.0.0/8), bound before connecting.
"""

from __future__ import annotations

import asyncio
import base64
import ssl

import pytest

from tests.support.gateway import htpasswd_provider, metric, service

pytestmark = pytest.mark.integration

USER, PASSWORD = "admin", "admin-password"
REFUSE_AFTER = 10
BODY = b'[1,"get_all_databases",1,1,{}]'


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory):
    topology = {
        "providers": {
            "authentication": [htpasswd_provider()],
            "failure_throttle": {"refuse_after": REFUSE_AFTER, "delay_after": 1000, "window_seconds": 600},
        },
        "services": [service([f"thrift://127.0.0.1:{hms.port}"])],
    }
    return module_gateway_factory({"default": topology}, {USER: PASSWORD, "burst": "burst-password"})


def _request(gw, user: str, password: str) -> bytes:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return (f"POST /gateway/default/hmshttpthrift/api/hms HTTP/1.1\r\nHost: localhost\r\n"
            f"Authorization: Basic {token}\r\nContent-Type: application/x-thrift\r\n"
            f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n").encode() + BODY


async def _open(gw, source: str):
    ctx = ssl.create_default_context(cafile=str(gw.ca_file))
    return await asyncio.open_connection("127.0.0.1", gw.port, ssl=ctx, server_hostname="localhost",
                                         local_addr=(source, 0))


async def _status(reader, writer, request: bytes) -> int:
    writer.write(request)
    await writer.drain()
    response = await reader.read()
    writer.close()
    return int(response.split(b" ", 2)[1])


async def _fire(gw, source: str, requests: list[bytes]) -> list[int]:
    """Open one connection per request first, then send them all at once."""
    connections = await asyncio.gather(*(_open(gw, source) for _ in requests))
    return await asyncio.gather(*(_status(r, w, req) for (r, w), req in zip(connections, requests)))


def _checks(gw, outcome: str) -> float:
    return metric(gw, "hms_gateway_password_checks_total", topology="default", outcome=outcome)


def test_concurrent_guesses_run_at_most_the_budget_of_checks(gateway):
    before = _checks(gateway, "failure") + _checks(gateway, "success")
    statuses = asyncio.run(_fire(gateway, "127.0.0.21", [_request(gateway, USER, f"wrong{i}") for i in range(300)]))
    ran = _checks(gateway, "failure") + _checks(gateway, "success") - before
    assert ran <= REFUSE_AFTER
    assert statuses.count(401) == ran and statuses.count(429) == 300 - ran
    # another address is not affected: its wrong password is checked (401), its right one passes
    assert asyncio.run(_fire(gateway, "127.0.0.22", [_request(gateway, USER, "wrong")])) == [401]
    assert asyncio.run(_fire(gateway, "127.0.0.22", [_request(gateway, USER, PASSWORD)])) == [200]


def test_verified_credentials_pass_from_a_throttled_address(gateway):
    source = "127.0.0.23"
    assert asyncio.run(_fire(gateway, source, [_request(gateway, USER, PASSWORD)])) == [200]  # verified, cached
    guesses = asyncio.run(_fire(gateway, source, [_request(gateway, USER, f"guess{i}") for i in range(REFUSE_AFTER + 5)]))
    assert guesses.count(429) >= 5  # the address is throttled
    assert asyncio.run(_fire(gateway, source, [_request(gateway, "nobody", "x")])) == [429]
    assert asyncio.run(_fire(gateway, source, [_request(gateway, USER, PASSWORD)])) == [200]


def test_a_burst_of_identical_first_logins_is_one_check(gateway):
    # A client opening many connections at once with the same (not yet cached) credentials: the
    # requests wait for the one check in flight instead of each spending the address's budget.
    before = _checks(gateway, "success")
    statuses = asyncio.run(_fire(gateway, "127.0.0.24", [_request(gateway, "burst", "burst-password")] * 100))
    assert statuses == [200] * 100
    assert _checks(gateway, "success") - before == 1
