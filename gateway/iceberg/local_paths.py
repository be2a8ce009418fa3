"""Local warehouse paths (``file:`` locations) as the gateway's files take them: literally,
never percent-decoded; and the two things a client of a local warehouse could plant in its own
folders to steer the gateway's reads, writes and deletes: a symbolic link (:func:`linked`) and
something that is not a regular file, such as a FIFO (:func:`irregular`). Object stores have
neither, so other schemes are always fine here.
"""

from __future__ import annotations

import os
import stat
from urllib.parse import urlsplit


def local_path(location: str | None) -> str | None:
    """The local path of a ``file:`` location (or a bare absolute path), else None. Taken as
    the gateway's FileIO (:mod:`gateway.lakehouse.file_io`) and HMS take it: literally, never percent-decoded (so
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
