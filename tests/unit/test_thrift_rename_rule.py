"""Issue 48: an ``alter_table`` that renames a table needs ``create`` on the database it renames
into, on the Thrift API as on the ``iceberg-rest`` service's ``renameTable``; ``alter`` on the
source alone let a user move a table into any database."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.hms_thrift.exchange import ThriftExchange
from gateway.hms_thrift.steps.catalog_policy import CatalogPolicy
from gateway.observability.audit import AuditEvent
from gateway.pipeline.outcomes import Answered
from gateway.policy import load_policy_file
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.thrift.binary import read_message_header
from gateway.thrift.hive_methods import WRITES, renamed_into
from gateway.thrift.schema import load_schema
from gateway.upstream.metastore import encode_call, idl_module

SCHEMA = load_schema()
IDL = idl_module(SCHEMA)


@pytest.fixture(scope="module")
def step(tmp_path_factory) -> CatalogPolicy:
    path: Path = tmp_path_factory.mktemp("policy") / "policy.yaml"
    path.write_text("""policies:
  - {id: 1, resources: {database: [sandbox], table: ["*"], column: ["*"]}, allow: [{users: [dave], accesses: [all]}]}
  - {id: 2, resources: {database: [shared], table: ["*"], column: ["*"]}, allow: [{users: [dave], accesses: [select]}]}
  - {id: 3, resources: {database: [open], table: ["*"], column: ["*"]}, allow: [{users: [dave], accesses: [create, alter]}]}
""")
    return CatalogPolicy("t", "hms", load_policy_file(path), SCHEMA)


def alter(step: CatalogPolicy, new_db: str, new_name: str, method: str = "alter_table") -> None:
    """Run ``method`` renaming ``sandbox.t`` to ``new_db.new_name`` through the policy step, as dave."""
    call = encode_call(SCHEMA, method, {"dbname": "sandbox", "tbl_name": "t",
                                        "new_tbl": IDL.Table(dbName=new_db, tableName=new_name)}, seqid=3)
    exchange = ThriftExchange(None, AuditEvent("r", None),  # type: ignore[arg-type]
                              identity=Identity("dave", Principal("dave", "basic"), frozenset()),
                              header=read_message_header(call)[0], call=call)
    asyncio.run(step.on_call(exchange))


@pytest.mark.parametrize("method", ["alter_table", "alter_table_with_environment_context", "alter_table_with_cascade"])
def test_a_rename_into_a_database_without_create_is_refused(step, method):
    with pytest.raises(Answered, match="create on shared denied to dave"):
        alter(step, "shared", "t", method)
    with pytest.raises(Answered, match="create on hidden denied to dave"):
        alter(step, "hidden", "stolen", method)


def test_renames_the_policy_grants_pass(step):
    alter(step, "sandbox", "t2")  # within the database: create there
    alter(step, "open", "t")  # create on the target
    alter(step, "SANDBOX", "T")  # HMS's names are case-insensitive: no rename at all


def test_renamed_into_reads_the_declared_paths():
    write = WRITES["alter_table"]
    assert write.renamed == ("new_tbl.dbName", "new_tbl.tableName")
    args = type("A", (), {"new_tbl": IDL.Table(dbName="e", tableName="n")})()
    assert renamed_into(write, args, ("d", "n")) == "e"
    assert renamed_into(write, args, ("E", "N")) is None
    assert renamed_into(WRITES["create_table"], args, ("d", "n")) is None
