"""Issue 48: the url rule on the Thrift API, against the real HMS. A Thrift write that sets a
storage location (a table's or partition's location, Iceberg's ``metadata_location``) needs
Ranger's ``url`` permission on it, as Ranger's HMS authorizer asks and as the ``iceberg-rest``
service already did: dave (create and alter in ``urlsandbox``, no url) cannot place a table or
a partition anywhere he chooses, nor alias another table's Iceberg metadata; erin (url on her
area) can, there; root (url on ``*``) does as before. A refused call never reaches HMS; an alter
that keeps its location needs no url permission. TJSON and binary alike."""

from __future__ import annotations

import base64

import pytest
from thrift.protocol import TBinaryProtocol, TJSONProtocol
from thrift.transport import THttpClient

from tests.support.gateway import htpasswd_provider, service, upstream_calls
from tests.support.policy import POLICY_FILE, POLICY_PATH
from tests.support.thrift_gen import hive_metastore_modules

pytestmark = pytest.mark.integration

PASSWORD = "pw-123456"
DB, SECRET = "urlsandbox", "urlsecret"
METHODS = ["create_database", "alter_database", "get_database", "get_table", "create_table", "create_table_with_environment_context", "alter_table",
           "alter_table_with_environment_context", "add_partition", "add_partitions_req", "get_partition",
           "alter_partition", "alter_partitions"]


def _policy(area: str) -> str:
    return f"""
policies:
  - id: 1
    name: dave and erin work in the sandbox
    resources: {{database: [{DB}], table: ["*"], column: ["*"]}}
    allow: [{{users: [dave, erin], accesses: [select, create, alter, drop]}}]
  - id: 2
    name: erin may place storage in her area
    resources: {{url: {{values: ["{area}"], recursive: true}}}}
    allow: [{{users: [erin], accesses: [read, write]}}]
  - id: 5
    name: dave may make and alter his own databases
    resources: {{database: ["dave_*"]}}
    allow: [{{users: [dave], accesses: [create, alter, select]}}]
  - id: 3
    name: root, as admins are
    resources: {{database: ["*"], table: ["*"], column: ["*"]}}
    allow: [{{users: [root], accesses: [all]}}]
  - id: 4
    name: root may place storage anywhere
    resources: {{url: {{values: ["*"], recursive: true}}}}
    allow: [{{users: [root], accesses: [read, write]}}]
"""


@pytest.fixture(scope="module")
def world(hms, module_gateway_factory, tmp_path_factory):
    """The gateway, the areas (erin's, and one nobody was granted) and the secret Iceberg table."""
    root = tmp_path_factory.mktemp("url-areas")
    area, elsewhere = (root / "erin").as_uri(), (root / "elsewhere").as_uri()
    svc = dict(service([f"thrift://127.0.0.1:{hms.port}"], methods=METHODS), policy_file=POLICY_PATH)
    topology = {"providers": {"authentication": [htpasswd_provider()]}, "services": [svc]}
    gw = module_gateway_factory({"default": topology}, {u: PASSWORD for u in ("dave", "erin", "root")},
                                files={POLICY_FILE: _policy(area)})
    _, t = hive_metastore_modules()
    admin = client(gw, "root")  # the databases, and the table whose metadata dave would alias
    for name in (DB, SECRET):
        admin.create_database(t.Database(name, "issue 48", (root / f"{name}.db").as_uri(), {}))
    secret_metadata = f"{(root / SECRET / 'masked').as_uri()}/metadata/00001-abc.metadata.json"
    admin.create_table(table(t, SECRET, "masked", (root / SECRET / "masked").as_uri(),
                             {"table_type": "ICEBERG", "metadata_location": secret_metadata}))
    return gw, area, elsewhere, secret_metadata


def client(gw, user: str, binary: bool = False):
    service_mod, _ = hive_metastore_modules()
    transport = THttpClient.THttpClient(gw.url(), ssl_context=gw.ssl_context())
    token = base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()
    transport.setCustomHeaders({"Authorization": f"Basic {token}"})
    protocol = TBinaryProtocol.TBinaryProtocol(transport) if binary else TJSONProtocol.TJSONProtocol(transport)
    return service_mod.Client(protocol)


def table(t, db: str, name: str, location: str | None = None, parameters: dict | None = None,
          partitioned: bool = False):
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema("id", "int", None)], location=location,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat", compressed=False,
        numBuckets=-1, serdeInfo=t.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        bucketCols=[], sortCols=[], parameters={})
    return t.Table(tableName=name, dbName=db, owner="x", sd=sd, parameters=dict(parameters or {}),
                   partitionKeys=[t.FieldSchema("day", "string", None)] if partitioned else [],
                   tableType="EXTERNAL_TABLE")


def partition(t, name: str, day: str, location: str | None):
    sd = table(t, DB, name, location).sd
    return t.Partition(values=[day], dbName=DB, tableName=name, sd=sd, parameters={})


def refused(gw, call, *args) -> str:
    """The MetaException's message of a call that must not reach HMS."""
    _, t = hive_metastore_modules()
    before = upstream_calls(gw)
    with pytest.raises(t.MetaException) as caught:
        call(*args)
    assert upstream_calls(gw) == before, "a refused write reached HMS"
    return caught.value.message


@pytest.mark.parametrize("binary", [False, True], ids=["tjson", "binary"])
def test_a_chosen_location_needs_the_url_permission(world, direct, binary):
    gw, area, elsewhere, _ = world
    _, t = hive_metastore_modules()
    dave, erin = client(gw, "dave", binary), client(gw, "erin", binary)
    suffix = "b" if binary else "j"
    message = refused(gw, dave.create_table, table(t, DB, f"placed_{suffix}", f"{elsewhere}/placed_{suffix}"))
    assert message == (f"dave may not place table {DB}.placed_{suffix} at {elsewhere}/placed_{suffix}: "
                       "it needs the url permission (read) on that location")
    refused(gw, dave.create_table_with_environment_context,
            table(t, DB, f"placed_{suffix}", f"{area}/placed_{suffix}"), t.EnvironmentContext({}))
    dots = refused(gw, erin.create_table, table(t, DB, f"dots_{suffix}", f"{area}/x/../../elsewhere"))
    assert dots.endswith("a location must not have '.' or '..' segments")
    with pytest.raises(t.NoSuchObjectException):
        direct.get_table(DB, f"placed_{suffix}")

    dave.create_table(table(t, DB, f"own_{suffix}", partitioned=True))  # HMS's default location: no url asked
    erin.create_table(table(t, DB, f"erins_{suffix}", f"{area}/erins_{suffix}", partitioned=True))
    assert direct.get_table(DB, f"erins_{suffix}").sd.location.endswith(f"/erin/erins_{suffix}")

    # partitions: at a chosen location only with the permission; HMS's default needs none
    refused(gw, dave.add_partition, partition(t, f"own_{suffix}", "d1", f"{elsewhere}/d1"))
    refused(gw, erin.add_partitions_req, t.AddPartitionsRequest(
        DB, f"erins_{suffix}", [partition(t, f"erins_{suffix}", "d1", f"{area}/d1"),
                                partition(t, f"erins_{suffix}", "d2", f"{elsewhere}/d2")], False, True))
    dave.add_partition(partition(t, f"own_{suffix}", "d1", None))
    erin.add_partitions_req(t.AddPartitionsRequest(
        DB, f"erins_{suffix}", [partition(t, f"erins_{suffix}", "d1", f"{area}/erins_{suffix}/day=d1")], False, True))
    assert direct.get_partition(DB, f"erins_{suffix}", ["d1"]).sd.location.endswith(f"/erins_{suffix}/day=d1")

    # an alter that keeps the location needs no permission; one that moves it does
    mine = dave.get_table(DB, f"own_{suffix}")
    mine.parameters["comment"] = "kept where it is"
    dave.alter_table(DB, f"own_{suffix}", mine)
    assert direct.get_table(DB, f"own_{suffix}").parameters["comment"] == "kept where it is"
    mine.sd.location = f"{elsewhere}/own_{suffix}"
    assert "needs the url permission" in refused_after_lookup(gw, dave.alter_table, DB, f"own_{suffix}", mine)
    part = dave.get_partition(DB, f"own_{suffix}", ["d1"])
    part.parameters["note"] = "same place"
    dave.alter_partition(DB, f"own_{suffix}", part)
    part.sd.location = f"{elsewhere}/d1"
    refused_after_lookup(gw, dave.alter_partitions, DB, f"own_{suffix}", [part])
    assert not direct.get_partition(DB, f"own_{suffix}", ["d1"]).sd.location.startswith(elsewhere)
    theirs = erin.get_table(DB, f"erins_{suffix}")
    theirs.sd.location = f"{area}/moved_{suffix}"
    erin.alter_table(DB, f"erins_{suffix}", theirs)
    assert direct.get_table(DB, f"erins_{suffix}").sd.location.endswith(f"/erin/moved_{suffix}")


def refused_after_lookup(gw, call, *args) -> str:
    """An alter's MetaException: the gateway read the current object (one call), the write
    itself never reached HMS."""
    _, t = hive_metastore_modules()
    before = upstream_calls(gw)
    with pytest.raises(t.MetaException) as caught:
        call(*args)
    assert upstream_calls(gw) == before + 1, "the current object is read, the write never sent"
    return caught.value.message


def test_an_alias_of_another_tables_metadata_is_refused_without_the_url_permission(world, direct):
    """The first half of the issue's alias scenario: create in a sandbox, table_type=ICEBERG and
    the metadata_location of a table dave cannot read; also by an alter."""
    gw, area, _, secret_metadata = world
    _, t = hive_metastore_modules()
    dave = client(gw, "dave")
    alias = table(t, DB, "alias", parameters={"table_type": "ICEBERG", "metadata_location": secret_metadata})
    message = refused(gw, dave.create_table, alias)
    assert message.startswith(f"dave may not place the Iceberg metadata of table {DB}.alias at {secret_metadata}")
    with pytest.raises(t.NoSuchObjectException):
        direct.get_table(DB, "alias")
    dave.create_table(table(t, DB, "plain"))
    plain = dave.get_table(DB, "plain")
    plain.parameters.update({"table_type": "ICEBERG", "metadata_location": secret_metadata})
    refused_after_lookup(gw, dave.alter_table_with_environment_context, DB, "plain", plain, t.EnvironmentContext({}))
    assert "metadata_location" not in direct.get_table(DB, "plain").parameters
    # erin's permission covers her area only
    refused(gw, client(gw, "erin").create_table, alias)
    erins = table(t, DB, "erins_iceberg", parameters={"table_type": "ICEBERG",
                                                       "metadata_location": f"{area}/t/metadata/1.json"})
    client(gw, "erin").create_table(erins)


def test_a_database_location_needs_it_too(world, direct):
    """As the iceberg-rest service asks for a namespace location (a database placed over another
    table's files would give its new tables that table's files as default locations)."""
    gw, area, elsewhere, _ = world
    _, t = hive_metastore_modules()
    dave = client(gw, "dave")
    refused(gw, dave.create_database, t.Database("dave_placed", "", f"{elsewhere}/dave_placed.db", {}))
    with pytest.raises(t.NoSuchObjectException):
        direct.get_database("dave_placed")
    dave.create_database(t.Database("dave_default", "", None, {}))  # HMS's warehouse: none asked
    mine = dave.get_database("dave_default")
    mine.parameters = {"note": "kept where it is"}
    dave.alter_database("dave_default", mine)  # HMS 2.3 alters a database's parameters, owner and location
    assert direct.get_database("dave_default").parameters["note"] == "kept where it is"
    mine.locationUri = f"{area}/dave.db"
    refused_after_lookup(gw, dave.alter_database, "dave_default", mine)


def test_url_on_everything_behaves_as_before(world, direct):
    gw, _, elsewhere, secret_metadata = world
    _, t = hive_metastore_modules()
    root = client(gw, "root", binary=True)
    root.create_table(table(t, DB, "root_alias", f"{elsewhere}/root_alias",
                            {"table_type": "ICEBERG", "metadata_location": secret_metadata}))
    assert direct.get_table(DB, "root_alias").parameters["metadata_location"] == secret_metadata
