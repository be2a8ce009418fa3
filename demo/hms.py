"""An embedded Apache Hive Metastore 2.3.10, run from the jars that the PyPI ``pyspark`` wheel ships.

The launch follows the Hive 2.3 metastore admin guide (``hive-site.xml`` with a Derby
``javax.jdo.option.ConnectionURL``, ``datanucleus.schema.autoCreateAll``; Java 17, the jars in
``pyspark/jars/``, listening in about 20 s). Layout under ``workdir``::

    conf/hive-site.xml   written by start()
    metastore_db/        Derby database (kept between runs)
    warehouse/           hive.metastore.warehouse.dir (kept between runs)
    hms.log              the JVM's stdout and stderr (HMS logs to the console)
    hms.pid              pid of the running JVM, to explain a clash on the same workdir

The JVM's main class is the project's ``io.hmsgateway.metastore.EmbeddedMetastore``
(``listener/``): it creates HMS's transaction and lock tables (``TxnDbUtil.prepDb``) when the
database lacks them, then runs ``HiveMetaStore.main``, so ``lock``/``check_lock``/``unlock`` work
(Iceberg's HiveCatalog commits under them; docs/iceberg.md).

HMS 2.3 has no bind-address setting: it listens on all interfaces, unauthenticated. Keep the
port firewalled on shared hosts; the gateway is the authenticated way in.

Readiness means: the port accepts connections AND a strict TBinaryProtocol ``get_all_databases``
call (framed when ``framed=True``) gets a REPLY header back; on a Kerberized metastore
(``kerberos=``, demo/hms_kerberos.py) that call goes over SASL GSSAPI.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import weakref
from pathlib import Path

from demo import CHECKOUT
from demo.hms_kerberos import HMSKerberos, site_xml
from demo.hms_probe import probe_get_all_databases

__all__ = [
    "EmbeddedHMS", "HMSStartError", "PortInUseError", "listener_jar", "probe_get_all_databases", "pyspark_jars_dir",
]

# HiveMetaStore.main after creating HMS's lock tables (listener/.../EmbeddedMetastore.java).
_MAIN_CLASS = "io.hmsgateway.metastore.EmbeddedMetastore"
_LOG_TAIL_LINES = 40
_LOG4J2_PROPERTIES = """\
status = ERROR
name = EmbeddedHMS
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %5p [%t] %c{2}: %m%n
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = WARN
logger.datanucleus2.name = org.datanucleus
logger.datanucleus2.level = WARN
rootLogger.level = INFO
rootLogger.appenderRefs = console
rootLogger.appenderRef.console.ref = console
"""


class HMSStartError(RuntimeError):
    """The metastore JVM could not be started or did not become ready; the message holds the log tail."""


class PortInUseError(HMSStartError):
    """Something already listens on the requested port (nothing was started)."""


def pyspark_jars_dir() -> Path:
    """Return the ``pyspark/jars`` directory (holds hive-metastore-2.3.10.jar, Derby, DataNucleus).

    Raises RuntimeError when pyspark is not installed (``pip install 'hms-gateway[demo]'``).
    """
    try:
        import pyspark
    except ImportError as exc:  # the demo extra is optional for the gateway itself
        raise RuntimeError("pyspark is not installed: pip install -e '.[demo]'") from exc
    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        raise RuntimeError(f"no hive-metastore jar in {jars}; is this a full pyspark wheel?")
    return jars


_LISTENER_CLASS = "io.hmsgateway.listener.NotificationLogListener"
_REPO_ROOT = CHECKOUT


def listener_jar() -> Path:
    """Return the jar of ``listener/`` (``build/listener/hms-gateway-listener.jar``): the
    notification-log listener and the metastore's main class.

    ``make install`` builds it (``scripts/build-listener.sh``); when it is missing or older than a
    file under ``listener/`` it is built here. Raises RuntimeError when it cannot be built (javac
    missing: default-jdk-headless).
    """
    jar = _REPO_ROOT / "build" / "listener" / "hms-gateway-listener.jar"
    sources = [p for p in (_REPO_ROOT / "listener").rglob("*") if p.is_file()]
    if not jar.exists() or any(p.stat().st_mtime > jar.stat().st_mtime for p in sources):
        script = _REPO_ROOT / "scripts" / "build-listener.sh"
        done = subprocess.run(
            [str(script), sys.executable], cwd=_REPO_ROOT, capture_output=True, text=True, check=False,
        )
        if done.returncode != 0 or not jar.exists():
            raise RuntimeError(f"cannot build {jar} with {script}: {done.stderr.strip()[-2000:]}")
    return jar


def _port_in_use(port: int) -> bool:
    # SO_REUSEADDR makes a TIME_WAIT socket not count; a listener (of any address) still does.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def _derby_locked_by_live_process(db_dir: Path) -> bool:
    # Derby holds a POSIX lock on dbex.lck while a JVM has the database booted; a JVM that died
    # releases it, and Derby then boots over the stale db.lck by itself.
    lock = db_dir / "dbex.lck"
    if not lock.exists():
        return False
    with open(lock, "rb+") as fh:
        try:
            fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.lockf(fh, fcntl.LOCK_UN)
    return False


def _kill_group(proc: subprocess.Popen, grace: float, pidfile: Path | None = None) -> None:
    if pidfile is not None:
        pidfile.unlink(missing_ok=True)
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


# Derby waits 20 s on a lock before it looks for a deadlock; HMS's concurrent drops and listings
# deadlock in its row locks (TBLS, SDS), so a stall was 20 s plus HMS's retry. PostgreSQL looks
# after 1 s, as here; the loser's call is retried by HMS (hive.hmshandler.retry.*).
DERBY_PROPERTIES = {"derby.locks.deadlockTimeout": "1"}


class EmbeddedHMS:
    """One Hive Metastore 2.3.10 JVM (Derby-backed, strict binary Thrift on ``port``; unsecured
    unless ``kerberos`` is given).

    ``workdir`` is created if missing; its Derby database and warehouse survive stop/start, so a
    second run sees the first run's catalog. ``framed=True`` sets
    ``hive.metastore.thrift.framed.transport.enabled``. ``durable=False`` sets Derby's
    ``derby.system.durability=test``: no log sync at each commit, so bulk writes do not wait on the
    disk, but a machine crash (not a killed JVM) may corrupt the database; it is meant for
    throwaway metastores such as the tests'. ``short_lived=True`` runs the JVM with C1 only: half
    the CPU to start and less to add partitions, but slower calls once warm (C2 compiles what a
    long-lived metastore runs often), so benchmarks and the demo keep the full JIT. Every change is written to HMS's notification log by
    ``listener_jar()``'s listener; ``event_ttl_seconds`` is ``hive.metastore.event.db.listener.timetolive``
    and ``event_cleaner_interval_seconds`` how often expired entries are deleted. ``site`` adds or
    overrides ``hive-site.xml`` properties (name → value), such as a short ``hive.txn.timeout``.
    ``derby`` adds or overrides Derby system properties (:data:`DERBY_PROPERTIES`).
    ``kerberos`` (:class:`~demo.hms_kerberos.HMSKerberos`) Kerberizes it: SASL on the
    Thrift port, ``conf/core-site.xml`` with the proxy users and QOP, the realm's krb5.conf.
    Use as a context manager or call start()/stop(); the JVM runs in its own process group and is
    also stopped when the Python interpreter exits.
    """

    def __init__(
        self, workdir: Path, port: int, *, java: str = "java", heap_mb: int = 512, framed: bool = False,
        durable: bool = True, short_lived: bool = False, event_ttl_seconds: int = 86400,
        event_cleaner_interval_seconds: int = 60, site: dict[str, str] | None = None,
        derby: dict[str, str] | None = None, kerberos: HMSKerberos | None = None,
    ):
        self.workdir = Path(workdir).resolve()
        self.port = int(port)
        self.host = "127.0.0.1"
        self.java = java
        self.heap_mb = heap_mb
        self.framed = framed
        self.durable = durable
        self.short_lived = short_lived
        self.event_ttl_seconds = event_ttl_seconds
        self.event_cleaner_interval_seconds = event_cleaner_interval_seconds
        self.site = dict(site or {})
        self.derby = {**DERBY_PROPERTIES, **(derby or {})}
        self.kerberos = kerberos
        self._proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def uri(self) -> str:
        """``thrift://127.0.0.1:PORT``, the value for ``hive.metastore.uris``."""
        return f"thrift://{self.host}:{self.port}"

    @property
    def warehouse_dir(self) -> Path:
        return self.workdir / "warehouse"

    @property
    def metastore_db(self) -> Path:
        return self.workdir / "metastore_db"

    @property
    def log_path(self) -> Path:
        return self.workdir / "hms.log"

    @property
    def pid(self) -> int | None:
        """Pid of the running JVM, or None."""
        return self._proc.pid if self.running else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _hive_site(self) -> str:
        props = {
            "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={self.metastore_db};create=true",
            "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
            "hive.metastore.warehouse.dir": self.warehouse_dir.as_uri(),
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
            "hive.async.log.enabled": "false",  # else NoClassDefFoundError com/lmax/disruptor
            "hive.metastore.thrift.framed.transport.enabled": "true" if self.framed else "false",
            # Without Hadoop's native library, inheriting the parent's permissions runs `ls -ld`,
            # `chgrp -R` and `chmod -R` child processes for every new partition directory; a
            # single-user local warehouse has nothing to inherit.
            "hive.warehouse.subdir.inherit.perms": "false",
            # DataNucleus takes object ids from SEQUENCE_TABLE in blocks, one committed (and, in
            # Derby, synced) transaction per block; the default block of 10 means several commits
            # per added partition.
            "datanucleus.valuegeneration.increment.allocationSize": "1000",
            # The notification log (issue 12): the project's listener writes it in the change's own
            # transaction, as Hive's DbNotificationListener does; entries older than the TTL are
            # deleted every cleaner interval.
            "hive.metastore.transactional.event.listeners": _LISTENER_CLASS,
            "hive.metastore.event.db.listener.timetolive": f"{self.event_ttl_seconds}s",
            "hms.gateway.listener.cleaner.interval": str(self.event_cleaner_interval_seconds),
            # package-derby.orm in the listener jar: NOTIFICATION_LOG.MESSAGE as CLOB, as in Hive's
            # Derby schema script (DataNucleus would make it LONG VARCHAR, 32,700 characters).
            "datanucleus.mapping": "derby",
            # BoneCP (the default pool) is not in the PySpark jars: DataNucleus falls back without
            # it, but HMS's AcidEventListener (TxnHandler) does not, so drop_database failed with
            # NoClassDefFoundError com/jolbox/bonecp/BoneCPConfig. commons-dbcp is there.
            "datanucleus.connectionPoolingType": "DBCP",
            # HMS's own lock housekeeping, as a site with transactions runs it (docs/operations.md,
            # HMS locks): with the compactor's initiator on, HMS 2.3 starts AcidHouseKeeperService,
            # whose performTimeOuts deletes lock requests not heard of for hive.txn.timeout.
            "hive.support.concurrency": "true",
            "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
            "hive.compactor.initiator.on": "true",
            "hive.txn.timeout": "300s",
            "hive.timedout.txn.reaper.start": "10s",
            "hive.timedout.txn.reaper.interval": "60s",
            # As Iceberg sites (and Apache PyIceberg's CI Hive) set it: else a schema change that
            # drops or reorders columns is refused (gateway/iceberg/hms_refusals.py).
            "hive.metastore.disallow.incompatible.col.type.changes": "false",
            **(self.kerberos.hive_site() if self.kerberos else {}),
            **self.site,
        }
        return site_xml(props)

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-_LOG_TAIL_LINES:])

    def _previous_pid(self) -> int | None:
        # hms.pid outlives a run whose Python process was killed; the JVM may still be up.
        try:
            pid = int((self.workdir / "hms.pid").read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def _check_preconditions(self) -> str:
        java = shutil.which(self.java)
        if java is None:
            raise RuntimeError(
                f"Java not found ({self.java!r}): the embedded Hive Metastore needs a JRE; "
                "run scripts/install-system-deps.sh (installs default-jre-headless)"
            )
        if _port_in_use(self.port):
            hint = ""
            owner = self._previous_pid()
            if owner is not None:
                hint = f" (a metastore from an earlier run of this workdir is still alive: pid {owner})"
            raise PortInUseError(
                f"port {self.port} is already in use; cannot start the Hive Metastore on it{hint}"
            )
        if _derby_locked_by_live_process(self.metastore_db):
            owner = self._previous_pid() or "unknown"
            raise HMSStartError(
                f"Derby database {self.metastore_db} is in use by another process (pid {owner}); "
                "stop that metastore or use another workdir"
            )
        return java

    def start(self, timeout: float = 120) -> None:
        """Start the JVM and block until a Thrift call answers.

        ``timeout`` is in seconds. Raises RuntimeError when Java is missing, HMSStartError when the
        port is taken (PortInUseError), the Derby database is held by a live process, the JVM exits, or ``timeout``
        passes (the JVM is then killed); HMSStartError messages carry the tail of ``hms.log``.
        """
        if self.running:
            return
        java = self._check_preconditions()
        conf = self.workdir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        self.warehouse_dir.mkdir(parents=True, exist_ok=True)
        (conf / "hive-site.xml").write_text(self._hive_site())
        # Hadoop reads core-site.xml from the classpath: without one, UGI is "simple".
        core_site = conf / "core-site.xml"
        if self.kerberos:
            core_site.write_text(self.kerberos.core_site())
        else:
            core_site.unlink(missing_ok=True)
        # Hive looks this name up on the classpath (conf/ comes first); without it HMS logs to
        # $TMPDIR/$USER/hive.log, shared by every metastore on the machine.
        (conf / "hive-log4j2.properties").write_text(_LOG4J2_PROPERTIES)
        classpath = os.pathsep.join([str(conf), str(listener_jar()), str(pyspark_jars_dir() / "*")])
        cmd = [
            java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",  # two cores: fewer GC threads, faster start
            # C1 only for short-lived metastores (see the class docstring).
            *(["-XX:TieredStopAtLevel=1"] if self.short_lived else []),
            "-Dhive.async.log.enabled=false",
            f"-Dderby.system.home={self.workdir}",  # derby.log goes here, not into the cwd
            *([] if self.durable else ["-Dderby.system.durability=test"]),
            *(f"-D{name}={value}" for name, value in self.derby.items()),
            *(self.kerberos.jvm_options() if self.kerberos else []),
            "-cp",
            classpath,
            _MAIN_CLASS,
            "-p",
            str(self.port),
        ]
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== starting Hive Metastore on port {self.port} ===\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() signals the whole group
            )
        pidfile = self.workdir / "hms.pid"
        pidfile.write_text(f"{self._proc.pid}\n")
        self._finalizer = weakref.finalize(self, _kill_group, self._proc, 10.0, pidfile)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise HMSStartError(
                    f"Hive Metastore exited with code {code} during start-up; tail of {self.log_path}:\n"
                    f"{self._log_tail()}"
                )
            try:
                if self.kerberos:
                    self.kerberos.probe(self.host, self.port, timeout=10)
                else:
                    probe_get_all_databases(self.host, self.port, framed=self.framed, timeout=10)
                return
            except (OSError, ValueError) as exc:
                last_error = exc
            time.sleep(0.5)
        raise HMSStartError(
            f"Hive Metastore not ready on port {self.port} after {timeout:.0f} s (last probe error: {last_error}); "
            f"tail of {self.log_path}:\n{self._log_tail()}"
        )

    def reset(self) -> None:
        """Delete the Derby database and the warehouse: the next start is an empty metastore.
        Raises HMSStartError when this object's JVM or another live process holds the database."""
        if self.running or _derby_locked_by_live_process(self.metastore_db):
            owner = self.pid or self._previous_pid() or "unknown"
            raise HMSStartError(f"Derby database {self.metastore_db} is in use by a running metastore "
                                f"(pid {owner}); stop it before starting a fresh one here")
        shutil.rmtree(self.metastore_db, ignore_errors=True)
        shutil.rmtree(self.warehouse_dir, ignore_errors=True)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds; waits for the exit. Idempotent."""
        if self._proc is None:
            return
        _kill_group(self._proc, grace, self.workdir / "hms.pid")
        if self._finalizer is not None:
            self._finalizer.detach()
        self._proc = None

    def __enter__(self) -> "EmbeddedHMS":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"EmbeddedHMS(workdir={str(self.workdir)!r}, port={self.port}, framed={self.framed}, "
            f"durable={self.durable}, kerberos={self.kerberos is not None}, pid={self.pid})"
        )
