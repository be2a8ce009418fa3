"""What a worker process knows of its place among the workers (gateway/workers.py starts them;
each runs a :class:`gateway.server.Gateway` given its role)."""

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
