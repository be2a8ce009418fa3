"""A multi-replica rig (issue 26): gateway processes, each with its own configuration, behind
a real HAProxy (Debian's ``haproxy``), in front of one HMS and one ActiveMQ.

HAProxy forwards TCP (TLS passes through to the gateways, which share one certificate) and
sends the PROXY protocol v2 header, so each gateway sees the real client address, as behind a
Kubernetes Service with ``externalTrafficPolicy: Local``. Its frontends:

* ``port``: every replica, ``balance source`` (the client address picks the replica: the
  stand-in for the chart's ``sessionAffinity: ClientIP``);
* ``replica_ports[i]``: replica ``i`` only, for tests that must choose the replica.

Clients pick their source address from 127.0.0.0/8 to look like different machines.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.gateway import stop_process
from tests.support.ports import start_with_retry

__all__ = ["HAProxy", "LOCKING_SITE", "start_haproxy"]

#: hive-site.xml properties for an HMS whose locks time out (5 s, reaped every second), as a
#: metastore with transactions on does: lock/heartbeat need DbTxnManager and concurrency; the
#: reaper (AcidHouseKeeperService) runs only with the compactor's initiator on.
LOCKING_SITE = {
    "hive.support.concurrency": "true",
    "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
    "hive.compactor.initiator.on": "true",
    "hive.txn.timeout": "5s",
    "hive.timedout.txn.reaper.start": "1s",
    "hive.timedout.txn.reaper.interval": "1s",
}

_CONFIG = """global
  maxconn 2000
defaults
  mode tcp
  timeout connect 5s
  timeout client 120s
  timeout server 120s
frontend balanced
  bind 127.0.0.1:{port}
  default_backend replicas
backend replicas
  balance source
{servers}
{pinned}
"""


@dataclass
class HAProxy:
    """A running HAProxy: ``port`` balances by source address; ``replica_ports[i]`` reaches replica i."""

    workdir: Path
    port: int
    replica_ports: list[int]
    process: subprocess.Popen | None = field(default=None, repr=False)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            stop_process(process)

    def log(self) -> str:
        return (self.workdir / "haproxy.log").read_text(errors="replace")


def start_haproxy(workdir: Path, backends: list[int], timeout: float = 15.0) -> HAProxy:
    """HAProxy in ``workdir`` in front of gateways listening on 127.0.0.1 ``backends`` (ports).
    Raises RuntimeError with its output when it does not listen within ``timeout`` s."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        raise RuntimeError("the rig needs Debian's haproxy (scripts/install-system-deps.sh)")
    workdir.mkdir(parents=True, exist_ok=True)

    def start(first: int) -> HAProxy:  # the balanced frontend on first, replica i's on first + 1 + i
        proxy = HAProxy(workdir, first, [first + 1 + i for i in range(len(backends))])
        servers = "\n".join(f"  server r{i} 127.0.0.1:{p} send-proxy-v2" for i, p in enumerate(backends))
        pinned = "\n".join(
            f"listen replica{i}\n  bind 127.0.0.1:{front}\n  server r{i} 127.0.0.1:{back} send-proxy-v2"
            for i, (front, back) in enumerate(zip(proxy.replica_ports, backends)))
        config = workdir / "haproxy.cfg"
        config.write_text(_CONFIG.format(port=proxy.port, servers=servers, pinned=pinned))
        with open(workdir / "haproxy.log", "wb") as log:
            proxy.process = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=log,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proxy.process.poll() is not None:
                break
            try:
                for port in (proxy.port, *proxy.replica_ports):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return proxy
            except OSError:
                time.sleep(0.1)
        proxy.stop()
        raise RuntimeError(f"haproxy did not listen:\n{proxy.log()}")  # "in use": retried

    return start_with_retry(start, span=1 + len(backends))
