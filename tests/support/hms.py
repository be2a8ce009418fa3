"""Start real Hive Metastores for tests: free ports, temp workdirs, the demo catalog.

An HMS is an ``gateway.demo.hms.EmbeddedHMS`` JVM; ``RunningHMS`` is what fixtures hand to tests.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from gateway.demo.hms import EmbeddedHMS, PortInUseError
from gateway.demo.pipeline import run_pipeline_in_subprocess

__all__ = ["RunningHMS", "free_port", "start_hms"]

SAMPLE_MANY_PARTITIONS = 200  # partitions of hmshttptestdatabase.events in the session catalog


@dataclass(frozen=True)
class RunningHMS:
    """A started metastore: connect to ``host:port`` (strict binary, framed when ``framed``)."""

    host: str
    port: int
    uri: str
    warehouse_dir: Path
    framed: bool
    server: EmbeddedHMS

    @classmethod
    def of(cls, server: EmbeddedHMS) -> "RunningHMS":
        return cls(server.host, server.port, server.uri, server.warehouse_dir, server.framed, server)


def free_port() -> int:
    """A TCP port that was free a moment ago (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_hms(
    workdir: Path, *, framed: bool = False, catalog: bool = False, many_partitions: int = SAMPLE_MANY_PARTITIONS,
    short_lived: bool = True, site: dict[str, str] | None = None, derby: dict[str, str] | None = None,
    kerberos=None, **events,
) -> RunningHMS:
    """Start an HMS in ``workdir`` on a free port; with ``catalog``, run the demo pipeline into it.

    Test metastores are throwaway, so Derby skips the log sync at each commit (``durable=False``)
    and, unless ``short_lived=False`` (benchmarks), the JVM runs C1 only.
    ``events`` are EmbeddedHMS's notification-log settings (``event_ttl_seconds``,
    ``event_cleaner_interval_seconds``).
    ``site`` adds ``hive-site.xml`` properties (a short ``hive.txn.timeout`` for lock expiry),
    ``derby`` Derby system properties (lock timeouts). ``kerberos``: an ``HMSKerberos``
    (tests/support/secure_hms.py); the catalog pipeline then cannot run directly.
    Retries a few times if another process grabs the port between the pick and the JVM's bind.
    Raises HMSStartError / RuntimeError from EmbeddedHMS or the pipeline.
    """
    if catalog and kerberos is not None:
        raise ValueError("the demo pipeline calls HMS directly without SASL: seed a Kerberized HMS through a gateway")
    for attempt in range(3):
        server = EmbeddedHMS(workdir, free_port(), framed=framed, durable=False, short_lived=short_lived,
                              site=site, derby=derby, kerberos=kerberos, **events)
        try:
            server.start()
            break
        except PortInUseError:
            if attempt == 2:
                raise
    try:
        if catalog:
            run_pipeline_in_subprocess(
                server.uri, server.warehouse_dir, many_partitions=many_partitions,
                log_path=Path(workdir) / "pipeline.log",
            )
    except BaseException:
        server.stop()
        raise
    return RunningHMS.of(server)
