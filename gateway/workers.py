"""``workers: N``: N gateway processes serving one port, under a supervisor (issue 14, item 3).

With ``workers`` above 1 the ``serve`` process becomes the supervisor. It

* reserves the gateway port: a bound, never listening ``SO_REUSEPORT`` socket, so that port 0
  becomes one concrete port that every worker then shares;
* starts N workers (``python -m gateway.workers``), each a :class:`gateway.server.Gateway` with
  its own uvloop event loop, its own ``SO_REUSEPORT`` listener on the gateway port (Linux hands
  each new connection to one listening socket by a hash of its addresses and ports) and its own
  topology reloader polling the topology directory;
* serves the management port once: ``/metrics`` sums the workers' values (prometheus-client's
  multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR`` is in each worker's environment before
  ``prometheus_client`` is imported) and adds ``hms_gateway_workers`` and
  ``hms_gateway_worker_restarts_total``; ``/readyz`` is ready when a worker is (one live worker
  serves the port) and never while draining;
* keeps the failed-authentication throttle's budgets, so that an address is refused after
  ``refuse_after`` failures in all, not N times as many: workers ask it, over HTTP on a Unix
  socket (aiohttp), when a password check starts and when it ends; cached credentials never
  reach it;
* restarts a worker that exits (``hms_gateway_worker_restarts_total``), with a back-off when it
  keeps dying, forwards ``SIGHUP`` (reload) to every worker, and on ``SIGTERM``/``SIGINT`` turns
  unready and sends ``SIGTERM`` to every worker: each drains as a single process does
  (``shutdown.drain_delay_seconds``, then in-flight requests get ``shutdown.grace_seconds``).

Everything else is per worker: credential caches (a worker verifies a password once for itself),
upstream pools (N × ``pool_size`` connections to each HMS at most), policy engines and their
caches, admission limits (``max_concurrent_requests`` applies per worker), the audit writer,
the metadata caches' replies, Iceberg scan plans in progress (any worker answers any plan id:
:mod:`gateway.iceberg.plan_store`). The metadata caches' generation counters are shared: the supervisor
creates them (a file in its runtime directory that every worker maps, :mod:`gateway.cache.generations`),
so a write through one worker drops the entries it touches in all.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import Counter as Tally
from pathlib import Path

import aiohttp
import uvloop
from aiohttp import web
from pydantic import ValidationError

from gateway.cache.generations import FILE_NAME as CACHE_GENERATIONS, attach_shared, create_shared
from gateway.config import ConfigError, GatewayConfig, load_gateway_config, load_topologies
from gateway.providers.authentication.settings import FailureThrottle
from gateway.upstream import table_queue
from gateway.providers.authentication.throttle import AuthFailureThrottle, Throttled
from gateway.worker_role import WorkerRole, enter_worker

log = logging.getLogger(__name__)

_START_TIMEOUT_SECONDS = 120.0  # all workers listening (imports and topology builds included)
_CONTROL_TIMEOUT_SECONDS = 5.0
_STABLE_SECONDS = 10.0  # a worker that ran this long is restarted at once when it exits
_MAX_BACKOFF_SECONDS = 30.0


def worker_count(config: GatewayConfig) -> int:
    """``config.workers`` as a number: ``auto`` is the CPUs this process may run on."""
    if config.workers == "auto":
        return len(os.sched_getaffinity(0))
    return config.workers


def _unix_session(path: Path) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.UnixConnector(path=str(path)),
        timeout=aiohttp.ClientTimeout(total=_CONTROL_TIMEOUT_SECONDS),
    )


# --- throttle budgets: the supervisor keeps them, workers ask -----------------------------


class BudgetKeeper:
    """The supervisor's throttles, one per topology and throttle settings, and the checks each
    worker has in flight (given back when the worker exits mid-check)."""

    def __init__(self) -> None:
        self._throttles: dict[tuple[str, str], AuthFailureThrottle] = {}
        self._in_flight: Tally[tuple[int, tuple[str, str], str]] = Tally()

    def _throttle(self, body: dict) -> tuple[tuple[str, str], AuthFailureThrottle]:
        config = FailureThrottle.model_validate(body["config"])
        key = (str(body["topology"]), config.model_dump_json())
        throttle = self._throttles.get(key)
        if throttle is None:
            throttle = self._throttles[key] = AuthFailureThrottle(config, topology=key[0])
        return key, throttle

    def begin(self, body: dict) -> dict:
        """``{"retry_after": None}`` when the check may run (now counted), else the seconds."""
        key, throttle = self._throttle(body)
        address = str(body["address"])
        try:
            throttle.begin(address)
        except Throttled as exc:
            return {"retry_after": exc.retry_after}
        self._in_flight[(int(body["worker"]), key, address)] += 1
        return {"retry_after": None}

    def end(self, body: dict) -> dict:
        """``{"delay": seconds}``: the slow-down after a failure (0 after a success)."""
        key, throttle = self._throttle(body)
        address, pending = str(body["address"]), (int(body["worker"]), key, str(body["address"]))
        if self._in_flight[pending] > 0:
            self._in_flight[pending] -= 1
        if not self._in_flight[pending]:
            del self._in_flight[pending]
        return {"delay": throttle.end(address, bool(body["ok"]))}

    def worker_gone(self, worker: int) -> None:
        """Give back the checks ``worker`` had started and will never end."""
        for pending in [p for p in self._in_flight if p[0] == worker]:
            _, key, address = pending
            for _ in range(self._in_flight.pop(pending)):
                self._throttles[key].end(address, True)


class SupervisorBudgets:
    """A worker's :class:`~gateway.providers.authentication.throttle.SharedBudgets`: the
    supervisor's budgets over its control socket. If the supervisor does not answer (it is
    going away), the worker's own throttle counts instead, and that is logged."""

    def __init__(self, role: WorkerRole):
        self.role = role
        self._session: aiohttp.ClientSession | None = None

    async def _ask(self, op: str, throttle: AuthFailureThrottle, address: str, **extra) -> dict:
        if self._session is None:
            self._session = _unix_session(self.role.control_socket)
        body = {"worker": self.role.index, "topology": throttle.topology, "address": address,
                "config": throttle.config.model_dump(mode="json"), **extra}
        async with self._session.post(f"http://supervisor/throttle/{op}", json=body) as response:
            response.raise_for_status()
            return await response.json()

    async def begin(self, throttle: AuthFailureThrottle, address: str) -> None:
        try:
            answer = await self._ask("begin", throttle, address)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("throttle: supervisor did not answer (%s); this worker counts alone", exc)
            throttle.begin(address)
            return
        if answer["retry_after"] is not None:
            raise Throttled(int(answer["retry_after"]))

    async def end(self, throttle: AuthFailureThrottle, address: str, ok: bool) -> float:
        try:
            return float((await self._ask("end", throttle, address, ok=ok))["delay"])
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("throttle: supervisor did not answer (%s); this worker counts alone", exc)
            return throttle.end(address, ok)


# --- the supervisor ---------------------------------------------------------------------------


def _reserve_port(host: str, port: int) -> socket.socket:
    """A bound, not listening SO_REUSEPORT socket on ``host:port``: holds the port (port 0:
    picks one) for the workers' listeners, and fails early when another program has it."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


class Supervisor:
    """Runs ``count`` workers for the gateway file ``config_path`` (see the module docstring).

    :meth:`run` returns the process exit status: 0 after a drain, 1 when the workers could not
    start (their logs say why).
    """

    def __init__(self, config_path: Path, config: GatewayConfig, count: int, log_level: str | None = None,
                 ports_file: Path | None = None):
        self.config_path, self.config, self.count, self.log_level = config_path, config, count, log_level
        self.ports_file = ports_file
        self.runtime_dir = Path(tempfile.mkdtemp(prefix="hms-gateway-"))
        self.metrics_dir = self.runtime_dir / "metrics"
        self.metrics_dir.mkdir()
        create_shared(self.runtime_dir)  # the metadata caches' generation counters, before any worker
        self.budgets = BudgetKeeper()
        self.draining = False
        self.port = 0
        self.management_port = 0
        self._processes: dict[int, asyncio.subprocess.Process] = {}
        self._listening: dict[int, asyncio.Event] = {i: asyncio.Event() for i in range(count)}
        self._failed_start = asyncio.Event()
        self._stop = asyncio.Event()
        self._setup_metrics()

    def _setup_metrics(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        # Its own registry: these must not be in the workers' files (they import this module).
        self.registry = CollectorRegistry(auto_describe=True)
        self.workers_gauge = Gauge("hms_gateway_workers", "Worker processes listening now.",
                                   registry=self.registry)
        self.restarts = Counter("hms_gateway_worker_restarts", "Worker processes restarted after "
                                "they exited, by worker index.", ["worker"], registry=self.registry)

    def exposition(self) -> bytes:
        """``/metrics``: the workers' metrics summed, then the supervisor's own."""
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.multiprocess import MultiProcessCollector

        workers = CollectorRegistry()
        MultiProcessCollector(workers, path=str(self.metrics_dir))
        return generate_latest(workers) + generate_latest(self.registry)

    async def _store_function_gauges(self) -> None:
        """Before a scrape: every listening worker writes its function gauges to its file."""

        async def store(index: int) -> None:
            try:
                async with _unix_session(self._role(index).management_socket) as session:
                    async with session.get("http://worker/metrics") as response:
                        await response.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("worker %d did not store its gauges before a scrape: %s", index, exc)

        await asyncio.gather(*(store(i) for i, e in self._listening.items() if e.is_set()))

    def _role(self, index: int) -> WorkerRole:
        return WorkerRole(index, self.port, self.runtime_dir)

    async def readiness(self) -> list[str]:
        """Empty when some worker is ready (and not draining), else every worker's problem."""
        if self.draining:
            return ["shutting down"]
        problems = await asyncio.gather(*(self._worker_readiness(i) for i in range(self.count)))
        if None in problems:
            return []
        return [f"worker {i}: {p}" for i, p in enumerate(problems)]

    async def _worker_readiness(self, index: int) -> str | None:
        if not self._listening[index].is_set():
            return "not listening (starting or restarting)"
        try:
            async with _unix_session(self._role(index).management_socket) as session:
                async with session.get("http://worker/readyz") as response:
                    text = (await response.text()).strip()
                    return None if response.status == 200 else text
        except (aiohttp.ClientError, TimeoutError) as exc:
            return f"no answer ({exc or 'timeout'})"

    def control_app(self) -> web.Application:
        """The workers' side door: throttle budgets and start-up reports (JSON over HTTP)."""

        def handler(operation):
            async def handle(request: web.Request) -> web.Response:
                try:
                    body = await request.json()
                    return web.json_response(operation(body))
                except (KeyError, TypeError, ValueError, ValidationError) as exc:
                    return web.json_response({"error": str(exc)}, status=400)
            return handle

        def listening(body: dict) -> dict:
            index = int(body["worker"])
            self._listening[index].set()
            self.workers_gauge.set(sum(e.is_set() for e in self._listening.values()))
            log.info("worker %d (pid %s) listening", index, body.get("pid"))
            return {}

        app = web.Application()
        app.router.add_post("/throttle/begin", handler(self.budgets.begin))
        app.router.add_post("/throttle/end", handler(self.budgets.end))
        app.router.add_post("/workers/listening", handler(listening))
        return app

    def _command(self, index: int) -> list[str]:
        command = [sys.executable, "-m", "gateway.workers", "--config", str(self.config_path),
                   "--worker", str(index), "--port", str(self.port), "--runtime-dir", str(self.runtime_dir)]
        if self.log_level:
            command += ["--log-level", self.log_level]
        return command

    async def _keep(self, index: int) -> None:
        """Run worker ``index`` until draining; restart it whenever it exits before that."""
        from prometheus_client.multiprocess import mark_process_dead

        backoff = 0.5
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(self.metrics_dir)}
        while not self.draining:
            started = time.monotonic()
            process = await asyncio.create_subprocess_exec(*self._command(index), env=env)
            self._processes[index] = process
            status = await process.wait()
            self._listening[index].clear()
            self.workers_gauge.set(sum(e.is_set() for e in self._listening.values()))
            mark_process_dead(process.pid, str(self.metrics_dir))
            self.budgets.worker_gone(index)
            if self.draining:
                return
            if self.management_port == 0:  # still starting: a worker that cannot start fails all
                log.error("worker %d exited with %s before listening", index, status)
                self._failed_start.set()
                return
            backoff = 0.5 if time.monotonic() - started > _STABLE_SECONDS else min(backoff * 2, _MAX_BACKOFF_SECONDS)
            log.warning("worker %d (pid %d) exited with %s; restarting in %g s", index, process.pid, status, backoff)
            self.restarts.labels(worker=str(index)).inc()
            await asyncio.sleep(backoff)

    def _reload_workers(self) -> None:
        """SIGHUP to the listening workers; one still starting reads the files as they are now
        (and SIGHUP's default action would end it before its handler is installed)."""
        for index, process in self._processes.items():
            if process.returncode is None and self._listening[index].is_set():
                process.send_signal(signal.SIGHUP)

    def _signal_workers(self, sig: signal.Signals) -> None:
        for process in self._processes.values():
            if process.returncode is None:
                process.send_signal(sig)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        listeners = self.config.listeners
        from gateway.server import listening, write_ports_file

        with listening("gateway", listeners.gateway.host, listeners.gateway.port):
            reserved = _reserve_port(listeners.gateway.host, listeners.gateway.port)
        self.port = reserved.getsockname()[1]
        control = web.AppRunner(self.control_app(), access_log=None)
        await control.setup()
        await web.UnixSite(control, str(self._role(0).control_socket)).start()
        management: web.AppRunner | None = None
        keepers = [loop.create_task(self._keep(i)) for i in range(self.count)]
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, self._reload_workers)
        try:
            if not await self._all_listening():
                self._stop.set()
                return 1
            from gateway.observability.management import management_app

            app = management_app(self.readiness, self.exposition, self._store_function_gauges)
            management = web.AppRunner(app, access_log=None, shutdown_timeout=1)
            await management.setup()
            with listening("management", listeners.management.host, listeners.management.port):
                await web.TCPSite(management, listeners.management.host, listeners.management.port).start()
            self.management_port = management.addresses[0][1]
            if self.ports_file is not None:
                write_ports_file(self.ports_file, self.port, self.management_port)
            log.info("supervisor (pid %d): %d workers on https://%s:%d, management on http://%s:%d",
                     os.getpid(), self.count, listeners.gateway.host, self.port,
                     listeners.management.host, self.management_port)
            await self._stop.wait()
            return 0
        finally:
            await self._drain(keepers)
            if management is not None:
                await management.cleanup()
            await control.cleanup()
            reserved.close()
            shutil.rmtree(self.runtime_dir, ignore_errors=True)

    async def _all_listening(self) -> bool:
        waits = [asyncio.ensure_future(e.wait()) for e in self._listening.values()]
        failed = asyncio.ensure_future(self._failed_start.wait())
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait([asyncio.gather(*waits), failed, stop],
                               timeout=_START_TIMEOUT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in (*waits, failed, stop):
                future.cancel()
        if all(e.is_set() for e in self._listening.values()):
            return True
        if not self._stop.is_set():
            log.error("the workers did not all start listening; stopping")
        return False

    async def _drain(self, keepers: list[asyncio.Task]) -> None:
        """Unready, SIGTERM to every worker, wait for them (SIGKILL after the grace)."""
        self.draining = True
        log.info("stopping: draining %d workers", len(self._processes))
        self._signal_workers(signal.SIGTERM)
        shutdown = self.config.shutdown
        done, pending = await asyncio.wait(
            keepers, timeout=shutdown.drain_delay_seconds + shutdown.grace_seconds + 10)
        if pending:
            log.error("workers still running after the grace period: killing them")
            self._signal_workers(signal.SIGKILL)
            await asyncio.wait(pending)


def supervise(config_path: Path, config: GatewayConfig, log_level: str | None = None,
              ports_file: Path | None = None) -> int:
    """Serve with ``worker_count(config)`` workers until SIGINT or SIGTERM; the exit status.
    ``ports_file``: see :func:`gateway.server.write_ports_file`."""
    return uvloop.run(Supervisor(config_path, config, worker_count(config), log_level, ports_file).run())


# --- a worker process -------------------------------------------------------------------------


async def _report_listening(role: WorkerRole) -> None:
    async with _unix_session(role.control_socket) as session:
        body = {"worker": role.index, "pid": os.getpid()}
        async with session.post("http://supervisor/workers/listening", json=body) as response:
            response.raise_for_status()


async def _watch_supervisor(parent: int) -> None:
    """Drain when the supervisor is gone (killed without forwarding SIGTERM)."""
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    log.warning("supervisor gone: draining")
    os.kill(os.getpid(), signal.SIGTERM)


def worker_main(argv: list[str] | None = None) -> int:
    """Entry point of a worker process (started by :class:`Supervisor`, never by hand)."""
    from gateway.observability.log_format import configure_logging
    from gateway.providers.authentication.throttle import share_budgets
    from gateway.server import Gateway, run

    parser = argparse.ArgumentParser(prog="python -m gateway.workers")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--runtime-dir", type=Path, required=True)
    parser.add_argument("--log-level")
    args = parser.parse_args(argv)
    parent = os.getppid()
    try:
        config = load_gateway_config(args.config)
        topologies = load_topologies(config.topologies_dir)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.logging.format, args.log_level or config.logging.level)
    role = WorkerRole(args.worker, args.port, args.runtime_dir)
    enter_worker(role)
    share_budgets(SupervisorBudgets(role))
    attach_shared(role.runtime_dir / CACHE_GENERATIONS)
    table_queue.share(role.runtime_dir)  # commits to one table queue across workers (issue 33)
    tasks: set[asyncio.Task] = set()

    def started(gateway: Gateway) -> None:
        loop = asyncio.get_running_loop()
        tasks.update({loop.create_task(_report_listening(role)), loop.create_task(_watch_supervisor(parent))})
        log.info("worker %d (pid %d) listening on port %d", role.index, os.getpid(), gateway.gateway_port)

    run(Gateway(config, topologies, worker=role), on_started=started)
    return 0


if __name__ == "__main__":
    # Run in the module ``gateway.workers``, not in ``__main__``: the module state and the
    # loggers must be the ones the rest of the gateway imports.
    from gateway.workers import worker_main as _worker_main

    sys.exit(_worker_main())
