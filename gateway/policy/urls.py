"""Ranger Hive's ``url`` resource: which storage locations a policy covers.

Hive asks Ranger for ``url`` access (``read``/``write`` on the URI) when a statement names a
location itself (``CREATE TABLE ... LOCATION``, ``ALTER TABLE ... SET LOCATION``, ``LOAD DATA``,
``IMPORT``/``EXPORT``); the gateway asks the same when a client names one (an Iceberg table,
view or namespace location, a registered metadata file). Matching follows Ranger's Hive service
definition for ``url`` (``RangerURLResourceMatcher``, wildcards on, case-sensitive):

* a value is a location with ``*`` (any run, ``/`` included) and ``?`` (one character);
* without ``isRecursive`` a value matches the location it names only; with it, that location
  and everything below it (at a ``/`` boundary: ``s3://b/sales`` does not cover
  ``s3://b/sales2``);
* both sides are compared in one form (:func:`normal_url`): scheme lower-cased (``s3a``/``s3n``
  as ``s3``, :data:`SAME_SCHEME`), ``file:/x``, ``file:///x`` and a bare ``/x`` alike, no
  trailing ``/``.

Placing storage at a location (a table's or partition's location, an Iceberg metadata file, a
namespace's location) asks for both of :data:`PLACING`, on every protocol:
:meth:`gateway.policy.view.CatalogView.url_refusal`. A location with a ``.`` or ``..`` segment
(also percent-encoded) is refused there (:func:`dot_segment`): the match reads it as text while
storage resolves it (``s3://b/mine/../theirs``).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["PLACING", "SAME_SCHEME", "UrlMatcher", "dot_segment", "normal_url"]

#: The ``url`` accesses placing storage at a location needs: Hive asks both for ``CREATE TABLE
#: ... LOCATION``, Ranger's HMS authorizer (``HiveMetaStoreAuthorizer``) for a location a create
#: or alter sets.
PLACING = ("read", "write")

#: Schemes that name the same store as another (Hadoop's S3 connectors, Azure's TLS variants).
SAME_SCHEME = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "wasbs": "wasb", "abfss": "abfs"}


def normal_url(value: str) -> str:
    """``value`` in the one form both a policy's values and a request's location take:
    ``file:///x`` for ``/x``, ``file:/x`` and ``file:///x``; the scheme lower-cased; no
    trailing ``/`` (but for a root)."""
    if value.startswith("/"):
        value = "file://" + value
    scheme, sep, rest = value.partition(":")
    if sep and scheme and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        scheme = scheme.lower()
        scheme = SAME_SCHEME.get(scheme, scheme)
        if scheme == "file" and not rest.startswith("//"):
            rest = "//" + rest
        value = f"{scheme}:{rest}"
    stripped = value.rstrip("/")
    return stripped if stripped and not stripped.endswith(":") else value


def dot_segment(location: str) -> bool:
    """Whether ``location``'s path has a ``.`` or ``..`` segment, also percent-encoded (or
    behind an encoded ``/``): Hadoop's ``Path`` and local files resolve them, a ``url`` match
    does not."""
    path = location.partition("://")[2].partition("/")[2] if "://" in location else location
    return any(segment in (".", "..") for segment in unquote(path).split("/"))


def _regex(value: str) -> str:
    return re.escape(value).replace(r"\*", ".*").replace(r"\?", ".")


class UrlMatcher:
    """The ``url`` values of one policy, compiled to one regex."""

    __slots__ = ("regex",)

    def __init__(self, values: tuple[str, ...], recursive: bool):
        alternatives = []
        for value in values:
            value = normal_url(value)
            if recursive:
                if value.endswith("/*"):  # 's3://b/x/*' recursive is 's3://b/x' and below
                    value = value[:-2]
                base = value.rstrip("/")  # a root ('file:///') is everything below 'file://'
                alternatives.append(_regex(base) + ("" if base.endswith("*") else "(?:/.*)?"))
            else:
                alternatives.append(_regex(value))
        self.regex = re.compile("|".join(f"(?:{a})" for a in alternatives) or "(?!)", re.DOTALL)

    def match(self, url: str) -> bool:
        """Whether ``url`` (in :func:`normal_url` form) is covered."""
        return self.regex.fullmatch(url) is not None
