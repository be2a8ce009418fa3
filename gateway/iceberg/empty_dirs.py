"""Directories a drop leaves empty on a local warehouse (``file:`` locations), removed: a purged
table's ``metadata/`` and ``data/`` trees and its location, a dropped namespace's location.

Object stores have no directories, so other schemes are left alone. Only empty directories go
(``os.rmdir`` refuses any other, so a file written meanwhile by someone else is never lost), only
at or below the location dropped, and symbolic links are never followed (nor is a location
reached through one below an allowed location, :func:`linked`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from urllib.parse import urlsplit

log = logging.getLogger(__name__)


def local_path(location: str | None) -> str | None:
    """The local path of a ``file:`` location (or a bare absolute path), else None. Taken as
    PyIceberg's PyArrow FileIO and HMS take it: literally, never percent-decoded (so
    ``file:///wh/sec_%62.db`` is not ``/wh/sec_b.db``)."""
    if not location:
        return None
    parts = urlsplit(location)
    if parts.scheme in ("", "file") and not parts.netloc:
        return parts.path if os.path.isabs(parts.path) else None
    return None


def irregular(location: str) -> bool:
    """Whether the local ``location`` names something other than a regular file (a FIFO, which
    would block its reader forever, a device such as ``/dev/zero``, a link, a folder); False
    when it is missing or not local."""
    local = local_path(location)
    if local is None:
        return False
    try:
        return not stat.S_ISREG(os.lstat(local).st_mode)
    except OSError:
        return False


#: Local allowed locations (a service's warehouse, its ``allowed_locations``) seen so far
#: (:func:`anchor`): below one, no symbolic link is taken, whoever made it.
_ANCHORS: set[str] = set()


def anchor(location: str) -> None:
    """Note ``location``, an allowed location of a service, for :func:`linked` (object stores
    are ignored)."""
    local = local_path(location)
    if local is not None:
        _ANCHORS.add(local.rstrip("/") or "/")


def linked(path: str, root: str) -> bool:
    """Whether a symbolic link stands between ``path`` (itself included) and the outermost
    allowed location holding it (:func:`anchor`; that location itself, the administrator's, is
    not looked at), or, outside any, the location ``root`` (included) below which ``path``
    lies: a file reached through it may lie anywhere, another table's folder too. On a local
    warehouse clients write their own files, so they could make one. False for locations that
    are not local (object stores have no links)."""
    local, home = local_path(path), local_path(root)
    if local is None or home is None:
        return False
    local = local.rstrip("/") or "/"
    holding = [a for a in _ANCHORS if local.startswith(a.rstrip("/") + "/")]
    stop = min(holding, key=len) if holding else os.path.dirname(home.rstrip("/") or "/")
    folder = local
    while len(folder) > len(stop) and folder != "/":
        if os.path.islink(folder):
            return True
        folder = os.path.dirname(folder)
    return False


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
