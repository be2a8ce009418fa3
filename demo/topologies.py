"""Rewriting the demo's topologies for a demo mode (``--storage s3``, ``--kerberos``): each
topology of ``config/topologies`` loaded, each service edited, written to the mode's own dir."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

__all__ = ["rewrite_topologies"]


def rewrite_topologies(source: Path, target: Path, edit: Callable[[dict], None], why: str) -> Path:
    """Write every topology of ``source`` (a ``topologies_dir``) into ``target`` (emptied of
    topology files first), after ``edit(service)`` changed each service's dict in place; returns
    ``target``. The files are the loaded topologies (relative paths made absolute, so they work
    from ``target``), each headed by a comment naming its source and ``why`` it was rewritten.
    Raises :class:`gateway.config.ConfigError` for a bad source file."""
    from gateway.config import load_topologies, topology_files

    target.mkdir(parents=True, exist_ok=True)
    for stale in topology_files(target):
        stale.unlink()
    for name, topology in load_topologies(source).items():
        data = topology.model_dump(mode="json", exclude={"name", "source"}, exclude_unset=True)
        for service in data["services"]:
            edit(service)
        header = (f"# Written by `python -m demo` from {topology.source} at each start,\n"
                  f"# with {why}: edit that file instead.\n")
        (target / f"{name}.yaml").write_text(header + yaml.safe_dump(data, sort_keys=False))
    return target
