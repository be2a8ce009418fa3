"""Finding the servers a test session started and did not stop.

Every process the suite starts inherits :data:`SESSION_ENV` (set once per ``pytest`` run by
``tests/conftest.py``) and, under pytest-xdist, the worker's ``PYTEST_XDIST_WORKER``. A server
that outlives its session still carries both in ``/proc/<pid>/environ``, even after its parent
died and it was re-parented to init (an ActiveMQ broker whose fixture failed half-way).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SESSION_ENV", "Leftover", "leftovers", "reap"]

SESSION_ENV = "HMS_GATEWAY_TEST_SESSION"


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid}: {self.command}"


def _ancestors(pid: int) -> set[int]:
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return seen


def leftovers(session: str, worker: str | None) -> list[Leftover]:
    """Live processes (zombies excluded) whose environment has ``SESSION_ENV=session`` and
    ``PYTEST_XDIST_WORKER=worker`` (absent when ``worker`` is None), other than this process
    and its ancestors."""
    mine = {f"{SESSION_ENV}={session}".encode()}
    exclude = _ancestors(os.getpid())
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in exclude:
            continue
        try:
            environ = set((proc / "environ").read_bytes().split(b"\0"))
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        workers = {e for e in environ if e.startswith(b"PYTEST_XDIST_WORKER=")}
        expected = {f"PYTEST_XDIST_WORKER={worker}".encode()} if worker else set()
        # a zombie has no command line; multiprocessing's helpers (the resource tracker) end
        # with the interpreter that started them, this one
        if mine <= environ and workers == expected and command and "from multiprocessing." not in command:
            found.append(Leftover(int(proc.name), command[:300]))
    return found


def reap(session: str, worker: str | None, grace: float = 15.0) -> list[Leftover]:
    """Wait up to ``grace`` seconds for the session's processes to exit (a server stopped a
    moment ago may still be on its way out); kill what remains and return it (empty: none)."""
    deadline = time.monotonic() + grace
    while (found := leftovers(session, worker)) and time.monotonic() < deadline:
        time.sleep(0.5)
    for leftover in found:
        try:
            os.kill(leftover.pid, signal.SIGKILL)
        except OSError:
            pass
    return found
