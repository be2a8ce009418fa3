"""Tables are HMS tables with ``table_type=ICEBERG`` and ``metadata_location`` (Iceberg's
HiveCatalog layout, :mod:`gateway.iceberg.hive_tables`): list, create (also ``stage-create``:
the metadata is answered, nothing is stored), load, exists, drop, rename. Commits, and the
commit with ``assert-create`` that creates a staged table, are :mod:`gateway.iceberg.commit`. A Hive table that is not Iceberg is not
listed, and naming it is 404 saying so.
"""

from __future__ import annotations

import hashlib
import json
import logging

from aiohttp import hdrs, web

from pyiceberg.catalog.hive import DEFAULT_PROPERTIES
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

from gateway.iceberg import errors, trusted
from gateway.iceberg.catalog import Catalog, Reply
from gateway.iceberg.delegation import delegated
from gateway.iceberg.files import next_metadata_location
from gateway.iceberg.hive_tables import is_iceberg, new_table
from gateway.iceberg.implementations import refuse_code
from gateway.iceberg.locations import check_properties, check_purge, check_table, default_location
from gateway.iceberg.namespaces import paged
from gateway.iceberg.bodies import CLIENT_FAULTS, CreateTableRequest, RenameTable, parse
from gateway.iceberg.paths import Route, hms_name, namespace_name
from gateway.iceberg.empty_dirs import remove_empty

log = logging.getLogger(__name__)
SNAPSHOT_MODES = ("all", "refs")


def load_result(location: str | None, metadata: TableMetadata, delegation: tuple[dict, list] = ({}, [])) -> bytes:
    """The spec's ``LoadTableResult`` as JSON bytes: ``metadata-location`` (left out for a
    staged table, which has none yet), ``metadata`` (as PyIceberg writes metadata files),
    ``config`` and ``storage-credentials`` (``delegation``, :mod:`gateway.iceberg.delegation`)."""
    head = b"{" if location is None else b'{"metadata-location":' + _json_string(location) + b","
    config, credentials = delegation
    tail = b',"storage-credentials":' + json.dumps(credentials).encode() if credentials else b""
    return (head + b'"metadata":' + metadata.model_dump_json().encode() + b',"config":'
            + json.dumps(config).encode() + tail + b"}")


def _json_string(value: str) -> bytes:
    return json.dumps(value).encode()


def etag(location: str, snapshots: str) -> str:
    """A strong ``ETag`` of a load result: it changes with the metadata file and the
    ``snapshots`` mode (a commit always writes a new file)."""
    return '"' + hashlib.sha256(f"{location}\n{snapshots}".encode()).hexdigest()[:40] + '"'


def _not_modified(if_none_match: str | None, tag: str) -> bool:
    if not if_none_match:
        return False
    candidates = [c.strip().removeprefix("W/") for c in if_none_match.split(",")]
    return "*" in candidates or tag in candidates


async def list_tables(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    return await listing(catalog, route.db(), request.query, is_iceberg, "listTables")


async def listing(catalog: Catalog, db: str, query, keep, operation: str) -> Reply:
    """The spec's ``ListTablesResponse`` of ``db``'s HMS tables that ``keep`` (a predicate on
    the HMS ``Table``: Iceberg tables, Iceberg views), paged as ``operation``. Names the user
    may not see are dropped before their objects are read. Raises ``NoSuchNamespace``,
    ``Forbidden``, ``BadRequest`` (paging)."""
    paged([], operation, [db], query)  # a bad pageSize or pageToken is refused before HMS is asked
    catalog.require("", db)
    await catalog.database(db)
    names = catalog.view.visible_tables(db, await catalog.client.call("get_all_tables", db_name=db))
    tables = await catalog.client.call("get_table_objects_by_name", dbname=db, tbl_names=names) if names else []
    kept = {t.tableName for t in tables if keep(t)}
    chosen, token = paged([n for n in names if n in kept], operation, [db], query)
    # The spec's PageToken is nullable: null says this is the last page (or the whole listing).
    return Reply(body={"identifiers": [{"namespace": [db], "name": n} for n in chosen], "next-page-token": token})


async def create_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """Create ``db.<name>``, with storage access as the request's delegation header asks."""
    db = route.db()
    ask = parse(CreateTableRequest, body)
    name = hms_name(ask.name, "table")
    catalog.named(db, name)
    refuse_code(ask.properties, f"table {db}.{name}")
    catalog.require("create", db)
    database = await catalog.database(db)
    idl = catalog.idl
    await catalog.absent(db, name)
    location = default_location(database, name) if ask.location is None else ask.location.rstrip("/")
    await check_table(catalog, db, name, location, database)
    try:
        metadata = new_table_metadata(
            schema=ask.table_schema,
            partition_spec=ask.partition_spec or UNPARTITIONED_PARTITION_SPEC,
            sort_order=ask.write_order or UNSORTED_SORT_ORDER,
            location=location, properties={**DEFAULT_PROPERTIES, **ask.properties},
        )
    except CLIENT_FAULTS as exc:
        raise errors.BadRequest(f"invalid table definition: {str(exc)[:500]}") from None
    check_properties(metadata.location, metadata.properties, f"table {db}.{name}")
    if ask.stage_create:  # nothing stored: the commit with assert-create creates it
        return Reply(body=load_result(None, metadata))
    metadata_location = next_metadata_location(metadata, None)
    await catalog.files.write(metadata, metadata_location)
    table = new_table(idl, db, name, catalog.user, metadata, metadata_location, catalog.service.hive2_compatible)
    await catalog.create(db, name, table, metadata_location)
    delegation = await delegated(catalog, request, db, name, location)
    return Reply(body=load_result(metadata_location, metadata, delegation))


async def load_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    """Load ``db.name``, with storage access as the request's delegation header asks; 304 for
    an ``If-None-Match`` that names the answer's ``ETag``."""
    db, name = route.db_table()
    if_none_match = request.headers.get(hdrs.IF_NONE_MATCH)
    snapshots = request.query.get("snapshots", "all")
    if snapshots not in SNAPSHOT_MODES:
        raise errors.BadRequest(f"snapshots must be all or refs, got {snapshots[:40]!r}")
    catalog.require("select", db, name)
    columns_denied = trusted.restricted(catalog, db, name)  # 403 unless a trusted engine asks
    hive = await catalog.hive_table(db, name)
    location = hive.parameters["metadata_location"]
    tag = etag(location, snapshots)
    if not columns_denied and _not_modified(if_none_match, tag):
        return Reply(status=304, headers=(("ETag", tag),))
    location, metadata = await catalog.metadata(hive)
    columns = trusted.authorized_columns(catalog, db, name, metadata) if columns_denied else {}
    if columns:  # the answer also changes with the policy
        tag = etag(location, f"{snapshots}\n{columns[trusted.AUTHORIZED_COLUMNS]}")
        if _not_modified(if_none_match, tag):
            return Reply(status=304, headers=(("ETag", tag),))
    if snapshots == "refs":
        referenced = {ref.snapshot_id for ref in metadata.refs.values()}
        metadata = metadata.model_copy(update={"snapshots": [s for s in metadata.snapshots
                                                              if s.snapshot_id in referenced]})
    delegation = await delegated(catalog, request, db, name, metadata.location)
    delegation = ({**delegation[0], **columns}, delegation[1])
    return Reply(body=load_result(location, metadata, delegation), headers=(("ETag", tag),))


async def table_exists(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    db, name = route.db_table()
    catalog.require("", db, name)
    await catalog.hive_table(db, name)
    return Reply(status=204)


async def drop_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    db, name = route.db_table()
    purge = request.query.get("purgeRequested", "false").lower()
    if purge not in ("true", "false"):
        raise errors.BadRequest("purgeRequested must be true or false")
    catalog.require("drop", db, name)
    hive = await catalog.hive_table(db, name)
    location, metadata = await catalog.metadata(hive) if purge == "true" else (None, None)
    if metadata is not None:
        await check_purge(catalog, db, name, metadata)
    try:
        await catalog.client.call("drop_table", dbname=db, name=name, deleteData=False)
    except catalog.idl.NoSuchObjectException:
        raise errors.NoSuchTable(f"Table does not exist: {db}.{name}") from None
    if metadata is not None and location is not None:
        try:
            await catalog.files.purge(metadata, location, f"{db}.{name}")
        except Exception:  # the table is gone from HMS; leftover files are not the client's error
            log.warning("purge of dropped table %s.%s left files behind", db, name, exc_info=True)
        else:
            await remove_empty(metadata.location, below=True)
    return Reply(status=204)


async def rename_table(catalog: Catalog, route: Route, request: web.BaseRequest, body: bytes) -> Reply:
    ask = parse(RenameTable, body)
    src_db = namespace_name(ask.source.namespace)
    src = hms_name(ask.source.name, "table")
    dst_db = namespace_name(ask.destination.namespace)
    dst = hms_name(ask.destination.name, "table")
    catalog.named(src_db, src)
    catalog.require("alter", src_db, src)
    catalog.require("create", dst_db)
    await catalog.rename(await catalog.hive_table(src_db, src), dst_db, dst)
    return Reply(status=204)
