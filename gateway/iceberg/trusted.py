"""Reading a table through a row filter, a column mask or with columns denied to the caller
(issues 22, 39, 49): an Iceberg load result carries the whole schema and leads to every data
file, so the gateway cannot remove rows or values from it; such a table loads only for a
**trusted engine**, one that enforces the restrictions itself, as AWS Glue's
``GetUnfilteredTableMetadata`` answers whole tables to the engines Lake Formation trusts (the
``glue`` kind's ``trusted_engines``, same concept and shape). The Iceberg REST spec's trust model
is the same: a catalog sends restrictions only to the readers it trusts.

The engine is the principal that asked: a ``doAs`` impersonator (Trino or Spark acting for a
user), else the effective user. The restrictions are the effective user's: the row filter and
masks of Ranger's row-filter and data-mask policies, and the columns Ranger's column-level Hive
check denies (:class:`~gateway.policy.view.CatalogView`).

* :func:`restricted` (the ``denied-columns`` rule) and :func:`filtered` (the
  ``row-filter-and-masks`` rule) refuse anyone but a trusted engine, 403 saying why; both are
  named on the route rows that read or hand out a table's storage (:mod:`gateway.iceberg.access`)
  and run before the handler.
* :func:`stated` writes them into a load result (the answers of load, create, register and
  commit: :func:`gateway.iceberg.access.state`) as the spec's ``read-restrictions``
  (:mod:`gateway.policy.read_restrictions`), with ``scan-planning-mode: server`` in its
  ``config``; :func:`required` gives them to scan planning; :func:`fingerprint` is what a
  load's ``ETag`` covers of them.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from pyiceberg.schema import Schema

from gateway.iceberg import errors
from gateway.iceberg.catalog import Catalog
from gateway.iceberg.objects import LoadTableResult
from gateway.policy.restrictions import TableRestrictions

log = logging.getLogger(__name__)

#: What a restricted table's load result adds to its ``config``: the client must plan on the
#: server (``planTableScan``), which binds the plan to the restrictions; it never needs the
#: manifests and their column statistics.
SCAN_PLANNING = {"scan-planning-mode": "server"}


def engine(catalog: Catalog) -> str:
    """The principal that asked: the ``doAs`` impersonator, else the effective user."""
    identity = getattr(catalog.client, "identity", None)
    return (identity.impersonator if identity is not None and identity.impersonator else None) or catalog.user


def restricted(catalog: Catalog, db: str, name: str) -> bool:
    """Whether some column of ``db.name`` is denied to the caller. Raises
    :class:`~errors.Forbidden` when so and the caller is no trusted engine."""
    if catalog.view.all_columns(db, name):
        return False
    _require_trusted(catalog, f"{catalog.user} may not read every column of {db}.{name}: a table with "
                              "denied columns", "the read restrictions")
    return True


def _require_trusted(catalog: Catalog, what: str, enforced: str) -> None:
    """Raises :class:`~errors.Forbidden` (``what`` ... ``enforced``) unless a trusted engine asks."""
    asker = engine(catalog)
    if asker not in catalog.service.trusted_engines:
        raise errors.Forbidden(f"{what} loads only for a trusted engine of this catalog, which enforces "
                               f"{enforced} itself, and {asker} is not one")


def _columns(hive) -> tuple[list[str] | None, dict[str, str]]:
    """The HMS table's column names (None: not known) and their Hive types."""
    fields = (hive.sd.cols if hive is not None and hive.sd else None) or ()
    return ([f.name for f in fields] if fields else None), {f.name: f.type for f in fields if f.type}


def filtered(catalog: Catalog, db: str, name: str, hive=None) -> TableRestrictions:
    """The row filter and masks that apply to the caller on ``db.name`` (the columns of
    ``hive``, the HMS table, when given; else the columns the mask policies name). Raises
    :class:`~errors.Forbidden` when one applies and the caller is no trusted engine, or when a
    mask has no expression the gateway can state (a type without a transformer): fail closed."""
    found = catalog.view.restrictions(db, name, *_columns(hive))
    if not found.applies:
        return found
    _require_trusted(catalog, f"{catalog.user} reads {db}.{name} through a row filter or column mask "
                              f"({found.describe()}): such a table (and storage access to it)",
                     "them")
    unstated = [column for column, mask in found.masks.items() if mask.expression is None]
    if unstated:
        raise errors.Forbidden(
            f"the mask on {', '.join(unstated)} of {db}.{name} has no expression this catalog can "
            f"state for an engine ({found.describe()})")
    return found


def fingerprint(catalog: Catalog, db: str, name: str, hive) -> str:
    """What restricts the caller's reads of ``db.name`` (``hive``, its HMS table), as text: the
    row filter and masks with their policies, and the denied columns; ``""`` when nothing does.
    A load's ``ETag`` covers it, so a change of policy changes the tag (the ``read-restrictions``
    stated are a function of it and of the metadata file's schema)."""
    from gateway.policy.read_restrictions import denied_columns

    names, types = _columns(hive)
    found = catalog.view.restrictions(db, name, names, types)
    denied = denied_columns(catalog.view, db, name, names or [])
    if not found.applies and catalog.view.all_columns(db, name):
        return ""
    return repr((found, denied))


def required(catalog: Catalog, db: str, name: str, schema: Schema, hive=None) -> dict | None:
    """The spec's ``read-restrictions`` (``required-row-filter``, ``required-column-projections``:
    :func:`gateway.policy.read_restrictions.read_restrictions`) binding the caller on ``db.name``
    over ``schema`` (a schema of the table; ``hive`` its HMS table, for the Hive types of a
    mask's ``{colType}``), None when nothing restricts. Raises :class:`~errors.Forbidden` (403)
    naming the policy, the column or part, and the type, when one cannot be stated: fail closed."""
    from gateway.policy.hive_sql import Unstatable  # sqlglot: imported when a policy restricts
    from gateway.policy.read_restrictions import caller_restrictions

    try:
        return caller_restrictions(catalog.view, db, name, schema, _columns(hive)[1])
    except Unstatable as exc:
        raise errors.Forbidden(f"{db}.{name} cannot be read by {catalog.user} through this catalog: {exc}") from None


#: Verdicts of :func:`statable`, at most :data:`_VERDICTS` kept, least recently used out: key
#: (caller, engine, table, metadata file, what restricts) → the refusal's message, or None.
_verdicts: OrderedDict[tuple, str | None] = OrderedDict()
_VERDICTS = 4096


async def statable(catalog: Catalog, db: str, name: str, hive) -> None:
    """Raise :class:`~errors.Forbidden` (403, as :func:`required`) when the restrictions binding
    the caller on ``db.name`` (``hive``, its HMS table) cannot be stated over its current schema:
    every route that hands out the table's storage (credentials, signatures, plans, metrics) is
    refused as its load is, so a trusted engine never reads a table whose restrictions it was not
    told. Nothing is read for a table that restricts nothing; a verdict is kept per caller,
    metadata file and policy (:func:`fingerprint`), so the signer reads the metadata once."""
    what = fingerprint(catalog, db, name, hive)
    if not what:
        return
    key = (catalog.user, engine(catalog), db, name, (hive.parameters or {}).get("metadata_location"), what)
    if key in _verdicts:
        _verdicts.move_to_end(key)
        refusal = _verdicts[key]
    else:
        _, metadata = await catalog.metadata(hive)
        try:
            required(catalog, db, name, metadata.schema(), hive)
            refusal = None
        except errors.Forbidden as refused:
            refusal = refused.message
        _verdicts[key] = refusal
        while len(_verdicts) > _VERDICTS:
            _verdicts.popitem(last=False)
    if refusal is not None:
        raise errors.Forbidden(refusal)


def stated(catalog: Catalog, db: str, name: str, result: LoadTableResult, hive=None, *,
           written: bool = False) -> LoadTableResult:
    """``result`` (a load result of ``db.name``) with the caller's ``read-restrictions`` over its
    metadata's current schema and :data:`SCAN_PLANNING` in its ``config``; ``result`` itself
    when nothing restricts. Raises :class:`~errors.Forbidden` as :func:`required`. For the answer
    of a change already ``written`` (a commit, a create), whose 403 would read as a change that
    failed, the answer instead binds its reader to no rows (``required-row-filter: false``) and
    the reason is logged; the table's next load is refused saying it (403)."""
    try:
        restrictions = required(catalog, db, name, result.metadata.schema(), hive)
    except errors.Forbidden as refused:
        if not written:
            raise
        log.warning("the answer of a change of %s.%s binds its reader to no rows: %s", db, name, refused.message)
        restrictions = {"required-row-filter": False}
    if restrictions is None:
        return result
    return result.model_copy(update={"read_restrictions": restrictions, "config": {**result.config, **SCAN_PLANNING}})
