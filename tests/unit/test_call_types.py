"""A call's arguments checked against the IDL (issue 25, gateway/thrift/call_types.py): a known
field, list/set element or map key/value of another type than the IDL's is refused with a reason
naming the method, the field and both types, the same in TJSON, strict binary and compact;
unknown field ids and what Apache's writers produce pass. A hypothesis differential against
Apache Thrift's generated readers (as HMS reads a call): accepted exactly when Apache reads back
every value as sent."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from thrift.protocol import TCompactProtocol, TJSONProtocol
from thrift.Thrift import TMessageType
from thrift.transport import TTransport

from gateway.thrift.call_types import CHANGED_SINCE_2_3, check_call_types, type_name
from gateway.thrift.codec import BINARY, COMPACT, TJSON
from gateway.thrift.compact import binary_message_to_compact
from gateway.thrift.errors import ProtocolError
from gateway.thrift.schema import BINARY as IDL_BINARY
from gateway.thrift.schema import MapSpec, StructSchema, TType
from tests.support.apache_codec import read_message, strict_binary, write_message
from tests.unit.test_thrift_conformance import sample_stats, sample_table


def decode_all(body: bytes, schema):
    """``decode_call`` of a TJSON call, and of the same call as strict binary and as compact:
    each protocol's outcome (the header, or the ``ProtocolError`` reason)."""
    binary = TJSON.to_binary(body, schema)[1]
    outcomes = {}
    for codec, data in ((TJSON, body), (BINARY, binary), (COMPACT, binary_message_to_compact(binary, 1))):
        try:
            outcomes[codec.name] = codec.decode_call(data, schema)[0].name
        except ProtocolError as exc:
            outcomes[codec.name] = exc.reason
    return outcomes


def refused(body: bytes, schema) -> str:
    """The reason all three protocols give for refusing ``body``; fails if one accepts it."""
    outcomes = decode_all(body, schema)
    assert len(set(outcomes.values())) == 1, outcomes
    reason = outcomes["tjson"]
    assert reason != json.loads(body)[1], f"accepted: {outcomes}"
    return reason


def call(name: str, args: str) -> bytes:
    return f'[1,"{name}",1,1,{{{args}}}]'.encode()


WRONG = {
    "a top-level field (HMS would skip it and return all partitions)": (
        call("get_partitions", '"1":{"str":"db"},"2":{"str":"t"},"3":{"i32":1}'),
        "get_partitions: field 3 (max_parts) is i16 in the IDL, got i32"),
    "a name sent as a number (HMS: Internal error processing get_database)": (
        call("get_database", '"1":{"i32":5}'),
        "get_database: field 1 (name) is string in the IDL, got i32"),
    "list<string> sent as list<i32>": (
        call("get_partitions_by_names", '"1":{"str":"db"},"2":{"str":"t"},"3":{"lst":["i32",2,1,2]}'),
        "get_partitions_by_names: field 3 (names) is list<string> in the IDL, got list<i32>"),
    "a list sent as a set": (
        call("get_partitions_by_names", '"1":{"str":"db"},"2":{"str":"t"},"3":{"set":["str",1,"a=1"]}'),
        "get_partitions_by_names: field 3 (names) is list<string> in the IDL, got set<string>"),
    "a struct sent as a string": (
        call("create_table", '"1":{"str":"t"}'),
        "create_table: field 1 (tbl) is Table in the IDL, got string"),
    "a field of a struct inside create_table's Table": (
        call("create_table", '"1":{"rec":{"1":{"str":"t"},"2":{"i64":7}}}'),
        "create_table: field 2 (dbName) of tbl is string in the IDL, got i64"),
    "a struct field inside a list inside nested structs": (
        call("create_table", '"1":{"rec":{"7":{"rec":{"1":{"lst":["rec",2,{"1":{"str":"a"}},{"2":{"tf":1}}]}}}}}'),
        "create_table: field 2 (type) of tbl.sd.cols[1] is string in the IDL, got bool"),
    "map values of another type": (
        call("create_table", '"1":{"rec":{"9":{"map":["str","i32",1,{"a":1}]}}}'),
        "create_table: field 9 (parameters) of tbl is map<string,string> in the IDL, got map<string,i32>"),
    "map keys of another type": (
        call("create_database", '"1":{"rec":{"4":{"map":["i64","str",1,{"1":"v"}]}}}'),
        "create_database: field 4 (parameters) of database is map<string,string> in the IDL, got map<i64,string>"),
    "a map's values of another container type": (
        call("alter_partitions", '"1":{"str":"d"},"2":{"str":"t"},"3":{"lst":["rec",1,'
             '{"8":{"rec":{"1":{"map":["str","i16",1,{"u":1}]}}}}]}'),
        "alter_partitions: field 1 (userPrivileges) of new_parts[0].privileges is "
        "map<string,list<PrivilegeGrantInfo>> in the IDL, got map<string,i16>"),
    "a struct in a list in a map value": (
        call("alter_partitions", '"1":{"str":"d"},"2":{"str":"t"},"3":{"lst":["rec",1,'
             '{"8":{"rec":{"1":{"map":["str","lst",1,{"u":["rec",1,{"1":{"i32":3}}]}]}}}}]}'),
        "alter_partitions: field 1 (privilege) of new_parts[0].privileges.userPrivileges[value 0][0] "
        "is string in the IDL, got i32"),
    "nested lists, the inner one wrong": (
        call("get_partitions_by_names", '"1":{"str":"db"},"2":{"str":"t"},"3":{"lst":["lst",1,["str",0]]}'),
        "get_partitions_by_names: field 3 (names) is list<string> in the IDL, got list<list<string>>"),
    "a wrong element deep in a container of containers": (
        call("grant_privileges", '"1":{"rec":{"1":{"lst":["rec",1,{"4":{"rec":{"1":{"i32":3}}}}]}}}'),
        "grant_privileges: field 1 (privilege) of privileges.privileges[0].grantInfo is string in the IDL, got i32"),
    "IDL binary sent as i32": (
        call("update_table_column_statistics", '"1":{"rec":{"2":{"lst":["rec",1,{"3":{"rec":{"6":{"rec":'
             '{"1":{"rec":{"1":{"i32":1},"3":{"i16":2}}}}}}}}]}}}'),
        "update_table_column_statistics: field 1 (unscaled) of stats_obj.statsObj[0].statsData.decimalStats"
        ".lowValue is binary in the IDL, got i32"),
}


@pytest.mark.parametrize("body, reason", WRONG.values(), ids=WRONG.keys())
def test_a_known_field_of_another_type_is_refused_in_every_protocol(schema, thrift_impl, body, reason):
    assert refused(body, schema) == reason


ACCEPTED = {
    "correct types": call("get_partitions", '"1":{"str":"db"},"2":{"str":"t"},"3":{"i16":-1}'),
    "no arguments": call("get_all_databases", ""),
    "unknown field ids, any type (HMS 3.x/4.x fields)": call(
        "get_table", '"1":{"str":"db"},"2":{"str":"t"},"3":{"i32":1},"40":{"lst":["i64",1,2]},"-1":{"rec":{}}'),
    "unknown ids inside a known struct": call(
        "create_table", '"1":{"rec":{"1":{"str":"t"},"99":{"map":["i32","dbl",1,{"1":2.5}]}}}'),
    "empty containers, whatever their element types (compact's empty map has none)": call(
        "create_table", '"1":{"rec":{"8":{"lst":["i32",0]},"9":{"map":["i32","i64",0,{}]}}}'),
    "an unknown method: exposure decides, not the IDL": call("get_tables_ext", '"1":{"i32":1}'),
    "add_dynamic_partitions as Hive 3.0+ writes it (field 2 writeid inserted)": call(
        "add_dynamic_partitions", '"1":{"rec":{"1":{"i64":1},"2":{"i64":7},"3":{"str":"db"},"4":{"str":"t"},'
        '"5":{"lst":["str",1,"p=1"]},"6":{"i32":5}}}'),
    "add_dynamic_partitions as Hive 2.3 writes it": call(
        "add_dynamic_partitions", '"1":{"rec":{"1":{"i64":1},"2":{"str":"db"},"3":{"str":"t"},'
        '"4":{"lst":["str",1,"p=1"]},"5":{"i32":5}}}'),
    "fire_listener_event's insert data as Hive 3.0+ writes it (field 1 replace inserted)": call(
        "fire_listener_event", '"1":{"rec":{"1":{"tf":1},"2":{"rec":{"1":{"rec":{"1":{"tf":0},'
        '"2":{"lst":["str",1,"f"]}}}}}}}'),
}


@pytest.mark.parametrize("body", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_correct_types_and_unknown_ids_pass_in_every_protocol(schema, thrift_impl, body):
    assert set(decode_all(body, schema).values()) == {json.loads(body)[1]}


@pytest.mark.parametrize("factory", [strict_binary, TCompactProtocol.TCompactProtocol, TJSONProtocol.TJSONProtocol],
                         ids=["binary", "compact", "tjson"])
def test_what_apache_writers_send_passes(apache_hms, schema, factory):
    t, s = apache_hms.ttypes, apache_hms.service
    table = sample_table(t, skewed_maps={("a", "b"): "/loc/ab"})
    calls = {
        "create_table_with_environment_context": s.create_table_with_environment_context_args(
            tbl=table, environment_context=t.EnvironmentContext({"k": "v"})),
        "update_table_column_statistics": s.update_table_column_statistics_args(stats_obj=sample_stats(t)),
        "get_partitions": s.get_partitions_args("db", "t", -1),
        "get_partitions_by_names": s.get_partitions_by_names_args("db", "t", ["a=1", "a=2"]),
        "add_partitions": s.add_partitions_args([t.Partition(["1"], "db", "t", 0, 0, table.sd, {"k": "v"})]),
    }
    codec = {strict_binary: BINARY, TCompactProtocol.TCompactProtocol: COMPACT}.get(factory, TJSON)
    for name, args in calls.items():
        header, message = codec.decode_call(write_message(factory, name, TMessageType.CALL, 1, args), schema)
        assert header.name == name and message == write_message(strict_binary, name, TMessageType.CALL, 1, args)


@pytest.mark.parametrize("codec", [BINARY, COMPACT], ids=["binary", "compact"])
def test_a_declared_field_sent_twice_is_refused(apache_hms, schema, codec):
    """HMS's reader keeps the last value, the audit's call_objects the first: refused, so no
    step sees other names than HMS. An unknown id twice is not the IDL's business."""
    def twice(name: str, write_fields) -> bytes:
        buffer = TTransport.TMemoryBuffer()
        out = (strict_binary if codec is BINARY else TCompactProtocol.TCompactProtocol)(buffer)
        out.writeMessageBegin(name, TMessageType.CALL, 1)
        out.writeStructBegin("args")
        write_fields(out)
        out.writeFieldStop()
        out.writeStructEnd()
        out.writeMessageEnd()
        return buffer.getvalue()

    def strings(out, fields):
        for fid, value in fields:
            out.writeFieldBegin("", TType.STRING, fid)
            out.writeString(value)
            out.writeFieldEnd()

    body = twice("get_table", lambda out: strings(out, [(1, "sales"), (2, "t"), (1, "other")]))
    with pytest.raises(ProtocolError, match=r"^get_table: field 1 \(dbname\) sent twice$"):
        codec.decode_call(body, schema)

    def nested(out):
        out.writeFieldBegin("", TType.STRUCT, 1)
        out.writeStructBegin("Table")
        strings(out, [(1, "t"), (2, "a"), (2, "b")])
        out.writeFieldStop()
        out.writeStructEnd()
        out.writeFieldEnd()
    with pytest.raises(ProtocolError, match=r"^create_table: field 2 \(dbName\) of tbl sent twice$"):
        codec.decode_call(twice("create_table", nested), schema)

    body = twice("get_table", lambda out: strings(out, [(1, "sales"), (2, "t"), (9, "x"), (9, "y")]))
    assert codec.decode_call(body, schema)[0].name == "get_table"


def test_positions_hive_3_changed_are_the_only_ones_left_unchecked(schema):
    """Only the listed ids are skipped: the rest of those structs is still checked."""
    body = call("add_dynamic_partitions", '"1":{"rec":{"1":{"str":"x"}}}')
    assert refused(body, schema) == "add_dynamic_partitions: field 1 (txnid) of rqst is i64 in the IDL, got string"
    body = call("fire_listener_event", '"1":{"rec":{"2":{"rec":{"1":{"rec":{"2":{"tf":0}}}}}}}')
    assert refused(body, schema) == ("fire_listener_event: field 2 (filesAddedChecksum) of rqst.data.insertData "
                                     "is list<string> in the IDL, got bool")
    structs = {name for name in schema.structs}
    assert set(CHANGED_SINCE_2_3) <= structs


def test_type_names_follow_the_idl(schema):
    fields = schema.methods["get_partitions_by_names"].args.fields
    assert [type_name(f.spec) for f in fields.values()] == ["string", "string", "list<string>"]
    stats = schema.structs["Decimal"].fields[1].spec
    assert type_name(stats) == "binary"
    assert type_name(schema.structs["Table"].fields[9].spec) == "map<string,string>"


# --- differential: the gateway's check against Apache's generated readers ---------------------

_TAGS = {TType.BOOL: "tf", TType.I8: "i8", TType.I16: "i16", TType.I32: "i32", TType.I64: "i64",
         TType.DOUBLE: "dbl", TType.STRING: "str", TType.STRUCT: "rec", TType.MAP: "map",
         TType.SET: "set", TType.LIST: "lst"}
_PRIMITIVE_VALUES = {
    TType.BOOL: st.sampled_from([0, 1]),
    TType.I8: st.integers(-128, 127),
    TType.I16: st.integers(-(2**15), 2**15 - 1),
    TType.I32: st.integers(-(2**31), 2**31 - 1),
    TType.I64: st.integers(-(2**63), 2**63 - 1),
    TType.DOUBLE: st.floats(allow_nan=False, allow_infinity=False),
    TType.STRING: st.text("abz=_/", max_size=6),
}
#: Methods whose arguments cover every kind of position: scalars, structs, lists of structs,
#: maps, nested containers, IDL binary, unions.
METHODS = ["get_partitions", "get_partitions_by_names", "create_table", "add_partitions",
           "create_database", "grant_privileges", "update_table_column_statistics", "alter_partitions"]


def _wire(spec) -> int:
    if type(spec) is int:
        return TType.STRING if spec == IDL_BINARY else spec
    return spec.ttype


def _tjson_of(spec, draw, depth: int, gen: "_Generator"):
    """``(tag, TJSON value)`` of a random value for ``spec``; with some chance (recorded in
    ``gen.wrong``) a value of another type at this position or inside it."""
    wire = _wire(spec)
    if draw(st.integers(0, 14)) == 0:  # another type here
        other = draw(st.sampled_from([t for t in _PRIMITIVE_VALUES if t != wire]))
        gen.wrong = True
        return _TAGS[other], draw(_PRIMITIVE_VALUES[other])
    if wire in _PRIMITIVE_VALUES:
        value = draw(_PRIMITIVE_VALUES[wire])
        if spec == IDL_BINARY:
            value = base64.b64encode(value.encode()).decode()
        return _TAGS[wire], value
    if isinstance(spec, StructSchema):
        return "rec", gen.struct(spec, draw, depth + 1)
    # containers: one or two elements; empty when deep, or for container-keyed maps, which
    # Apache's Python code cannot read (a list as a dict key)
    plain_keys = not isinstance(spec, MapSpec) or _wire(spec.key) in _PRIMITIVE_VALUES
    count = draw(st.integers(1, 2)) if depth < 4 and plain_keys else 0
    if isinstance(spec, MapSpec):
        entries = {}
        outer_wrong = gen.wrong
        for _ in range(count):
            # an entry whose key repeats replaces the earlier one, so wrongness is per entry
            gen.wrong = False
            ktag, key = _tjson_of(spec.key, draw, depth + 1, gen)
            vtag, value = _tjson_of(spec.value, draw, depth + 1, gen)
            entry_key = json.dumps(key) if ktag in ("rec", "lst", "set", "map") else str(key)
            entries[entry_key] = (ktag, vtag, value, gen.wrong)
        gen.wrong = outer_wrong or any(w for *_, w in entries.values())
        entries = {k: (kt, vt, v) for k, (kt, vt, v, _) in entries.items()}
        ktags = {k for k, _, _ in entries.values()} or {_TAGS[_wire(spec.key)]}
        vtags = {v for _, v, _ in entries.values()} or {_TAGS[_wire(spec.value)]}
        if len(ktags) != 1 or len(vtags) != 1:  # mixed types cannot be one map: the field is wrong
            gen.wrong = True
            return "i32", 0
        return "map", [ktags.pop(), vtags.pop(), len(entries), {k: v for k, (_, _, v) in entries.items()}]
    items = [_tjson_of(spec.elem, draw, depth + 1, gen) for _ in range(count)]
    tags = {tag for tag, _ in items} or {_TAGS[_wire(spec.elem)]}
    if len(tags) != 1:
        gen.wrong = True
        return "i32", 0
    return _TAGS[spec.ttype], [tags.pop(), count, *(value for _, value in items)]


class _Generator:
    """Random TJSON arguments of a method, as Apache would write them but for the types."""

    def __init__(self, apache_hms) -> None:
        self.apache = apache_hms
        self.wrong = False

    def has_default(self, schema: StructSchema) -> set[int]:
        """Field ids with an IDL default: Apache's reader sets them even when not sent."""
        cls = getattr(self.apache.service, schema.name, None) or getattr(self.apache.ttypes, schema.name)
        return {fid for fid, entry in enumerate(cls.thrift_spec) if entry and entry[4] is not None}

    def struct(self, schema: StructSchema, draw, depth: int) -> dict:
        """Known fields only, in id order (as Apache writes them): a random subset, and always
        those with a default."""
        defaults = self.has_default(schema)
        if depth > 4 and not defaults:
            return {}
        out = {}
        for fid, field in sorted(schema.fields.items()):
            if fid in defaults or (depth <= 4 and draw(st.booleans())):
                tag, value = _tjson_of(field.spec, draw, depth, self)
                out[str(fid)] = {tag: value}
        return out


@st.composite
def typed_calls(draw, schema, apache_hms):
    """``(method, TJSON call, whether some value has another type than the IDL's)``."""
    name = draw(st.sampled_from(METHODS))
    gen = _Generator(apache_hms)
    args = gen.struct(schema.methods[name].args, draw, 0)
    return name, json.dumps([1, name, 1, 1, args]).encode(), gen.wrong


def apache_reads_as_sent(apache_hms, name: str, message: bytes) -> bool:
    """Whether Apache's generated ``<name>_args.read`` (HMS's reader) reads back every value as
    sent: it skips a field of another type and reads container elements as the IDL's type, so
    written back the message is the same bytes only when every position had the IDL's type."""
    try:
        _, args = read_message(strict_binary, message, getattr(apache_hms.service, f"{name}_args"))
        return write_message(strict_binary, name, TMessageType.CALL, 1, args) == message
    except Exception:  # a misread (element types differ) fails or reads garbage
        return False


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_accepted_exactly_when_apache_reads_the_call_as_sent(apache_hms, schema, data):
    name, body, wrong = data.draw(typed_calls(schema, apache_hms))
    try:
        message = TJSON.to_binary(body, schema)[1]
    except ProtocolError:  # e.g. a non-integer key generated for an integer-keyed map
        return
    outcomes = decode_all(body, schema)
    assert len(set(outcomes.values())) == 1, outcomes  # every protocol the same
    accepted = outcomes["tjson"] == name
    assert accepted == apache_reads_as_sent(apache_hms, name, message), (body, outcomes)
    assert accepted == (not wrong), (body, outcomes)
    if not accepted:
        assert outcomes["tjson"].startswith(f"{name}: field ") and " in the IDL, got " in outcomes["tjson"]


def test_a_malformed_message_is_a_protocol_error_not_a_mismatch(schema):
    message = TJSON.to_binary(call("get_table", '"1":{"str":"db"}'), schema)[1]
    with pytest.raises(ProtocolError, match="truncated"):
        check_call_types(message[:-1], "get_table", schema)  # no STOP byte
