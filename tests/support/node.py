"""Node.js for the tests that run JavaScript clients (``tests/node``: the pinned npm ``thrift``)."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["NODE_DIR", "tool"]

#: The Node.js test scripts and their ``package.json`` / ``node_modules``.
NODE_DIR = Path(__file__).resolve().parents[1] / "node"


def tool(name: str) -> str:
    """The path of the program ``name`` (``node``, ``npm``, ``thrift``); RuntimeError naming the
    install script when it is missing."""
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} is missing: run scripts/install-system-deps.sh (nodejs, npm, thrift-compiler)")
    return path
