"""Operations against real processes: hot reload, graceful shutdown, admission control,
slow-loris guard, and failover across two real Hive Metastores (one killed, then restarted)."""

from __future__ import annotations

import json
import signal
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.gateway import free_port, post, service, start_gateway, write_topology
from tests.support.relay import TcpRelay

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-password"}
GET_DBS = '[1,"get_all_databases",1,1,{}]'
GET_DB = '[1,"get_database",1,1,{"1":{"str":"default"}}]'


def wait_for(predicate, timeout: float = 15.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def readyz(gw) -> int:
    try:
        with urllib.request.urlopen(gw.management_url + "/readyz", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def status(gw, body=GET_DBS, topology="default") -> int:
    return post(gw, body, topology=topology)[0]


# --- hot reload ------------------------------------------------------------------------------


def test_topologies_added_changed_broken_and_removed_without_restart(hms, tmp_path):
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    gw = start_gateway(tmp_path, {"default": {"services": [service([hms_url])]}}, USERS,
                       gateway_extra={"reload": {"interval_seconds": 0.2}})
    try:
        assert status(gw, topology="extra") == 404
        write_topology(tmp_path, "extra", {"services": [service([hms_url])]})
        wait_for(lambda: status(gw, topology="extra") == 200)

        # Changed: get_database is no longer exposed.
        write_topology(tmp_path, "extra", {"services": [service([hms_url], methods=["get_all_databases"])]})
        wait_for(lambda: json.loads(post(gw, GET_DB, topology="extra")[2])[2] == 3)

        # Broken: logged with file and key; the previous version keeps serving.
        (tmp_path / "topologies" / "extra.yaml").write_text("services: [{path: x, upstream: {urls: [nope]}}]\n")
        wait_for(lambda: "extra.yaml: providers" in gw.log() or "extra.yaml: services" in gw.log())
        assert status(gw, topology="extra") == 200
        assert json.loads(post(gw, GET_DB, topology="extra")[2])[2] == 3

        # Removed.
        (tmp_path / "topologies" / "extra.yaml").unlink()
        wait_for(lambda: status(gw, topology="extra") == 404)
        assert status(gw) == 200
    finally:
        gw.stop()


def test_sighup_forces_a_reload(hms, tmp_path):
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    gw = start_gateway(tmp_path, {"default": {"services": [service([hms_url])]}}, USERS,
                       gateway_extra={"reload": {"interval_seconds": 3600}})
    try:
        write_topology(tmp_path, "late", {"services": [service([hms_url])]})
        time.sleep(0.5)
        assert status(gw, topology="late") == 404  # the poll is an hour away
        gw.process.send_signal(signal.SIGHUP)
        wait_for(lambda: status(gw, topology="late") == 200)
    finally:
        gw.stop()


def test_reload_under_load_fails_no_request(hms, tmp_path):
    hms_url = f"thrift://127.0.0.1:{hms.port}"
    gw = start_gateway(tmp_path, {"default": {"services": [service([hms_url])]}}, USERS,
                       gateway_extra={"reload": {"interval_seconds": 0.1}})
    stop = threading.Event()
    statuses: list[int] = []

    def client():
        while not stop.is_set():
            statuses.append(status(gw))

    try:
        with ThreadPoolExecutor(4) as pool:
            for _ in range(4):
                pool.submit(client)
            for i in range(15):  # each rewrite changes the config: the topology is rebuilt
                write_topology(tmp_path, "default",
                               {"services": [service([hms_url], timeout_seconds=30 + i)]})
                # requests between rewrites, however slow the machine: counted, not timed
                seen = len(statuses)
                wait_for(lambda: len(statuses) >= seen + 3, timeout=60)
                time.sleep(0.2)
            stop.set()
        assert len(statuses) >= 45
        assert set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}
        assert "reloaded" in gw.log()
    finally:
        stop.set()
        gw.stop()


# --- graceful shutdown and admission control --------------------------------------------------


@pytest.fixture
def slow_relay(hms):
    relay = TcpRelay(("127.0.0.1", hms.port), free_port(), delay=1.5).start()
    yield relay
    relay.stop()


def test_sigterm_drains_in_flight_requests(slow_relay, tmp_path):
    gw = start_gateway(
        tmp_path, {"default": {"services": [service([f"thrift://127.0.0.1:{slow_relay.port}"])]}}, USERS,
        gateway_extra={"shutdown": {"drain_delay_seconds": 1.0, "grace_seconds": 20}},
    )
    try:
        with ThreadPoolExecutor(4) as pool:
            in_flight = [pool.submit(status, gw) for _ in range(4)]
            time.sleep(0.5)  # the requests are now waiting on the slow upstream
            gw.process.send_signal(signal.SIGTERM)
            wait_for(lambda: readyz(gw) == 503, timeout=5, interval=0.05)
            assert [f.result(timeout=30) for f in in_flight] == [200] * 4
        assert gw.process.wait(30) == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", gw.port), timeout=1).close()
    finally:
        gw.stop()


def test_max_concurrent_requests_gets_503_with_retry_after(slow_relay, tmp_path):
    svc = service([f"thrift://127.0.0.1:{slow_relay.port}"])
    svc["max_concurrent_requests"] = 1
    gw = start_gateway(tmp_path, {"default": {"services": [svc]}}, USERS)
    try:
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda _: post(gw, GET_DBS), range(3)))
        codes = sorted(r[0] for r in results)
        assert codes[0] == 200 and 503 in codes
        refused = next(r for r in results if r[0] == 503)
        assert refused[1]["Retry-After"] == "1"
    finally:
        gw.stop()


def test_connection_without_request_headers_is_closed(hms, tmp_path):
    gw = start_gateway(tmp_path, {"default": {"services": [service([f"thrift://127.0.0.1:{hms.port}"])]}},
                       USERS, gateway_extra={"limits": {"client_header_timeout_seconds": 1.0}})
    try:
        ctx = ssl.create_default_context(cafile=str(gw.ca_file))
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(b"POST /gateway/default/hmshttpthrift/api/hms HTTP/1.1\r\nHost: x\r\n")
                started = time.monotonic()
                assert tls.recv(1024) == b""  # closed by the gateway, no response
                assert time.monotonic() - started < 8
        assert status(gw) == 200  # a well-behaved client is unaffected
    finally:
        gw.stop()


# --- failover across two real HMS ------------------------------------------------------------


def test_failover_and_recovery_with_two_real_metastores(hms_factory, tmp_path):
    with ThreadPoolExecutor(2) as pool:  # two JVMs start side by side
        first, second = pool.map(lambda _: hms_factory(), range(2))
    urls = [f"thrift://127.0.0.1:{first.port}", f"thrift://127.0.0.1:{second.port}"]
    svc = service(urls, probe_interval_seconds=0.5, failover_sleep_seconds=0, timeout_seconds=10)
    gw = start_gateway(tmp_path, {"default": {"services": [svc]}}, USERS)
    stop = threading.Event()
    statuses: list[int] = []

    def client():
        while not stop.is_set():
            statuses.append(status(gw))

    def up(port: int) -> float:
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(gw.management_url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "hms_gateway_upstream_up" and sample.labels["upstream"] == f"127.0.0.1:{port}":
                    return sample.value
        return -1

    try:
        with ThreadPoolExecutor(3) as pool:
            for _ in range(3):
                pool.submit(client)
            wait_for(lambda: len(statuses) > 10)
            first.server.stop()  # killed mid-run
            wait_for(lambda: up(first.port) == 0)
            n = len(statuses)
            wait_for(lambda: len(statuses) > n + 20)
            first.server.start()  # back on the same port
            wait_for(lambda: up(first.port) == 1, timeout=60)
            second.server.stop()  # now the other one goes
            n = len(statuses)
            wait_for(lambda: len(statuses) > n + 20)
            stop.set()
        assert set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}
    finally:
        stop.set()
        gw.stop()


# --- logs ------------------------------------------------------------------------------------


def test_json_logs_carry_the_clients_request_id(hms, tmp_path):
    gw = start_gateway(tmp_path, {"default": {"services": [service([f"thrift://127.0.0.1:{hms.port}"])]}},
                       USERS, gateway_extra={"logging": {"format": "json", "level": "INFO"}})
    try:
        code, headers, _ = post(gw, b"not thrift", headers={"X-Request-Id": "trace-4711"})
        assert code == 400 and headers["X-Request-Id"] == "trace-4711"
        code, headers, _ = post(gw, GET_DBS, auth=("admin", "wrong-secret"))
        assert code == 401 and len(headers["X-Request-Id"]) == 36  # a fresh UUID
        lines = [json.loads(line) for line in gw.log().splitlines() if line.startswith("{")]
        logged = [line for line in lines if "logger" in line]  # the rest are audit lines
        mine = [line for line in logged if line.get("request_id") == "trace-4711"]
        assert mine and all({"time", "level", "message"} <= line.keys() for line in mine)
        assert any(line["message"].startswith("400 ") for line in mine)
        assert "wrong-secret" not in gw.log()
    finally:
        gw.stop()
