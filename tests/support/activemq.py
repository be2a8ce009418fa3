"""Start a real ActiveMQ broker (Debian's ``activemq`` package) for tests.

Each broker gets its own base directory (configuration, KahaDB store) under the test's tmp dir
and free loopback ports for STOMP and OpenWire, so it never meets ``/etc/activemq`` or a broker
the machine runs. Persistence is on, so a broker restart keeps durable subscriptions.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import stomp

from tests.support.ports import start_with_retry

__all__ = ["ACTIVEMQ_HOME", "ActiveMQ", "JmsMessage", "Subscriber", "start_activemq", "jms_messages", "start_jms_consumer"]

ACTIVEMQ_HOME = Path(os.environ.get("ACTIVEMQ_HOME", "/usr/share/activemq"))
_JMS_CONSUMER = Path(__file__).with_name("HcatJmsConsumer.java")

_CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
    http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="test" useJmx="false"
          dataDirectory="{data}" schedulerSupport="false" advisorySupport="false">
    <persistenceAdapter><kahaDB directory="{data}/kahadb"/></persistenceAdapter>
    <systemUsage><systemUsage>
      <storeUsage><storeUsage limit="256 mb"/></storeUsage>
      <tempUsage><tempUsage limit="64 mb"/></tempUsage>
    </systemUsage></systemUsage>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp}"/>
      <transportConnector name="openwire" uri="tcp://127.0.0.1:{openwire}"/>
    </transportConnectors>
  </broker>
</beans>
"""


@dataclass
class ActiveMQ:
    """A broker in ``base``: STOMP at ``127.0.0.1:stomp_port``, OpenWire at ``openwire_port``."""

    base: Path
    stomp_port: int
    openwire_port: int
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def stomp_url(self) -> str:
        return f"stomp://127.0.0.1:{self.stomp_port}"

    @property
    def openwire_url(self) -> str:
        return f"tcp://127.0.0.1:{self.openwire_port}"

    def start(self, timeout: float = 120.0) -> None:
        """Start the JVM and wait until the STOMP port accepts. Raises RuntimeError with the log."""
        java = shutil.which("java")
        if java is None or not (ACTIVEMQ_HOME / "bin" / "activemq.jar").exists():
            raise RuntimeError("ActiveMQ needs `java` and Debian's activemq package (make install-system-deps)")
        conf, data = self.base / "conf", self.base / "data"
        conf.mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        config = conf / "activemq.xml"
        config.write_text(_CONFIG.format(data=data, stomp=self.stomp_port, openwire=self.openwire_port))
        log = open(self.base / "activemq.log", "ab")
        self.process = subprocess.Popen(
            [
                java, "-Xms32m", "-Xmx192m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                f"-Dactivemq.home={ACTIVEMQ_HOME}", f"-Dactivemq.base={self.base}",
                f"-Dactivemq.conf={conf}", f"-Dactivemq.data={data}",
                "-jar", str(ACTIVEMQ_HOME / "bin" / "activemq.jar"), "start", f"xbean:file:{config}",
            ],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.base,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.stomp_port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        tail = (self.base / "activemq.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"ActiveMQ did not listen on {self.stomp_port}:\n{tail}")

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after 30 s); the store stays in ``base``."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


def start_activemq(base: Path) -> ActiveMQ:
    """A started broker in ``base`` on reserved ports (:mod:`tests.support.ports`: STOMP on one,
    OpenWire on the next), retried on others if one was taken."""
    def start(port: int) -> ActiveMQ:
        broker = ActiveMQ(Path(base), port, port + 1)
        broker.start()  # stops the broker before it raises
        return broker

    return start_with_retry(start, span=2)


@dataclass(frozen=True)
class JmsMessage:
    """One message as the JMS consumer saw it: the JMS class, destination, HCAT_* properties, text."""

    jms_class: str
    destination: str
    hcat_event: str
    hcat_message_version: str
    hcat_message_format: str
    text: str


def start_jms_consumer(broker: ActiveMQ, topic: str, messages: int, timeout: float = 120) -> subprocess.Popen:
    """A JMS subscriber to ``topic`` (HcatJmsConsumer.java, Debian's ActiveMQ client jars over
    OpenWire), subscribed when this returns; it exits after ``messages`` messages (2 on timeout).
    Read its messages with :func:`jms_messages`."""
    process = subprocess.Popen(
        [shutil.which("java") or "java", "-XX:TieredStopAtLevel=1", "-cp", f"{ACTIVEMQ_HOME}/lib/*",
         str(_JMS_CONSUMER), broker.openwire_url, topic, str(messages), str(int(timeout))],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    first = process.stdout.readline()
    if first.strip() != "READY":
        process.kill()
        raise RuntimeError(f"JMS consumer did not subscribe: {first!r}")
    return process


def jms_messages(process: subprocess.Popen, timeout: float = 180) -> list[JmsMessage]:
    """The messages a :func:`start_jms_consumer` process printed, once it has exited."""
    out, _ = process.communicate(timeout=timeout)
    return [JmsMessage(*line.split("\t", 5)) for line in out.splitlines() if line]


class Subscriber:
    """A STOMP durable subscriber to every topic (``/topic/>``); messages kept in arrival order."""

    def __init__(self, port: int, name: str):
        self.port, self.name = port, name
        self.messages: list[tuple[str, dict[str, str], dict]] = []
        self._lock = threading.Lock()
        self.connection: stomp.Connection12 | None = None
        self.connect()

    def connect(self) -> None:
        subscribed = threading.Event()
        outer = self

        class Listener(stomp.ConnectionListener):
            def on_message(self, frame):
                with outer._lock:
                    outer.messages.append((frame.headers["destination"], frame.headers, json.loads(frame.body)))

            def on_receipt(self, frame):
                subscribed.set()

        self.connection = stomp.Connection12([("127.0.0.1", self.port)])
        self.connection.set_listener("test", Listener())
        self.connection.connect(wait=True, headers={"client-id": self.name})
        self.connection.subscribe("/topic/>", id="all", ack="auto",
                                  headers={"activemq.subscriptionName": self.name, "receipt": "subscribed"})
        assert subscribed.wait(30), "the broker did not confirm the subscription"

    def disconnect(self) -> None:
        if self.connection is not None and self.connection.is_connected():
            self.connection.disconnect()

    def wait_for(self, count: int, timeout: float = 60.0) -> list[tuple[str, dict[str, str], dict]]:
        """The first ``count`` messages; fails after ``timeout`` s with what arrived."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if len(self.messages) >= count:
                    return list(self.messages[:count])
                got = list(self.messages)
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(got)} of {count} messages arrived: {[m[2] for m in got]}")
            time.sleep(0.05)

    def ids(self) -> list[int]:
        with self._lock:
            return [body["eventId"] for _, _, body in self.messages]
