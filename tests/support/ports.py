"""Ports for the servers tests start, without the race of "bind port 0, close it, hand out the
number" (that number comes from the kernel's ephemeral range, which every outgoing connection on
the machine draws from: until the server binds it, any client may take it).

Two ways, by what the server can do:

* A server that can bind port 0 itself reports the port it got: the gateway writes its bound
  ports to ``serve --ports-file`` (:mod:`tests.support.gateway` reads them), in-process Python
  servers read ``getsockname()``, moto's server prints its address.
* A server that must be told its port (the JVMs, HAProxy, slapd, krb5kdc) gets one from
  :func:`reserve_port`: a port of a band below the ephemeral range, so no outgoing connection
  takes it; the band is split between pytest-xdist's workers, and each handed-out port is held
  by a lock file for the life of the test process, so two test runs on one machine never share
  one. Its start is retried on "address in use" (:func:`start_with_retry`), and a failure names
  the process holding the port (:func:`port_holder`).

The demo's fixed ports (8443, 9083, 9464) lie outside the band.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["BAND", "PortInUse", "port_holder", "reserve_port", "start_with_retry", "worker_block"]

#: Ports handed out to test servers: below Linux's default ephemeral range (32768-60999), above
#: the registered ports most daemons use.
BAND = range(20000, 32000)

_LOCK_DIR = Path(os.environ.get("HMS_GATEWAY_TEST_PORT_LOCKS", "/tmp/hms-gateway-test-ports"))
_held: dict[int, int] = {}  # port -> file descriptor of its lock, kept open until the process exits
_next: dict[str, int] = {}

T = TypeVar("T")


class PortInUse(RuntimeError):
    """A server could not bind its port; ``str()`` names the port and its holder."""


def worker_block(worker: str | None = None, workers: int | None = None) -> range:
    """The part of :data:`BAND` that xdist worker ``worker`` (``gw0``, ``gw1``...; None: this
    process's ``PYTEST_XDIST_WORKER``, the whole band outside xdist) hands out, one of
    ``workers`` (default ``PYTEST_XDIST_WORKER_COUNT``) equal, disjoint blocks."""
    worker = worker if worker is not None else os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return BAND
    count = workers if workers is not None else int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker.removeprefix("gw"))
    size = len(BAND) // max(count, index + 1)
    start = BAND.start + index * size
    return range(start, start + size)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _lock(port: int) -> bool:
    """Take ``port``'s lock file for this process; False when another process holds it."""
    _LOCK_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(_LOCK_DIR / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held[port] = fd
    return True


def reserve_port(span: int = 1, *, block: range | None = None) -> int:
    """The first of ``span`` consecutive ports (a KDC takes several) of this worker's block
    (``block``: another range, for tests of this module) that no other test process has taken
    and nothing listens on now; they stay this process's until it exits. Successive calls never
    return the same port. Raises RuntimeError when the block is used up."""
    block = block if block is not None else worker_block()
    key = f"{block.start}-{block.stop}"
    port = max(_next.get(key, block.start), block.start)
    while port + span <= block.stop:
        taken: list[int] = []
        for candidate in range(port, port + span):
            if candidate not in _held and _lock(candidate):
                taken.append(candidate)
                if _bindable(candidate):
                    continue
            obstacle = candidate
            break
        else:
            _next[key] = port + span
            return port
        for candidate in taken:  # a partial run: give these back, go on after the obstacle
            os.close(_held.pop(candidate))
        port = obstacle + 1
    raise RuntimeError(f"no {span} free consecutive test ports left in {block.start}-{block.stop - 1}")


def port_holder(port: int) -> str:
    """Who listens on TCP ``port`` (any address), as ``pid N (command line)``, from /proc; a
    socket whose process this user cannot see is named by its inode."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if int(local.rsplit(":", 1)[1], 16) == port and state == "0A":  # 0A: LISTEN
                inodes.add(inode)
    if not inodes:
        return f"nothing listens on {port} now"
    holders = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    holders.append(f"pid {proc.name} ({command.strip()[:200]})")
                    break
        except OSError:
            continue
    return "; ".join(holders) or f"a socket (inode {', '.join(sorted(inodes))}) of a process not visible here"


def start_with_retry(start: Callable[[int], T], *, span: int = 1, attempts: int = 3,
                     in_use: Callable[[BaseException], bool] | None = None) -> T:
    """``start(port)`` with a fresh :func:`reserve_port` each time it fails on "address in use"
    (``in_use(exc)`` tells; by default an :class:`OSError` with EADDRINUSE, :class:`PortInUse`
    or a message saying "in use"). ``start`` must stop what it started before it raises. The
    last failure is raised as :class:`PortInUse` naming the port and its holder."""
    def address_in_use(exc: BaseException) -> bool:
        if isinstance(exc, PortInUse):
            return True
        if isinstance(exc, OSError) and exc.errno == 98:
            return True
        return "in use" in str(exc).lower()

    in_use = in_use or address_in_use
    for attempt in range(attempts):
        port = reserve_port(span)
        try:
            return start(port)
        except Exception as exc:
            if not in_use(exc):
                raise
            if attempt == attempts - 1:
                holders = "; ".join(f"{p}: {port_holder(p)}" for p in range(port, port + span))
                raise PortInUse(f"port {port} was in use {attempts} times ({holders}): {exc}") from exc
    raise AssertionError("unreachable")
