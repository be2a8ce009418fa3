"""What an HMS refusal of a commit's ``alter_table`` answers, for a single commit
(gateway/iceberg/commit.py) and a transaction (gateway/iceberg/transactions.py): 409
``CommitFailedException`` (clients retry it) unless retrying cannot help.

HMS's ``hive.metastore.disallow.incompatible.col.type.changes`` (true by default in Hive 2.3,
``HiveAlterHandler``) refuses an ``alter_table`` that puts at a position a column whose type the
old one's does not convert to (a ``double`` where a ``struct`` was, for one), which an Iceberg
schema change that drops or reorders columns can do to the HMS copy of the schema.
The same commit fails the same way every time, so it is 400 naming the setting (Iceberg sites
set it false, as Apache PyIceberg's CI Hive and the demo's metastore do).
"""

from __future__ import annotations

import logging

from gateway.iceberg import errors

log = logging.getLogger(__name__)

SETTING = "hive.metastore.disallow.incompatible.col.type.changes"
#: The start of ``MetaStoreUtils.throwExceptionIfIncompatibleColTypeChange``'s message.
_INCOMPATIBLE = "The following columns have types incompatible with the existing columns"


def column_refusal(subject: str, message: str | None) -> str | None:
    """The client's message when ``message`` (an HMS exception's text) is HMS's column-type
    refusal of the commit of ``subject``, else None. HMS's text is quoted only here: it is HMS's
    own validation naming the columns, no Java exception."""
    text = (message or "").strip()
    if not text.startswith(_INCOMPATIBLE):
        return None
    columns = text.partition(":")[2].replace("\n", " ").strip()[:500]
    return (f"the Hive Metastore refused the schema change of {subject}: its {SETTING} is true and "
            f"the change moves columns of different types ({columns}); set it to false in the "
            "metastore's hive-site.xml (docs/iceberg.md, \"Schema changes and HMS\")")


def commit_refusal(subject: str, message: str | None) -> errors.IcebergError:
    """The answer to HMS refusing the commit of ``subject`` (``"db.name"``, ``"view db.name"``)
    with ``message`` (its exception's text): :class:`~errors.BadRequest` for the column-type
    refusal, else :class:`~errors.CommitFailed` in the gateway's words (HMS's text is logged)."""
    column = column_refusal(subject, message)
    if column is not None:
        return errors.BadRequest(column)
    log.info("the Hive Metastore refused the commit of %s: %s", subject, (message or "")[:1000])
    return errors.CommitFailed(f"the Hive Metastore refused the commit of {subject}")
