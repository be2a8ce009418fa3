"""Many replicas, one gateway (issue 26): two gateway processes, each with its own configuration,
behind Debian's HAProxy (tests/support/replicas.py), in front of one real HMS (with locks that
time out) and one ActiveMQ.

Checked: each reply reaches its own caller while clients spread over both replicas; an SSE
client resumes with ``Last-Event-ID`` on the other replica; a token minted by one replica
(``gateway-token``, Iceberg REST ``v1/oauth/tokens``) is accepted by the other; an address gets ``refuse_after``
password checks per window across the deployment when the balancer pins addresses (and
``refuse_after`` x replicas when it does not); one broker publisher across the replicas, and
after SIGKILL of the leader during a burst of DDL nothing is lost, duplicates stay within the
last unacknowledged batch, and the takeover time is measured (printed and recorded as the
test's ``takeover_seconds`` property); a write through one replica is read through the other's
metadata cache within one poll interval, and a database altered through one at once (never cached:
HMS 2.3 logs no event for it); an Iceberg scan plan submitted to one replica is polled, fetched and
cancelled through the other.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import threading
import time

import aiohttp
import pytest

from gateway.certs import write_dev_certificates
from tests.support.activemq import Subscriber, start_activemq
from tests.support.feed import EVENTS_PATH, SSE, Catalog, SSEReader, events_service, publisher_leading
from tests.support.gateway import SPEC_PATH, htpasswd_provider, metric, service
from tests.support.hms import start_hms
from tests.support.replicas import LOCKING_SITE, start_haproxy

pytestmark = pytest.mark.integration

PASSWORD = "replica-pw-1"
REFUSE_AFTER = 3
BATCH = 5
#: A metadata-cached Thrift service: each replica's cache follows the notification log every POLL s.
CACHED_PATH, POLL = "cached/api/hms", 1.0
TOKEN_KEY = "replica-rig-token-signing-key-0123456789"


@pytest.fixture(scope="module")
def rig(tmp_path_factory, module_gateway_factory):
    """(hms, activemq, [gateway, gateway], haproxy, ca file)."""
    base = tmp_path_factory.mktemp("replicas")
    with contextlib.ExitStack() as started:  # a failure half-way stops what already started
        hms = start_hms(base / "hms", site=LOCKING_SITE)
        started.callback(hms.server.stop)
        broker = start_activemq(base / "activemq")
        started.callback(broker.stop)
        started.callback(module_gateway_factory.close)
        certs = write_dev_certificates(base / "certs")
        (base / "token-key").write_text(TOKEN_KEY)  # one Secret, mounted by every replica
        thrift = service([hms.uri], methods=["get_all_databases", "get_database", "alter_database", "get_table",
                                             "alter_table"])
        cached = {**thrift, "path": CACHED_PATH,
                  "options": {**thrift["options"], "cache": {"enabled": True, "poll_interval_seconds": POLL}}}
        events = events_service(hms, broker={
            "url": broker.stomp_url, "batch_size": BATCH, "lock_heartbeat_seconds": 0.5,
            "lock_lease_seconds": 2.5, "lock_check_seconds": 0.25})  # lease < the HMS's 5 s timeout
        topologies = {
            "default": {"services": [thrift, events, cached]},
            "iceberg": {"providers": {"authentication": [
                htpasswd_provider(), {"type": "gateway-token", "signing_key": f"file:{base / 'token-key'}"}]},
                "services": [{"path": "rest", "kind": "iceberg-rest", "upstream": {"urls": [hms.uri]},
                              # "submitted" past a millisecond: a plan's id is polled
                              "options": {"planning": {"wait_seconds": 0.001, "manifest_cache_mib": 0}}}]},
            "throttled": {"providers": {"authentication": [htpasswd_provider()], "failure_throttle": {
                "refuse_after": REFUSE_AFTER, "delay_after": 100, "window_seconds": 600}}, "services": [thrift]},
        }
        gateways = [module_gateway_factory(topologies, {"admin": PASSWORD}, name=f"replica{i}",
                                           listener={"trusted_proxies": ["127.0.0.0/8"], "proxy_protocol": True},
                                           tls={"certificate": str(certs.certificate), "private_key": str(certs.private_key)})
                    for i in range(2)]
        proxy = start_haproxy(base / "haproxy", [gw.port for gw in gateways])
        started.callback(proxy.stop)
        yield hms, broker, gateways, proxy, certs.ca_certificate


def _auth(password: str = PASSWORD) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"admin:{password}".encode()).decode()}


def _session(ca_file, source: str) -> aiohttp.ClientSession:
    """A client on its own source address: a machine of its own to HAProxy and the gateways."""
    import ssl

    connector = aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=str(ca_file)), local_addr=(source, 0),
                                     family=socket.AF_INET, force_close=True)
    return aiohttp.ClientSession(connector=connector)


def test_each_reply_reaches_its_own_caller_across_replicas(rig):
    hms, _, gateways, proxy, ca = rig
    catalog = Catalog(hms)
    names = [f"replica_db_{i}" for i in range(6)]
    for name in names:
        catalog.create_database(name)
    catalog.close()
    before = [metric(gw, "hms_gateway_upstream_requests_total", origin="client") for gw in gateways]

    async def client(n: int) -> list[tuple[int, str, str]]:
        seen = []
        async with _session(ca, f"127.0.0.{10 + n}") as session:
            for call in range(4):
                seqid, name = n * 100 + call, names[(n + call) % len(names)]
                body = json.dumps([1, "get_database", 1, seqid, {"1": {"str": name}}])
                async with session.post(f"https://localhost:{proxy.port}/gateway/default/{SPEC_PATH}", data=body,
                                        headers={**_auth(), "Content-Type": "application/x-thrift"}) as reply:
                    assert reply.status == 200, await reply.text()
                    seen.append((seqid, name, await reply.text()))
        return seen

    async def everyone():
        return await asyncio.gather(*(client(n) for n in range(24)))

    for replies in asyncio.run(everyone()):
        for seqid, name, text in replies:
            message = json.loads(text)
            assert message[3] == seqid and message[4]["0"]["rec"]["1"]["str"] == name, text
    after = [metric(gw, "hms_gateway_upstream_requests_total", origin="client") for gw in gateways]
    assert all(a > b for a, b in zip(after, before)), (before, after)  # both replicas answered


def test_sse_client_resumes_on_the_other_replica(rig):
    hms, _, gateways, proxy, ca = rig

    async def run():
        async with _session(ca, "127.0.0.50") as session:
            url = f"https://localhost:{proxy.replica_ports[0]}/gateway/default/{EVENTS_PATH}"
            async with session.get(url, headers={**_auth(), **SSE}) as stream:
                assert stream.status == 200
                catalog = Catalog(hms)
                for name in ("replica_sse_a", "replica_sse_b", "replica_sse_c"):
                    catalog.create_database(name)
                catalog.close()
                first = await SSEReader(stream).next()
            assert json.loads(first["data"])["db"] == "replica_sse_a"
            url = f"https://localhost:{proxy.replica_ports[1]}/gateway/default/{EVENTS_PATH}"
            async with session.get(url, headers={**_auth(), **SSE, "Last-Event-ID": first["id"]}) as stream:
                assert stream.status == 200, await stream.text()
                reader = SSEReader(stream)
                return first, [await reader.next(), await reader.next()]

    first, rest = asyncio.run(run())
    assert [int(e["id"]) for e in rest] == [int(first["id"]) + 1, int(first["id"]) + 2]
    assert [json.loads(e["data"])["db"] for e in rest] == ["replica_sse_b", "replica_sse_c"]


def test_a_token_minted_on_one_replica_works_on_the_other(rig):
    *_, proxy, ca = rig

    async def run():
        async with _session(ca, "127.0.0.55") as session:
            mint = f"https://localhost:{proxy.replica_ports[0]}/gateway/iceberg/rest/v1/oauth/tokens"
            form = {"grant_type": "client_credentials", "client_id": "admin", "client_secret": PASSWORD}
            async with session.post(mint, data=form) as reply:
                assert reply.status == 200, await reply.text()
                token = (await reply.json())["access_token"]
            use = f"https://localhost:{proxy.replica_ports[1]}/gateway/iceberg/rest/v1/namespaces"
            async with session.get(use, headers={"Authorization": f"Bearer {token}"}) as reply:
                ok = reply.status, await reply.json()
            forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
            async with session.get(use, headers={"Authorization": f"Bearer {forged}"}) as reply:
                return ok, reply.status

    (status, body), forged_status = asyncio.run(run())
    assert status == 200 and "namespaces" in body, body
    assert forged_status == 401


@pytest.mark.usefixtures("pyiceberg_env")
def test_a_plan_submitted_to_one_replica_is_polled_and_cancelled_through_the_other(rig):
    """Issue 50: the other replica answers a plan id it never saw (planning it again under that
    id); a cancel is recorded by the replica that takes it."""
    import pyarrow as pa
    import requests
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    *_, proxy, ca = rig
    base = [f"https://localhost:{port}/gateway/iceberg/rest" for port in proxy.replica_ports]
    catalog = RestCatalog("replica0", uri=base[0], **{"ssl": {"cabundle": str(ca)}, "auth": {
        "type": "basic", "basic": {"username": "admin", "password": PASSWORD}}})
    catalog.create_namespace("replica_plans")
    table = catalog.create_table("replica_plans.t", schema=Schema(NestedField(1, "id", LongType(), required=False)))
    for start in (0, 10):
        table.append(pa.table({"id": pa.array(range(start, start + 10), pa.int64())}))
    path = "/v1/namespaces/replica_plans/tables/t/plan"

    def on(replica: int, method: str, url: str, body: dict | None = None) -> requests.Response:
        return requests.request(method, base[replica] + url, json=body, auth=("admin", PASSWORD), verify=str(ca),
                                timeout=60)

    submitted = on(0, "POST", path, {}).json()
    assert submitted["status"] == "submitted", submitted
    plan = f"{path}/{submitted['plan-id']}"
    for _ in range(200):
        polled = on(1, "GET", plan)
        assert polled.status_code == 200 and polled.json()["plan-id"] == submitted["plan-id"], polled.text
        if polled.json()["status"] == "completed":
            break
        time.sleep(0.02)
    assert polled.json()["status"] == "completed" and len(polled.json()["file-scan-tasks"]) == 2
    assert on(1, "DELETE", plan).status_code == 204
    refused = on(1, "GET", plan)
    assert refused.status_code == 404 and refused.json()["error"]["type"] == "NoSuchPlanIdException", refused.text
    assert on(0, "GET", plan).status_code == 200  # replica 0 never saw the cancel (docs/iceberg.md)


def _statuses(ca, port: int, source: str, attempts: int) -> list[int]:
    async def run():
        statuses = []
        async with _session(ca, source) as session:
            for _ in range(attempts):
                body = json.dumps([1, "get_all_databases", 1, 0, {}])
                async with session.post(f"https://localhost:{port}/gateway/throttled/{SPEC_PATH}", data=body,
                                        headers={**_auth("wrong-password"), "Content-Type": "application/x-thrift"}) as r:
                    statuses.append(r.status)
        return statuses

    return asyncio.run(run())


def test_an_address_gets_refuse_after_guesses_across_the_deployment(rig):
    *_, proxy, ca = rig
    pinned = _statuses(ca, proxy.port, "127.0.0.60", 3 * REFUSE_AFTER)  # balance source: one replica
    assert pinned == [401] * REFUSE_AFTER + [429] * (2 * REFUSE_AFTER)
    # Without affinity each replica keeps its own budget: refuse_after x replicas guesses.
    spread = [_statuses(ca, port, "127.0.0.61", REFUSE_AFTER + 1) for port in proxy.replica_ports]
    assert spread == [[401] * REFUSE_AFTER + [429]] * 2


def _leaders(gateways) -> list[int]:
    return [i for i, gw in enumerate(gateways) if publisher_leading(gw)]


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return found


async def _call(session, proxy, replica: int, body: list) -> tuple[list, str]:
    """One TJSONProtocol call to the cached service of ``replica``: (the reply, Cache-Status)."""
    url = f"https://localhost:{proxy.replica_ports[replica]}/gateway/default/{CACHED_PATH}"
    async with session.post(url, data=json.dumps(body),
                            headers={**_auth(), "Content-Type": "application/x-thrift"}) as reply:
        assert reply.status == 200, await reply.text()
        return json.loads(await reply.text()), reply.headers.get("Cache-Status", "")


def _map(struct: dict, field: str) -> dict:
    return struct.get(field, {}).get("map", [None, None, 0, {}])[3]


def _void(answer: list) -> bool:
    return "0" not in answer[4] or answer[4] == {}


def test_a_write_through_one_replica_is_read_through_the_other_within_one_poll_interval(rig):
    """The metadata cache's bound across pods (docs/operations.md, Replicas): a write through
    one pod is read at once through that pod, and through another pod by any read that starts
    one poll interval after the write returned. Not a timing goal: a cached reply is served only
    while the pod's last completed poll of the log started less than one interval before, so no
    reply from before the write can be served then, however slow the machine."""
    hms, _, gateways, proxy, ca = rig
    catalog = Catalog(hms)
    catalog.create_database("replica_ryw")
    catalog.create_table("replica_ryw", "t")
    catalog.close()

    def get_table(seqid: int) -> list:
        return [1, "get_table", 1, seqid, {"1": {"str": "replica_ryw"}, "2": {"str": "t"}}]

    async def run():
        async with _session(ca, "127.0.0.60") as session:
            # The create's own event can reach replica 1's follower between two reads and drop
            # the entry again (fwd=stale, the cache erring on HMS's side): read until a hit.
            for seqid in range(100, 200):
                before, status = await _call(session, proxy, 1, get_table(seqid))
                if "hit" in status:
                    break
                await asyncio.sleep(0.05)
            assert "hit" in status, status  # replica 1 serves the table from its cache
            table = before[4]["0"]["rec"]
            assert "v" not in _map(table, "9")
            altered = {**table, "9": {"map": ["str", "str", 1, {"v": "2"}]}}
            answer, _ = await _call(session, proxy, 0, [1, "alter_table", 1, 3, {
                "1": {"str": "replica_ryw"}, "2": {"str": "t"}, "3": {"rec": altered}}])
            assert _void(answer), answer
            written = time.monotonic()
            mine, _ = await _call(session, proxy, 0, get_table(4))
            assert _map(mine[4]["0"]["rec"], "9").get("v") == "2"  # the writer's own pod reads its write at once
            await asyncio.sleep(max(0.0, written + POLL - time.monotonic()))
            return await _call(session, proxy, 1, get_table(5))

    other, status = asyncio.run(run())
    assert _map(other[4]["0"]["rec"], "9").get("v") == "2", (other, status)


def test_a_database_altered_through_one_replica_is_read_at_once_through_the_other(rig):
    """HMS 2.3 logs no event for ``alter_database`` (checked here on the real HMS), so no pod
    could learn of another's: ``get_database`` is never cached (gateway/cache/methods.py,
    UNLOGGED_WRITES), and the other pod reads the change at once."""
    hms, _, gateways, proxy, ca = rig
    catalog = Catalog(hms)
    catalog.create_database("replica_db")

    def get_database(seqid: int) -> list:
        return [1, "get_database", 1, seqid, {"1": {"str": "replica_db"}}]

    async def run():
        async with _session(ca, "127.0.0.61") as session:
            first, status = await _call(session, proxy, 1, get_database(1))
            again, status_again = await _call(session, proxy, 1, get_database(2))
            assert (status, status_again) == ("hms-gateway; fwd=method",) * 2
            database = again[4]["0"]["rec"]
            assert _map(database, "4") == {}
            logged = catalog.client.get_current_notificationEventId().eventId
            altered = {**database, "4": {"map": ["str", "str", 1, {"v": "2"}]}}
            answer, _ = await _call(session, proxy, 0, [1, "alter_database", 1, 3,
                                                        {"1": {"str": "replica_db"}, "2": {"rec": altered}}])
            assert _void(answer), answer
            assert catalog.client.get_current_notificationEventId().eventId == logged  # nothing logged
            return await _call(session, proxy, 1, get_database(4))

    try:
        other, status = asyncio.run(run())
    finally:
        catalog.close()
    assert _map(other[4]["0"]["rec"], "4") == {"v": "2"}, (other, status)


def test_one_publisher_and_a_takeover_that_loses_nothing(rig, record_property):
    hms, broker, gateways, _, _ = rig
    subscriber = Subscriber(broker.stomp_port, "replicas")
    catalog = Catalog(hms)
    try:
        leader = _wait(lambda: _leaders(gateways), 60, "no replica took the publisher lock")
        assert len(leader) == 1, [gw.log() for gw in gateways]
        leader = leader[0]
        standby = 1 - leader
        # Steady state: published once, by the leader only (a marker event ends the wait).
        base = catalog.client.get_current_notificationEventId().eventId
        for i in range(6):
            catalog.create_database(f"replica_once_{i}")
        first = base + 1
        _wait(lambda: base + 6 in subscriber.ids(), 60, f"steady-state events missing: {subscriber.ids()}")
        steady = [i for i in subscriber.ids() if i >= first]
        assert steady == list(range(first, base + 7)), steady
        assert _leaders(gateways) == [leader]

        # A burst of DDL; SIGKILL the leader in its middle.
        burst_start = base + 7
        done = threading.Event()

        def burst():
            ddl = Catalog(hms)
            try:
                for i in range(25):
                    ddl.create_database(f"replica_burst_{i}")
            finally:
                ddl.close()
                done.set()

        thread = threading.Thread(target=burst)
        thread.start()
        _wait(lambda: sum(i >= burst_start for i in subscriber.ids()) >= 7, 60, "the burst was not being published")
        gateways[leader].process.kill()
        killed = time.monotonic()
        _wait(lambda: _leaders(gateways) == [standby], 60,
              f"the standby never took over:\n{gateways[standby].log()[-3000:]}")
        takeover = time.monotonic() - killed
        thread.join(60)
        assert done.is_set()
        last = base + 6 + 25
        _wait(lambda: last in subscriber.ids(), 60, f"events after the takeover missing: {subscriber.ids()}")
    finally:
        subscriber.disconnect()
        catalog.close()
    ids = [i for i in subscriber.ids() if i >= burst_start]
    assert set(ids) == set(range(burst_start, last + 1)), ids  # nothing lost
    repeated = sorted(i for i in set(ids) if ids.count(i) > 1)
    assert all(ids.count(i) == 2 for i in repeated)
    assert len(repeated) <= BATCH and (not repeated or repeated[-1] - repeated[0] < BATCH), repeated
    record_property("takeover_seconds", round(takeover, 2))
    record_property("duplicates", len(repeated))
    print(f"takeover after SIGKILL: {takeover:.2f} s; duplicated events: {repeated}")


def test_a_clean_stop_hands_the_publisher_over_without_loss(rig, module_gateway_factory, record_property):
    """SIGTERM unlocks: the standby takes over after its next check, not after HMS's timeout."""
    hms, broker, gateways, _, _ = rig
    for i, gw in enumerate(gateways):  # the previous test killed the leader
        if gw.process.poll() is not None:
            gateways[i] = module_gateway_factory.restart(gw)
    subscriber = Subscriber(broker.stomp_port, "handover")
    catalog = Catalog(hms)
    try:
        leader = _wait(lambda: _leaders(gateways), 60, "no replica holds the publisher lock")[0]
        standby = 1 - leader
        base = catalog.client.get_current_notificationEventId().eventId
        catalog.create_database("replica_handover_a")
        _wait(lambda: base + 1 in subscriber.ids(), 60, "the leader did not publish")
        gateways[leader].stop()  # SIGTERM: the publisher unlocks on its way out
        stopped = time.monotonic()
        _wait(lambda: _leaders(gateways) == [standby], 60,
              f"the standby never took over:\n{gateways[standby].log()[-3000:]}")
        handover = time.monotonic() - stopped
        catalog.create_database("replica_handover_b")
        _wait(lambda: base + 2 in subscriber.ids(), 60, f"nothing published after the handover: {subscriber.ids()}")
    finally:
        subscriber.disconnect()
        catalog.close()
    assert subscriber.ids() == [base + 1, base + 2]  # nothing lost, nothing repeated
    record_property("handover_seconds", round(handover, 2))
    print(f"handover after SIGTERM: {handover:.2f} s")

