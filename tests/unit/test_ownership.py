"""Owner assertion on create_database / create_table calls, checked with Apache's own codec."""

from __future__ import annotations

import pytest
from thrift.Thrift import TMessageType

from gateway.providers.ownership import OwnerAssertion
from gateway.thrift.errors import ProtocolError
from tests.support.apache_codec import read_message, strict_binary, write_message


def test_database_owner_is_the_effective_user(apache_hms, schema):
    t, svc = apache_hms.ttypes, apache_hms.service
    db = t.Database(name="sales", description="d", locationUri="file:/w", parameters={"a": "b"},
                    ownerName="mallory", ownerType=t.PrincipalType.ROLE)
    call = write_message(strict_binary, "create_database", TMessageType.CALL, 9, svc.create_database_args(database=db))
    out = OwnerAssertion(schema).apply(call, "create_database", "alice")
    (name, _, seqid), args = read_message(strict_binary, out, svc.create_database_args)
    assert (name, seqid) == ("create_database", 9)
    assert args.database.ownerName == "alice" and args.database.ownerType == t.PrincipalType.USER
    assert (args.database.name, args.database.description, args.database.parameters) == ("sales", "d", {"a": "b"})


@pytest.mark.parametrize("method", ["create_table", "create_table_with_environment_context"])
def test_table_owner_filled_when_absent(apache_hms, schema, method):
    t, svc = apache_hms.ttypes, apache_hms.service
    table = t.Table(tableName="t", dbName="sales", parameters={"x": "y"},
                    partitionKeys=[t.FieldSchema("p", "string", None)])
    args_cls = getattr(svc, f"{method}_args")
    extra = {"environment_context": t.EnvironmentContext({"k": "v"})} if "environment" in method else {}
    call = write_message(strict_binary, method, TMessageType.CALL, 9, args_cls(tbl=table, **extra))
    _, args = read_message(strict_binary, OwnerAssertion(schema).apply(call, method, "bob"), args_cls)
    assert args.tbl.owner == "bob"
    assert args.tbl.tableName == "t" and args.tbl.partitionKeys[0].name == "p"
    if extra:
        assert args.environment_context.properties == {"k": "v"}


def test_other_methods_untouched(apache_hms, schema):
    svc = apache_hms.service
    call = write_message(strict_binary, "get_database", TMessageType.CALL, 9, svc.get_database_args(name="x"))
    assert OwnerAssertion(schema).apply(call, "get_database", "alice") is call


def test_truncated_call_is_a_protocol_error(apache_hms, schema):
    t, svc = apache_hms.ttypes, apache_hms.service
    call = write_message(strict_binary, "create_database", TMessageType.CALL, 9, svc.create_database_args(database=t.Database(name="x")))
    with pytest.raises(ProtocolError):
        OwnerAssertion(schema).apply(call[:-6], "create_database", "alice")
