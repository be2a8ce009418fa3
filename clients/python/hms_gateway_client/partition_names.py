"""Hive's partition names, as ``Warehouse.makePartName`` (Hive 2.3) makes them: the data
source's ``partitions`` rows name each partition so, and the demo creates partition directories
under them before HMS would."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["partition_name"]


def partition_name(keys: Sequence[str], values: Sequence[str]) -> str:
    """Hive's partition name and directory, ``k1=v1/k2=v2``, with ``FileUtils.escapePathName``
    escaping (``%XX``, upper-case hex) of keys and values; an empty value is Hive's default
    partition name. Follows ``Warehouse.makePartName`` (Hive 2.3) on a non-Windows host."""
    return "/".join(f"{_escape_path_name(k)}={_escape_path_name(v)}" for k, v in zip(keys, values, strict=True))


_DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = frozenset(chr(c) for c in range(0x20)) | frozenset('"#%\'*/:=?\\\x7f{[]^')


def _escape_path_name(text: str) -> str:
    if not text:
        return _DEFAULT_PARTITION_NAME
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)
