"""What a worker holds before it serves (issue 41, "Memory and start-up"): building a topology
of the ``hms-thrift``, ``glue``, ``explorer``, ``event-stream`` or ``iceberg-rest`` kind imports
neither pyarrow nor PyIceberg (with the Hive client PyIceberg's catalog brings,
``hive_metastore``); a
Thrift-only one with Basic (htpasswd) none of the client libraries of the providers it does not
name (ldap3, python-gssapi, botocore: ``ProviderSettings.authenticator``); the
``iceberg-rest`` kind imports its request side (:mod:`gateway.iceberg.adapter`, PyIceberg with
it) at its service's first request, once. The checks run in one fresh interpreter (this one has
imported everything already), which builds each kind's topology in turn and notes what each
build added to ``sys.modules``, then sends the Iceberg service its first requests.

And what it holds after serving Iceberg: the gateway's FileIO (:mod:`gateway.lakehouse.file_io`)
writing, reading and deleting metadata files, the change feed reading a commit, scan planning
and a purge reading manifests never import pyarrow (about 55 MiB); checked in another fresh
interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.explorer import METHODS

ROOT = Path(__file__).resolve().parents[2]

#: What only a request may import: pyarrow (PyIceberg's PyArrowFileIO), PyIceberg and the Hive
#: Thrift client PyIceberg's catalog module brings, the Iceberg kind's request side.
DEFERRED = ("pyarrow", "pyiceberg", "hive_metastore", "gateway.iceberg.adapter")
#: What only a topology naming the provider may import (``ldap``, ``kerberos``, ``sigv4``).
PROVIDER_LIBRARIES = ("ldap3", "gssapi", "botocore")

_HMS = "upstream: {urls: ['thrift://hms:9083']}"
#: A topology's ``services`` (a YAML flow list) for each kind, built in this order.
SERVICES = {
    "hms-thrift": f"[{{kind: hms-thrift, path: api, {_HMS}}}]",
    "glue": f"[{{kind: glue, path: api, {_HMS}}}]",
    "explorer": f"[{{kind: hms-thrift, path: hms, {_HMS}, options: {{methods: [{', '.join(METHODS)}]}}}}, "
                "{kind: explorer, path: api, options: {thrift_service: hms}}]",
    "event-stream": f"[{{kind: event-stream, path: events, {_HMS}}}]",
    "iceberg-rest": f"[{{kind: iceberg-rest, path: ice, {_HMS}}}]",
}

_PROGRAM = """
import asyncio, json, sys
from pathlib import Path
from aiohttp.test_utils import make_mocked_request
from gateway.config import GatewayConfig, TLSConfig, load_topology_file
from gateway.observability.audit import AuditEvent
from gateway.pipeline.exchange import Exchange
from gateway.topology import build_topology

work, services, deferred = Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
(work / "users.htpasswd").write_text("")
gateway = GatewayConfig(tls=TLSConfig(certificate=work / "c", private_key=work / "k"))
found, built = {}, {}
for kind, listed in services.items():
    (work / "t.yaml").write_text("providers: {authentication: [{type: htpasswd, users_file: users.htpasswd}]}\\n"
                                 "services: " + listed + "\\n")
    built[kind] = build_topology(load_topology_file(work / "t.yaml"), gateway)
    found[kind] = sorted(m for m in deferred if m in sys.modules)
handler = built["iceberg-rest"].services["ice"].handler

async def first_requests():
    requests = [make_mocked_request("GET", "/gateway/t/ice/v1/no-such-route") for _ in range(3)]
    for request in requests:
        request.content.feed_eof()
    answers = await asyncio.gather(*(handler.handle(Exchange(r, AuditEvent("r", None))) for r in requests))
    return [response.status for response, _ in answers]

found["statuses"] = asyncio.run(first_requests())
found["adapter"] = type(handler.adapter).__module__
found["served"] = sorted(m for m in deferred if m in sys.modules)
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict:
    """What the fresh interpreter found: per kind, the deferred modules imported once its
    topology (and those before it) was built; then the Iceberg service's answers."""
    run = subprocess.run([sys.executable, "-c", _PROGRAM, str(tmp_path_factory.mktemp("lazy")),
                          json.dumps(SERVICES), json.dumps(DEFERRED + PROVIDER_LIBRARIES)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@pytest.mark.parametrize("kind", list(SERVICES))
def test_building_a_kind_imports_nothing_only_a_request_needs(imported, kind):
    assert set(imported[kind]) & set(DEFERRED) == set()


def test_a_thrift_only_topology_imports_no_client_library_of_another_provider(imported):
    assert next(iter(SERVICES)) == "hms-thrift"  # built first, in a fresh interpreter
    assert imported["hms-thrift"] == []


def test_the_iceberg_kind_loads_its_request_side_at_the_first_request(imported):
    # three first requests at once, each through the route table (a route the API lacks is
    # refused after authentication: 401 without credentials), one adapter loaded for them
    assert imported["statuses"] == [401, 401, 401] and imported["adapter"] == "gateway.iceberg.adapter"
    assert {"pyiceberg", "gateway.iceberg.adapter"} <= set(imported["served"])


def test_the_hms_parameters_the_change_feed_reads_are_pyiceberg_s():
    from pyiceberg import catalog

    from gateway.lakehouse import table_parameters

    assert (table_parameters.TABLE_TYPE, table_parameters.ICEBERG, table_parameters.METADATA_LOCATION) == (
        catalog.TABLE_TYPE, catalog.ICEBERG, catalog.METADATA_LOCATION)
    assert table_parameters.PREVIOUS_METADATA_LOCATION == catalog.PREVIOUS_METADATA_LOCATION


_SERVING = """
import asyncio, json, sys, threading
from pathlib import Path
from pyiceberg.manifest import (DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus,
                                write_manifest, write_manifest_list)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate, update_table_metadata
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField
from pyiceberg.view.metadata import ViewMetadata
from gateway.events.iceberg import IcebergCommitOptions, SnapshotReader
from gateway.iceberg.files import MetadataFiles
from gateway.lakehouse.file_io import file_io
from gateway.iceberg.manifest_cache import ManifestCache
from gateway.iceberg.plan_models import PlanTableScanRequest
from gateway.iceberg.planning import Residuals, manifests, plan, scope

root = Path(sys.argv[1])
table = (root / "t").as_uri()  # file:///...
io, files = file_io({}, table), MetadataFiles()
schema = Schema(NestedField(1, "id", LongType(), required=False))
with write_manifest(2, UNPARTITIONED_PARTITION_SPEC, schema, io.new_output(f"{table}/metadata/m.avro"),
                    snapshot_id=1, avro_compression="deflate") as writer:
    data = DataFile.from_args(content=DataFileContent.DATA, file_path=f"{table}/data/d.parquet",
                              file_format=FileFormat.PARQUET, partition=Record(), record_count=1,
                              file_size_in_bytes=10)
    data.spec_id = 0
    writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=1, data_file=data))
listing = f"{table}/metadata/snap-1.avro"
with write_manifest_list(2, io.new_output(listing), 1, None, 1, "deflate") as lists:
    lists.add_manifests([writer.to_manifest_file()])
base = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, table, {})
snapshot = Snapshot(**{"snapshot-id": 1, "sequence-number": 1, "timestamp-ms": 1, "manifest-list": listing,
                       "summary": Summary(Operation.APPEND)})
metadata = update_table_metadata(base, (AddSnapshotUpdate(snapshot=snapshot),
                                        SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=1)))
view = ViewMetadata.model_validate({
    "view-uuid": "fa6506c3-7681-40c8-86dc-e36561f83385", "format-version": 1, "location": f"{table}-view",
    "current-version-id": 1, "properties": {}, "schemas": [schema.model_dump(by_alias=True)],
    "versions": [{"version-id": 1, "timestamp-ms": 1, "schema-id": 0, "summary": {},
                  "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}],
                  "default-namespace": ["ns"]}],
    "version-log": [{"version-id": 1, "timestamp-ms": 1}]})
found = {}

async def serve():
    location = f"{table}/metadata/00000-a.metadata.json"
    await files.write(metadata, location)
    try:
        await files.write(metadata, location)
        found["rewrite"] = "overwritten"
    except FileExistsError:
        found["rewrite"] = "refused"
    found["read"] = (await files.read(location)).table_uuid == metadata.table_uuid
    view_file = f"{table}-view/metadata/00000-v.gz.metadata.json"
    await files.write_view(view, view_file)
    found["view"] = str((await files.read_view(view_file)).view_uuid)
    found["feed"] = (await SnapshotReader(IcebergCommitOptions()).current_snapshot(location))["snapshot-id"]
    planned = scope(metadata, PlanTableScanRequest())
    data, deletes = manifests(planned, io, ManifestCache(1 << 20))
    found["planned"] = [t["data-file"]["file-path"] for t in plan(
        planned, io, data, deletes, Residuals(planned.filter, 1 << 20), threading.Event()).file_scan_tasks]
    found["purged"] = await files.purge(metadata, location, "ns.t")

asyncio.run(serve())
found["pyarrow"] = sorted(m for m in sys.modules if m.split(".")[0] == "pyarrow")
print(json.dumps(found))
"""


def test_serving_iceberg_files_imports_no_pyarrow(tmp_path):
    """Metadata files written (a second write of one name refused), read, a view's too, a
    commit read by the change feed, a scan planned over manifests and a table purged, all
    through the gateway's FileIO, in a fresh interpreter: pyarrow is never imported."""
    run = subprocess.run([sys.executable, "-c", _SERVING, str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout.splitlines()[-1])
    table = (tmp_path / "t").as_uri()
    assert found["rewrite"] == "refused" and found["read"] is True
    assert found["view"] == "fa6506c3-7681-40c8-86dc-e36561f83385" and found["feed"] == 1
    assert found["planned"] == [f"{table}/data/d.parquet"]
    assert found["purged"] == 3  # the manifest list, the manifest and the metadata file (no data file there)
    assert not (tmp_path / "t" / "metadata" / "00000-a.metadata.json").exists()
    assert found["pyarrow"] == []
