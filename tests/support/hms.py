"""Start real Hive Metastores for tests: reserved ports, temp workdirs, the demo catalog.

An HMS is an ``demo.hms.EmbeddedHMS`` JVM; ``RunningHMS`` is what fixtures hand to tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from demo.hms import EmbeddedHMS, PortInUseError
from demo.seed_job import run_seed_job_in_subprocess
from tests.support.ports import start_with_retry

__all__ = ["RunningHMS", "start_hms"]

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


def start_hms(
    workdir: Path, *, framed: bool = False, catalog: bool = False, many_partitions: int = SAMPLE_MANY_PARTITIONS,
    short_lived: bool = True, site: dict[str, str] | None = None, derby: dict[str, str] | None = None,
    kerberos=None, **events,
) -> RunningHMS:
    """Start an HMS in ``workdir`` on a reserved port (:mod:`tests.support.ports`); with ``catalog``, run the demo pipeline into it.

    Test metastores are throwaway, so Derby skips the log sync at each commit (``durable=False``)
    and, unless ``short_lived=False`` (benchmarks), the JVM runs C1 only.
    ``events`` are EmbeddedHMS's notification-log settings (``event_ttl_seconds``,
    ``event_cleaner_interval_seconds``).
    ``site`` adds ``hive-site.xml`` properties (a short ``hive.txn.timeout`` for lock expiry),
    ``derby`` Derby system properties (lock timeouts). ``kerberos``: an ``HMSKerberos``
    (tests/support/secure_hms.py); the catalog pipeline then cannot run directly.
    A start that finds its port taken is retried on another.
    Raises HMSStartError / RuntimeError from EmbeddedHMS or the pipeline.
    """
    if catalog and kerberos is not None:
        raise ValueError("the demo pipeline calls HMS directly without SASL: seed a Kerberized HMS through a gateway")

    def start(port: int) -> EmbeddedHMS:
        server = EmbeddedHMS(workdir, port, framed=framed, durable=False, short_lived=short_lived,
                             site=site, derby=derby, kerberos=kerberos, **events)
        server.start()
        return server

    server = start_with_retry(start, in_use=lambda exc: isinstance(exc, PortInUseError)
                              or "Address already in use" in str(exc))
    try:
        if catalog:
            run_seed_job_in_subprocess(
                server.uri, server.warehouse_dir, many_partitions=many_partitions,
                log_path=Path(workdir) / "pipeline.log",
            )
    except BaseException:
        server.stop()
        raise
    return RunningHMS.of(server)
