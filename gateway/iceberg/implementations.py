"""Properties a client may not set: those that name code, and those that configure a reader's
storage client. Both are refused on every route that takes properties.

**Code.** PyIceberg imports and calls whatever a few properties name (``py-io-impl`` in
``load_file_io``, ``write.py-location-provider.impl`` in ``load_location_provider``,
``s3.retry-strategy-impl`` in its PyArrow FileIO), and Java Iceberg does the same for
``io-impl``, ``catalog-impl``, ``lock-impl``, ``metrics-reporter-impl``,
``write.location-provider.impl``, ``client.factory``, ``client.credentials-provider`` and more;
and a table's properties become its HMS parameters (PyIceberg's ``_construct_parameters``),
where Hive reads ``storage_handler`` as the class that reads and writes the table (its JDBC
handler connects wherever ``hive.sql.jdbc.url`` says). The gateway builds its FileIO and
location provider from the service's options alone (:mod:`gateway.iceberg.files`), so such a
property would not choose the gateway's code; it is refused anyway (400 ``BadRequestException``)
on create table, commit, create/replace view, namespace create/update, register and
transactions: a table carrying one hands every engine that loads it the code its writer chose.
The rule is by the key's shape, not a list, so a new implementation key is refused before
anyone names it: the last ``.``-separated segment of the lower-cased key is, or ends in ``-``/``_``
followed by, one of :data:`CODE_WORDS` (``impl``, ``factory``, ``class``,
``credentials-provider``, ``handler``).

**Storage clients.** PyIceberg's ``RestCatalog`` builds the FileIO of a loaded table from the
table's properties with the answer's ``config`` over them, so a writer's ``s3.endpoint``,
``s3.proxy-uri`` or ``s3.signer.uri`` would send every other reader's storage requests (their
credentials' signatures, the gateway's vended tokens) wherever the writer chose, and a key
stored there is handed to every reader. Storage settings belong to the catalog's answer, not to
a table: a key in one of PyIceberg's FileIO namespaces, :data:`STORAGE_NAMESPACES` (``s3.``,
``gcs.``, ``adls.``, ``hdfs.``, ``hf.``, ``client.``), is refused the same way.

``tests/unit/test_iceberg_implementations.py`` reads PyIceberg's installed source for
property-driven imports and for its FileIO keys, and fails when one is not refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gateway.iceberg import errors

__all__ = ["CODE_WORDS", "STORAGE_NAMESPACES", "configures_storage", "names_code", "refuse_reserved"]

#: Words that, closing a property key, make it name an implementation (a class or a function).
CODE_WORDS = ("impl", "factory", "class", "credentials-provider", "handler")
# the last '.'-separated part is a word, or ends in '-'/'_' and a word (one pass over the key)
_CODE_KEY = re.compile(r"(?:^|[._-])(?:" + "|".join(map(re.escape, CODE_WORDS)) + r")$", re.IGNORECASE)


#: The first ``.``-separated segments of the keys PyIceberg's FileIO reads (``pyiceberg.io``).
STORAGE_NAMESPACES = frozenset({"s3", "gcs", "adls", "hdfs", "hf", "client"})


def names_code(key: str) -> bool:
    """Whether the property ``key`` names code to import (see the module docstring)."""
    return _CODE_KEY.search(key.strip()) is not None


def configures_storage(key: str) -> bool:
    """Whether the property ``key`` is a storage client's setting (see the module docstring)."""
    return key.strip().split(".", 1)[0].lower() in STORAGE_NAMESPACES and "." in key


def refuse_reserved(keys: Iterable[str], where: str) -> None:
    """Raise :class:`~errors.BadRequest` naming the first key of ``keys`` that names code or
    configures a storage client (``where``: what holds the properties, for the message)."""
    for key in keys:
        if not isinstance(key, str):
            continue
        if names_code(key):
            raise errors.BadRequest(f"{where}: property {key[:100]!r} names an implementation to load; "
                                    "the catalog never takes code from a client")
        if configures_storage(key):
            raise errors.BadRequest(f"{where}: property {key[:100]!r} configures a storage client; readers "
                                    "get storage settings from the catalog, not from a table's properties")
