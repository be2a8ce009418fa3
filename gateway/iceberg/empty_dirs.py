"""Directories a drop leaves empty on a local warehouse (``file:`` locations), removed: a purged
table's ``metadata/`` and ``data/`` trees and its location, a dropped namespace's location.

Object stores have no directories, so other schemes are left alone. Only empty directories go
(``os.rmdir`` refuses any other, so a file written meanwhile by someone else is never lost), only
at or below the location dropped, and symbolic links are never followed (nor is a location
reached through one below an allowed location, :func:`~gateway.iceberg.local_paths.linked`).
"""

from __future__ import annotations

import asyncio
import logging
import os

from gateway.iceberg.local_paths import linked, local_path

log = logging.getLogger(__name__)


def _prune(root: str, below: bool) -> int:
    removed = 0
    if below:
        for parent, dirs, _files in os.walk(root, topdown=False, followlinks=False):
            for name in dirs:
                path = os.path.join(parent, name)
                if os.path.islink(path):
                    continue
                try:
                    os.rmdir(path)
                    removed += 1
                except OSError:  # not empty, or gone
                    pass
    try:
        if not os.path.islink(root):
            os.rmdir(root)
            removed += 1
    except OSError:
        pass
    return removed


async def remove_empty(location: str | None, *, below: bool) -> int:
    """Remove the directory at ``location`` when it is empty (``below``: first every empty
    directory under it, deepest first). Returns how many were removed; never raises (a
    directory left behind is logged, not the client's error)."""
    root = local_path(location)
    if root is None or not os.path.isdir(root) or linked(location, location):  # reached through a link
        return 0
    try:
        return await asyncio.to_thread(_prune, root, below)
    except Exception:  # noqa: BLE001 - best effort after the drop succeeded
        log.warning("could not remove empty directories below %s", root, exc_info=True)
        return 0
