"""The change feed's figures from a running gateway's ``/metrics``, in one scrape."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.support.gateway import RunningGateway

__all__ = ["feed_metrics"]

_NAMES = {
    "hms_gateway_feed_polls_total": "polls",
    "hms_gateway_upstream_requests_total": "upstream",
    "hms_gateway_feed_events_delivered_total": "delivered",
    "hms_gateway_feed_subscribers": "subscribers",
}


def feed_metrics(gw: RunningGateway) -> dict[str, float]:
    """``polls`` (poll cycles, any outcome), ``upstream`` (calls dispatched to HMS), ``delivered``
    (events sent to clients) and ``subscribers`` (clients now), each summed over its labels,
    all from the same scrape so they can be compared."""
    with urllib.request.urlopen(gw.management_url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = dict.fromkeys(_NAMES.values(), 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in _NAMES:
                out[_NAMES[sample.name]] += sample.value
    return out
