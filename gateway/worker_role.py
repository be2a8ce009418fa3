"""What a worker process knows of its place among the workers (gateway/workers.py starts them;
each runs a :class:`gateway.server.Gateway` given its role), and :func:`current_worker` for
code below the server that must act once per gateway, not once per worker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WorkerRole:
    """A worker's index (0..N-1), the shared gateway port, and the supervisor's runtime
    directory (Unix sockets, metric files)."""

    index: int
    port: int
    runtime_dir: Path

    @property
    def management_socket(self) -> Path:
        """The worker's management app (``/readyz`` for the supervisor)."""
        return self.runtime_dir / f"worker-{self.index}.sock"

    @property
    def control_socket(self) -> Path:
        """The supervisor's control app (throttle budgets, start-up reports)."""
        return self.runtime_dir / "supervisor.sock"


_current_worker: int | None = None


def current_worker() -> int | None:
    """This process's worker index (0..N-1), or None when it is not a worker (``workers: 1``).

    For work that must happen once per gateway, not once per worker (e.g. publishing the change
    feed to a broker): do it where this is None or 0.
    """
    return _current_worker


def enter_worker(role: WorkerRole) -> None:
    """Record that this process is the worker ``role`` (:func:`gateway.workers.worker_main`)."""
    global _current_worker
    _current_worker = role.index
