"""What an HMS refusal of a commit's ``alter_table`` answers: 409 ``CommitFailedException``
(clients retry it) unless retrying cannot help.

HMS's ``hive.metastore.disallow.incompatible.col.type.changes`` (true by default in Hive 2.3,
``HiveAlterHandler``) refuses an ``alter_table`` whose columns change type at a position, which
an Iceberg schema change that drops or reorders columns does to the HMS copy of the schema.
The same commit fails the same way every time, so it is 400 naming the setting (Iceberg sites
set it false, as Apache PyIceberg's CI Hive and the demo's metastore do).
"""

from __future__ import annotations

from gateway.iceberg import errors

SETTING = "hive.metastore.disallow.incompatible.col.type.changes"
#: The start of ``MetaStoreUtils.throwExceptionIfIncompatibleColTypeChange``'s message.
_INCOMPATIBLE = "The following columns have types incompatible with the existing columns"


def commit_refusal(subject: str, message: str | None) -> errors.IcebergError:
    """The answer to HMS refusing the commit of ``subject`` (``"db.name"``, ``"view db.name"``)
    with ``message`` (its exception's text, which is safe to quote: HMS's own validation)."""
    text = (message or "").strip()
    if text.startswith(_INCOMPATIBLE):
        columns = text.partition(":")[2].replace("\n", " ").strip()[:500]
        return errors.BadRequest(
            f"the Hive Metastore refused the schema change of {subject}: its {SETTING} is true and "
            f"the change moves columns of different types ({columns}); set it to false in the "
            "metastore's hive-site.xml (docs/iceberg.md, \"Schema changes and HMS\")")
    return errors.CommitFailed(f"the Hive Metastore refused the commit of {subject}: {text}")
