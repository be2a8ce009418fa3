"""``hms_gateway_upstream_requests_total`` tells clients' calls from the gateway's own (issue 25):
a gateway serving the Thrift API and a change feed of the same HMS, whose poller calls HMS every
0.2 s, counts exactly the clients' calls under ``origin="client"``."""

from __future__ import annotations

import pytest

from tests.support.feed import events_service
from tests.support.gateway import metric, post, service, wait_for

pytestmark = pytest.mark.integration

CALLS = "hms_gateway_upstream_requests_total"


def test_clients_calls_are_counted_apart_from_the_gateway_s_own(hms, gateway_factory):
    gw = gateway_factory(services=[service([hms.uri]), events_service(hms)])
    polled = metric(gw, CALLS, origin="gateway", outcome="ok")
    wait_for(lambda: metric(gw, CALLS, origin="gateway", outcome="ok") >= polled + 2)  # the poller
    before = metric(gw, CALLS, origin="client")
    for seqid in range(3):
        status, _, body = post(gw, f'[1,"get_all_databases",1,{seqid},{{}}]')
        assert status == 200 and b'"default"' in body
    own = metric(gw, CALLS, origin="gateway", outcome="ok")
    assert metric(gw, CALLS, origin="client") == before + 3
    assert metric(gw, CALLS, origin="client", outcome="ok") == before + 3
    wait_for(lambda: metric(gw, CALLS, origin="gateway", outcome="ok") > own)  # still polling
    assert metric(gw, CALLS, origin="client") == before + 3
    assert metric(gw, "hms_gateway_upstream_duration_seconds_count", origin="client") == before + 3
