"""What every benchmark starts: a work directory, one real Hive Metastore and real gateways
(``hms-gateway serve``, through :class:`tests.support.gateway.GatewayFactory`), stopped together.

    with Bench("policy") as bench:
        gw = bench.gateway(services=[bench.service(timeout_seconds=300)])
        direct = bench.direct()
        ...

Also the machine a run was measured on (:func:`machine`, :func:`load`), for the reports.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from bench.clients import PASSWORD, USER, Direct
from gateway.thrift import accel
from tests.support.gateway import GatewayFactory, RunningGateway, service
from tests.support.hms import RunningHMS, start_hms

__all__ = ["Bench", "load", "machine"]


class Bench(contextlib.ExitStack):
    """One benchmark's world; leaving the ``with`` block (or :meth:`close`) stops, last first,
    what was started in it: direct clients, gateways, :meth:`callback` s, then the HMS.

    ``name`` names the work directory (``hms-gateway-bench-<name>-*`` under the temp dir) and
    prefixes the progress lines. The HMS is started unless ``hms=False`` (then :attr:`hms` is
    None): with its full JIT (``short_lived=False``, as in production) unless ``short_lived``,
    with the demo catalog when ``catalog``. ``keep_work=False`` removes the work directory at
    the end. Raises what :func:`tests.support.hms.start_hms` raises.
    """

    def __init__(self, name: str, *, hms: bool = True, catalog: bool = False, short_lived: bool = False,
                 keep_work: bool = True):
        super().__init__()
        self.name = name
        self.work = Path(tempfile.mkdtemp(prefix=f"hms-gateway-bench-{name}-"))
        if not keep_work:
            self.callback(shutil.rmtree, self.work, ignore_errors=True)
        self.hms: RunningHMS | None = None
        if hms:
            self.say(f"workdir {self.work}; starting HMS" + (" with the sample catalog" if catalog else ""))
            try:
                self.hms = start_hms(self.work / "hms", catalog=catalog, short_lived=short_lived)
            except BaseException:
                self.close()
                raise
            self.callback(self.hms.server.stop)
        else:
            self.say(f"workdir {self.work}")
        self._gateways = GatewayFactory(self._directory)
        self.callback(self._gateways.close)

    def say(self, text: str) -> None:
        """Print a progress line ``bench <name>: text`` at once."""
        print(f"bench {self.name}: {text}", flush=True)

    def _directory(self, name: str) -> Path:
        path, n = self.work / name, 1
        while path.exists():
            n += 1
            path = self.work / f"{name}-{n}"
        return path

    @property
    def upstream(self) -> str:
        """The HMS's URL as a service's ``upstream.urls`` names it."""
        if self.hms is None:
            raise RuntimeError("this benchmark started no HMS")
        return f"thrift://127.0.0.1:{self.hms.port}"

    def service(self, methods: list[str] | None = None, **upstream) -> dict:
        """:func:`tests.support.gateway.service` of the HMS (the spec's path; ``upstream`` keys)."""
        return service([self.upstream], methods, **upstream)

    def gateway(self, topologies: dict[str, dict] | None = None, users: dict[str, str] | None = None, *,
                services: list[dict] | None = None, name: str = "gateway", **options) -> RunningGateway:
        """A started gateway (:meth:`tests.support.gateway.GatewayFactory.__call__`) in
        ``<work>/<name>``; users default to :data:`bench.clients.USER`. Raises RuntimeError with
        the gateway's log when it does not start."""
        return self._gateways(topologies, {USER: PASSWORD} if users is None else users, services=services,
                              name=name, **options)

    def direct(self) -> Direct:
        """A :class:`bench.clients.Direct` client of the HMS, closed with the rest."""
        if self.hms is None:
            raise RuntimeError("this benchmark started no HMS")
        client = Direct(self.hms.port)
        self.callback(client.close)
        return client


def machine() -> dict[str, str]:
    """Date (UTC), CPUs, CPU model, Python version and translator implementation."""
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "translation": accel.implementation(),
    }


def load() -> str:
    """The 1, 5 and 15-minute load averages (``/proc/loadavg``)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
